package gamma

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPendingCalls: the calls kept in place answer as the map of each name's unanswered ids did (the code
// before), below and beyond 32 calls, with and without ids on the responses.
func TestPendingCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		var c PendingCalls
		ref := map[string][]string{}
		for step := range 10 + round%120 {
			name := fmt.Sprint("f", rng.IntN(3))
			if rng.IntN(2) == 0 {
				id := fmt.Sprint("id", rng.IntN(40))
				c.Add(name, id)
				ref[name] = append(ref[name], id)
				continue
			}
			id := ""
			if rng.IntN(2) == 0 {
				id = fmt.Sprint("id", rng.IntN(40))
			}
			want := id
			if q := ref[name]; len(q) > 0 {
				if want == "" {
					want = q[0]
				}
				for qi, v := range q {
					if v == want {
						ref[name] = append(q[:qi:qi], q[qi+1:]...)
						break
					}
				}
			}
			if got := c.Answer(name, id); got != want {
				t.Fatalf("round %d step %d: answer(%q, %q) = %q, want %q", round, step, name, id, got, want)
			}
		}
	}
}
