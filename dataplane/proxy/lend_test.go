package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
)

// lendChecker wraps the real Translator and checks the lending rule of Transformer.Begin: the body it was
// given is unchanged until its Transform's last call has returned.
type lendChecker struct {
	*Translator
	mu     sync.Mutex
	broken []string
	checks int
}

func (l *lendChecker) Begin(class Class, cell snapshot.Cell, body []byte, upstreamModel string) (Transform, error) {
	tr, err := l.Translator.Begin(class, cell, body, upstreamModel)
	if err != nil {
		return nil, err
	}
	return &lentTransform{Transform: tr, l: l, lent: body, want: bytes.Clone(body)}, nil
}

func (l *lendChecker) check(t *lentTransform, when string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checks++
	if !bytes.Equal(t.lent, t.want) {
		l.broken = append(l.broken, fmt.Sprintf("%s: lent body changed: %.80q", when, t.lent))
	}
}

type lentTransform struct {
	Transform
	l          *lendChecker
	lent, want []byte
}

func (t *lentTransform) Request() (string, string, http.Header, []byte) {
	t.l.check(t, "request")
	return t.Transform.Request()
}

func (t *lentTransform) Respond(ctx context.Context, w http.ResponseWriter, resp *http.Response) Result {
	t.l.check(t, "respond start")
	res := t.Transform.Respond(ctx, w, resp)
	t.l.check(t, "respond end")
	return res
}

// TestTransformerBodyIsLentUnchanged: the proxy lends the request body to the translator (no copy), so it
// must neither change nor reuse it while a translated answer is written. Many concurrent translated
// requests, buffered and streamed, with released bodies poisoned before they go back to the pool: every
// Transform sees its body unchanged until its last call returns, every client gets its answer, and under
// -race a translator reading a released (poisoned) body would race.
func TestTransformerBodyIsLentUnchanged(t *testing.T) {
	poisonReleased = true
	t.Cleanup(func() { poisonReleased = false })
	dest := "alpha_chat_completions"
	b, front, _ := setupMock(t, func(s *snapshotv1.Snapshot) {
		for i, op := range []string{"generate_content", "stream_generate_content"} {
			s.RoutingRules = append(s.RoutingRules, &configv1.RoutingRule{Id: int64(3 + i), ProviderId: 1, Operation: op, Kind: "beta_messages",
				Implementation: "transform_to", DestOperation: &op, DestKind: &dest, Enabled: true})
		}
	})
	lc := &lendChecker{Translator: &Translator{}}
	b.h.o.Transformer = lc
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 8 {
				stream := i%2 == 1
				body := fmt.Sprintf(`{"model":"chat","max_tokens":50,"stream":%v,"system":"request %d of %d","messages":[{"role":"user","content":"hi %d %d"},`+
					`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_%d","name":"tool_%d_%d","input":{"a":%d}}]},`+
					`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%d","content":"ok"}]}],`+
					`"tools":[{"name":"tool_%d_%d","input_schema":{"type":"object"}}]}`, stream, i, g, g, i, i, g, i, i, i, g, i)
				resp := postTo(t, front, "/v1/messages", body, nil)
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				want := `"type":"message"`
				if stream {
					want = "message_stop"
				}
				if resp.StatusCode != 200 || !bytes.Contains(got, []byte(want)) {
					errs <- fmt.Sprintf("request %d/%d: %d %.200s", g, i, resp.StatusCode, got)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.checks < 3*32 {
		t.Fatalf("%d checks, want %d (every request translated)", lc.checks, 3*32)
	}
	for _, e := range lc.broken {
		t.Error(e)
	}
}
