package proxy

import (
	"bytes"
	"io"
	"net/http"

	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/dataplane/sse"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// The paths of the usage object that carries the cost members in each dialect's final usage event
// (docs/cost.md, "Cost in streams, when asked").
var (
	slotUsage         = []string{"usage"}
	slotResponseUsage = []string{"response", "usage"}
	slotUsageMetadata = []string{"usageMetadata"}
)

// costSlot is where the client's final usage event carries the cost members, nil when the event (read
// into rel by its dialect's relay reader) is not that event: alpha chat's usage chunk, alpha responses'
// response.completed / .incomplete / .failed, beta's message_delta, gamma's chunk with finishReason.
func costSlot(kind vocab.Kind, rel *jsonkit.Relay) []string {
	switch kind {
	case vocab.KindAlphaChatCompletions:
		if rel.UsageChunk {
			return slotUsage
		}
	case vocab.KindAlphaResponses:
		if rel.TypeIn("response.completed", "response.incomplete") || rel.TypeIs("response.failed") {
			return slotResponseUsage
		}
	case vocab.KindBetaMessages:
		if rel.TypeIs("message_delta") && rel.Usage != nil {
			return slotUsage
		}
	case vocab.KindGammaGenerateContent:
		if rel.Terminal && rel.UsageMetadata {
			return slotUsageMetadata
		}
	}
	return nil
}

func (c *call) wantsUsageChunk() bool { return c.usageChunk }

// asksStreamCost reports whether the client's stream carries its cost: it asked and is shown costs.
func (c *call) asksStreamCost() bool { return c.disclose && c.askCost && c.billable() }

// streamCost appends to dst[:0] the cost members of the final usage event — "cost" (the amount as a JSON
// number with the header's digits) and "tollgate" (docs/cost.md) — priced from usage u as the record will
// be, or returns nil when the client is not told (did not ask, or no usage was reported).
func (c *call) streamCost(dst []byte, u usage.Usage, found bool) []byte {
	if !found || !c.asksStreamCost() {
		return nil
	}
	o := c.h.outcome(c)
	o.Upstream, o.UpstreamFound, o.Local, o.EndState = u, true, nil, vocab.EndCompleted
	p := settle.Price(o)
	w := jsonkit.Writer{B: dst[:0]}
	w.Key("cost")
	if jsonkit.ValidJSON([]byte(p.Cost)) {
		w.B = append(w.B, p.Cost...)
	} else {
		w.Str(p.Cost)
	}
	w.Key("tollgate")
	w.Open('{')
	w.Key("cost")
	w.Str(p.Cost)
	w.Key("price_rule_id")
	w.Int(p.RuleID)
	w.Key("price_rule_version")
	w.Int(p.RuleVersion)
	if p.Tier != "" {
		w.Key("service_tier")
		w.Str(p.Tier)
	}
	w.Key("usage_source")
	w.Str(string(p.Source))
	w.Key("request_id")
	w.Str(c.reqID)
	w.Close('}')
	return w.B
}

// withCost returns data with the cost members added at slot (into scratch), or false to relay it as it is.
func withCost(ct costTeller, scratch *[]byte, data []byte, slot []string, u usage.Usage, found bool) ([]byte, bool) {
	members := ct.streamCost((*scratch)[:0], u, found)
	if members == nil {
		return nil, false
	}
	out, ok := jsonkit.AppendWithMembers(members[len(members):], data, members, slot...)
	*scratch = members
	return out, ok
}

// costEventWriter is the client writer of a translated stream whose client asked for its cost: each Write of
// the dialect encoders is one whole client event (an SSE event, or a gamma array element with its
// framing); the final usage event gets the cost members, priced from the upstream's billing so far.
type costEventWriter struct {
	w       io.Writer
	kind    vocab.Kind
	sse     bool
	ct      costTeller
	billed  func() (usage.Usage, bool)
	rel     jsonkit.Relay
	scratch []byte
	out     []byte
}

func (cw *costEventWriter) Write(p []byte) (int, error) {
	if out, ok := cw.rewrite(p); ok {
		if _, err := cw.w.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return cw.w.Write(p)
}

// rewrite returns the event p with the cost members, or false when p is not the final usage event.
func (cw *costEventWriter) rewrite(p []byte) ([]byte, bool) {
	read := relayReader(cw.kind)
	if !cw.sse {
		framing, elem := jsonkit.SplitArrayElement(p)
		if len(elem) == 0 {
			return nil, false
		}
		read(elem, &cw.rel)
		slot := costSlot(cw.kind, &cw.rel)
		if slot == nil {
			return nil, false
		}
		u, found := cw.billed()
		data, ok := withCost(cw.ct, &cw.scratch, elem, slot, u, found)
		if !ok {
			return nil, false
		}
		cw.out = append(append(cw.out[:0], framing...), data...)
		return cw.out, true
	}
	ev, err := sse.NewDecoder(bytes.NewReader(p)).Next()
	if err != nil {
		return nil, false
	}
	read(ev.Data, &cw.rel)
	slot := costSlot(cw.kind, &cw.rel)
	if slot == nil {
		return nil, false
	}
	u, found := cw.billed()
	data, ok := withCost(cw.ct, &cw.scratch, ev.Data, slot, u, found)
	if !ok {
		return nil, false
	}
	cw.out = spliceEvent(cw.out[:0], p, ev.Name, ev.Data, data)
	return cw.out, true
}

// spliceEvent appends the SSE event raw (name, data) with its data replaced by repl, keeping the event's own
// framing (line ends: gamma's encoder writes CRLF, and some SDKs split events on the framing they saw
// first); a data that is not one line of raw is written in canonical framing instead.
func spliceEvent(dst, raw []byte, name string, data, repl []byte) []byte {
	if i := bytes.Index(raw, data); i >= 0 && len(data) > 0 {
		dst = append(dst, raw[:i]...)
		dst = append(dst, repl...)
		return append(dst, raw[i+len(data):]...)
	}
	return sse.AppendEvent(dst, name, repl)
}

// usageKey is the top-level member OpenRouter's usage accounting uses in alpha chat requests.
var usageKey = []byte(`"usage"`)

// usageInclude takes OpenRouter's "usage" member out of an alpha chat request (alpha upstreams refuse
// unknown members); "usage": {"include": true} asks for the usage chunk and, when the key is shown its
// costs, for the cost in it (docs/cost.md, "Cost in streams, when asked").
func (h *Handler) usageInclude(r *http.Request, c *call) error {
	if !bytes.Contains(c.body, usageKey) {
		return nil // the common case: one fast search, no parse
	}
	v, ok := jsonkit.Member(c.body, "usage")
	if !ok || v == nil {
		return nil
	}
	inc, _ := jsonkit.Member(v, "include")
	include := string(inc) == "true" // read before the body is rewritten (inc is a view of it)
	body, ok := jsonkit.AppendWithoutMember(nil, c.body, "usage")
	if !ok {
		return nil
	}
	c.body = append(c.body[:0], body...)
	if err := h.readRequest(r, c); err != nil { // the members' offsets moved
		return err
	}
	if include {
		c.usageChunk = true
		c.askCost = c.disclose
	}
	return nil
}
