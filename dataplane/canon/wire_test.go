package canon

import (
	"fmt"
	"testing"
)

// TestCallNames: the last call with an id names it, kept in place up to 32 calls and in a map beyond.
func TestCallNames(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 33, 100} {
		var msgs []Message
		for i := range n {
			msgs = append(msgs, Message{Role: "assistant", Parts: []Part{
				{Type: PartToolCall, CallID: fmt.Sprint("c", i%20), Name: fmt.Sprint("f", i)},
				{Type: PartText, CallID: "text", Name: "not a call"},
				{Type: PartToolCall, Name: "no id"},
			}})
		}
		var c CallNames
		c.ToolNames(msgs)
		for i := range 20 {
			want := ""
			for j := range n {
				if j%20 == i {
					want = fmt.Sprint("f", j)
				}
			}
			if got := c.Get(fmt.Sprint("c", i)); got != want {
				t.Fatalf("%d calls: name of c%d = %q, want %q", n, i, got, want)
			}
		}
		if c.Get("text") != "" || c.Get("") != "" || (*CallNames)(nil).Get("c0") != "" {
			t.Fatalf("%d calls: a name for no call", n)
		}
	}
}
