package alpha

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/dataplane/sse"
	"github.com/tollgate/tollgate/shared/testkit"
	"github.com/tollgate/tollgate/shared/usage"
)

// realWireChat returns the alpha chat completions answers of the recorded provider traffic (testkit.RealWire):
// stream bodies (SSE) and buffered bodies, each with the usage it must bill.
func realWireChat(t testing.TB) (streams, bodies [][]byte, wantStreams, wantBodies []usage.Usage) {
	s, b := testkit.RealWire(t, "alpha_chat_completions")
	streams, wantStreams = testkit.BodiesAndUsage(s)
	bodies, wantBodies = testkit.BodiesAndUsage(b)
	return streams, bodies, wantStreams, wantBodies
}

// streamBilled decodes an SSE stream with the translator's decoder and returns what it bills and the events
// it read (a stream the translator cannot read stops after the event it refused, whose usage members are still billed when it is JSON).
func streamBilled(stream []byte) (u usage.Usage, found bool, read [][]byte) {
	d := Chat{}.NewDecoder(&canon.State{})
	dec := sse.NewDecoder(bytes.NewReader(stream))
	var out []canon.Event
	for {
		ev, err := dec.Next()
		if err != nil {
			break
		}
		data := bytes.Clone(ev.Data)
		var derr error
		out, derr = d.Decode(ev.Name, bytes.TrimSpace(ev.Data), out[:0])
		if derr != nil {
			if jsonkit.ValidJSON(bytes.TrimSpace(ev.Data)) { // an event that is not JSON bills nothing
				read = append(read, data)
			}
			break
		}
		read = append(read, data)
	}
	u, found, _ = d.(canon.Biller).Billed()
	return u, found, read
}

// relayBilled bills the events of a stream as the passthrough does: each event's relay reader members, read
// by Billing.ObserveRelay when the reader found usage members.
func relayBilled(events [][]byte) (u usage.Usage, found bool) {
	var b Billing
	var rel jsonkit.Relay
	for _, ev := range events {
		ReadChatRelay(ev, &rel)
		if rel.HasUsage {
			b.ObserveRelay(&rel)
		}
	}
	return b.Usage()
}

// checkStreamAgrees compares the decoder's billing of a stream with the passthrough relay billing of the
// events the decoder read.
func checkStreamAgrees(t *testing.T, stream []byte) {
	got, found, read := streamBilled(stream)
	want, wantFound := relayBilled(read)
	if got != want || found != wantFound {
		t.Fatalf("decoder bills %+v found %v; the relay billing %+v %v\n%.2000s", got, found, want, wantFound, stream)
	}
}

// checkBodyAgrees compares the billing of a buffered answer's decoding (DecodeResponse) with BillChatBody,
// and BillChatBody on the whole body with BillChatBody on the usage members jsonkit.BodyScanner keeps of it
// (the passthrough's reading of a buffered answer). Bodies that are not valid JSON are left out.
func checkBodyAgrees(t *testing.T, body []byte) {
	if !json.Valid(body) {
		return
	}
	want, wantFound, werr := BillChatBody(body)
	var sc jsonkit.BodyScanner
	_, _ = sc.Write(body)
	if red := sc.Reduced(); red != nil {
		got, found, err := BillChatBody(red)
		if (err != nil) != (werr != nil) || got != want || found != wantFound {
			t.Fatalf("BillChatBody of the kept members %+v found %v err %v; of the body %+v %v %v: %s", got, found, err, want, wantFound, werr, body)
		}
	}
	r, err := Chat{}.DecodeResponse(body, &canon.State{})
	switch {
	case err != nil:
		return
	case werr != nil:
		t.Fatalf("the translator decoded a body BillChatBody refuses (%v): %s", werr, body)
	case (r.Billed != nil) != wantFound:
		t.Fatalf("billed %v, BillChatBody found %v: %s", r.Billed, wantFound, body)
	case r.Billed != nil && *r.Billed != want:
		t.Fatalf("billed %+v, BillChatBody %+v: %s", *r.Billed, want, body)
	}
}

// TestBillingOnRealWire checks every real alpha chat answer is billed what it must be: a stream by the
// decoder and by the relay billing, a buffered answer by BillChatBody and by its decoding.
func TestBillingOnRealWire(t *testing.T) {
	streams, bodies, wantStreams, wantBodies := realWireChat(t)
	for i, s := range streams {
		got, found, read := streamBilled(s)
		if !found || got != wantStreams[i] {
			t.Fatalf("stream %d: decoder bills %+v found %v, want %+v\n%.2000s", i, got, found, wantStreams[i], s)
		}
		if got, found := relayBilled(read); !found || got != wantStreams[i] {
			t.Fatalf("stream %d: relay billing %+v found %v, want %+v", i, got, found, wantStreams[i])
		}
	}
	for i, b := range bodies {
		if got, found, err := BillChatBody(b); err != nil || !found || got != wantBodies[i] {
			t.Fatalf("body %d: BillChatBody %+v found %v err %v, want %+v\n%.2000s", i, got, found, err, wantBodies[i], b)
		}
		checkBodyAgrees(t, b)
	}
}

// Cached and cache-written tokens leave input (cache writes are 30-minute writes), image tokens leave
// output, the usage's speed wins over a chunk's service_tier; a tier on every chunk is kept.
func TestBillingChatRules(t *testing.T) {
	stream := "data: " + `{"id":"c","model":"m","service_tier":"Default","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}` + "\n\n" +
		"data: " + `{"id":"c","model":"m","service_tier":"flex","choices":[],"usage":{"prompt_tokens":"100","completion_tokens":30,"total_tokens":130,` +
		`"prompt_tokens_details":{"cached_tokens":40,"cache_write_tokens":10},"completion_tokens_details":{"image_tokens":5,"reasoning_tokens":7}}}` + "\n\ndata: [DONE]\n\n"
	u, found, _ := streamBilled([]byte(stream))
	want := usage.Usage{Input: 50, CacheRead: 40, CacheCreation30m: 10, Output: 25, ImageOutput: 5, ReportedTier: "flex"}
	if !found || u != want {
		t.Fatalf("billed %+v found %v, want %+v", u, found, want)
	}
	checkStreamAgrees(t, []byte(stream))
	fast := strings.Replace(stream, `"usage":{`, `"usage":{"speed":"fast",`, 1)
	if u, _, _ := streamBilled([]byte(fast)); u.ReportedTier != "fast" {
		t.Fatalf("tier %q with speed fast, want fast", u.ReportedTier)
	}
	checkStreamAgrees(t, []byte(fast))
}

// escapedLetter finds a JSON escape of a letter or '_', with which a member name can be spelled other than
// exactly.
var escapedLetter = regexp.MustCompile(`\\u00(4[1-9a-fA-F]|5[0-9aAfF]|6[1-9a-fA-F]|7[0-9aA])`)

// nameVariant reports whether b may spell one of names other than exactly (in another case, or escaped).
// The translator's decoders match names as the JSON library does (exact, else ignoring case, after
// unescaping); the relay reader (ReadChatRelay) compares the raw names exactly. Real upstreams write the exact
// names: the two are compared where they read the same members.
func nameVariant(b []byte, names ...string) bool {
	if escapedLetter.Match(b) {
		return true
	}
	lower := bytes.ToLower(b)
	for _, n := range names {
		q := []byte(`"` + n + `"`)
		if bytes.Count(lower, bytes.ToLower(q)) != bytes.Count(b, q) {
			return true
		}
	}
	return false
}

func FuzzBillingAgrees(f *testing.F) {
	streams, bodies, _, _ := realWireChat(f)
	for _, s := range streams {
		f.Add(s, false)
	}
	for _, b := range bodies {
		f.Add(b, true)
	}
	billingNames := []string{"usage", "service_tier", "speed", "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens", "total_tokens", "prompt_tokens_details", "input_tokens_details", "completion_tokens_details", "output_tokens_details", "cached_tokens", "cache_write_tokens", "image_tokens"}
	f.Fuzz(func(t *testing.T, b []byte, body bool) {
		if nameVariant(b, billingNames...) {
			return
		}
		if body {
			checkBodyAgrees(t, b)
			return
		}
		if !strings.Contains(string(b), "data:") {
			return
		}
		checkStreamAgrees(t, b)
	})
}
