package beta

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

// realWireBeta returns the beta messages answers of the recorded provider traffic (testkit.RealWire): stream
// bodies (SSE) and buffered bodies, each with the usage it must bill.
func realWireBeta(t testing.TB) (streams, bodies [][]byte, wantStreams, wantBodies []usage.Usage) {
	s, b := testkit.RealWire(t, "beta_messages")
	streams, wantStreams = testkit.BodiesAndUsage(s)
	bodies, wantBodies = testkit.BodiesAndUsage(b)
	return streams, bodies, wantStreams, wantBodies
}

// streamBilled decodes an SSE stream with the translator's decoder and returns what it bills, as far as the
// decoder read (a stream the translator cannot read stops after the event it refused, whose usage members are still billed when it is JSON).
func streamBilled(stream []byte) (u usage.Usage, found, reported bool, data [][]byte) {
	d := Messages{}.NewDecoder(&canon.State{})
	dec := sse.NewDecoder(bytes.NewReader(stream))
	var out []canon.Event
	for {
		ev, err := dec.Next()
		if err != nil {
			break
		}
		var derr error
		out, derr = d.Decode(ev.Name, bytes.TrimSpace(ev.Data), out[:0])
		if derr != nil {
			if jsonkit.ValidJSON(bytes.TrimSpace(ev.Data)) { // an event that is not JSON bills nothing
				data = append(data, bytes.Clone(ev.Data))
			}
			break
		}
		data = append(data, bytes.Clone(ev.Data))
	}
	u, found, reported = d.(canon.Biller).Billed()
	return u, found, reported, data
}

// relayBilled bills the events of a stream as the passthrough does: each event's relay reader members, read
// by Billing.ObserveRelay when the reader found usage members.
func relayBilled(events [][]byte) (u usage.Usage, found, reported bool) {
	var b Billing
	var rel jsonkit.Relay
	for _, ev := range events {
		ReadRelay(ev, &rel)
		if rel.HasUsage {
			b.ObserveRelay(&rel)
		}
	}
	u, found = b.Usage()
	return u, found, b.OutputReported()
}

// checkStreamAgrees compares the decoder's billing of a stream with the passthrough relay billing of the
// events the decoder read (those the relay reader sees in a translated stream's place).
func checkStreamAgrees(t *testing.T, stream []byte) {
	got, found, reported, data := streamBilled(stream)
	want, wantFound, wantReported := relayBilled(data)
	if got != want || found != wantFound || reported != wantReported {
		t.Fatalf("decoder bills %+v found %v output reported %v; the relay billing %+v %v %v\n%.2000s",
			got, found, reported, want, wantFound, wantReported, stream)
	}
}

// checkBodyAgrees compares the billing of a buffered answer's decoding (DecodeResponse) with BillBody, and
// BillBody on the whole body with BillBody on the usage members jsonkit.BodyScanner keeps of it (the
// passthrough's reading of a buffered answer). Bodies that are not valid JSON are left out.
func checkBodyAgrees(t *testing.T, body []byte) {
	if !json.Valid(body) {
		return
	}
	want, wantFound, werr := BillBody(body)
	var sc jsonkit.BodyScanner
	_, _ = sc.Write(body)
	if red := sc.Reduced(); red != nil {
		got, found, err := BillBody(red)
		if (err != nil) != (werr != nil) || got != want || found != wantFound {
			t.Fatalf("BillBody of the kept members %+v found %v err %v; of the body %+v %v %v: %s", got, found, err, want, wantFound, werr, body)
		}
	}
	r, err := Messages{}.DecodeResponse(body, &canon.State{})
	switch {
	case err != nil:
		return
	case werr != nil:
		t.Fatalf("the translator decoded a body BillBody refuses (%v): %s", werr, body)
	case (r.Billed != nil) != wantFound:
		t.Fatalf("billed %v, BillBody found %v: %s", r.Billed, wantFound, body)
	case r.Billed != nil && *r.Billed != want:
		t.Fatalf("billed %+v, BillBody %+v: %s", *r.Billed, want, body)
	}
}

// TestBillingOnRealWire checks every real beta answer is billed what it must be: a stream by the decoder
// and by the relay billing (with its output reported), a buffered answer by BillBody and by its decoding.
func TestBillingOnRealWire(t *testing.T) {
	streams, bodies, wantStreams, wantBodies := realWireBeta(t)
	for i, s := range streams {
		got, found, reported, data := streamBilled(s)
		if !found || !reported || got != wantStreams[i] {
			t.Fatalf("stream %d: decoder bills %+v found %v output reported %v, want %+v\n%.2000s", i, got, found, reported, wantStreams[i], s)
		}
		if got, found, reported := relayBilled(data); !found || !reported || got != wantStreams[i] {
			t.Fatalf("stream %d: relay billing %+v found %v output reported %v, want %+v", i, got, found, reported, wantStreams[i])
		}
		checkStreamAgrees(t, s)
	}
	for i, b := range bodies {
		if got, found, err := BillBody(b); err != nil || !found || got != wantBodies[i] {
			t.Fatalf("body %d: BillBody %+v found %v err %v, want %+v\n%.2000s", i, got, found, err, wantBodies[i], b)
		}
		checkBodyAgrees(t, b)
	}
}

// A stream cut before message_delta reports its output as a placeholder; message_delta's later zero is a
// value reported (kept), an absent member is not.
func TestBillingStreamRules(t *testing.T) {
	start := `event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"m","model":"b","content":[],"service_tier":"priority",` +
		`"usage":{"input_tokens":"12","cache_read_input_tokens":5.0,"cache_creation_input_tokens":9,"cache_creation":{"ephemeral_1h_input_tokens":4},"output_tokens":1,"speed":"fast"}}}` + "\n\n"
	cut, found, reported, _ := streamBilled([]byte(start))
	want := usage.Usage{Input: 12, Output: 1, CacheRead: 5, CacheCreation5m: 5, CacheCreation1h: 4, ReportedTier: "fast"}
	if !found || reported || cut != want {
		t.Fatalf("cut stream: %+v found %v reported %v, want %+v found, output not reported", cut, found, reported, want)
	}
	delta := `event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":40,"cache_read_input_tokens":0}}` + "\n\n"
	whole, found, reported, _ := streamBilled([]byte(start + delta))
	want.Output, want.CacheRead = 40, 0
	if !found || !reported || whole != want {
		t.Fatalf("whole stream: %+v found %v reported %v, want %+v", whole, found, reported, want)
	}
	checkStreamAgrees(t, []byte(start))
	checkStreamAgrees(t, []byte(start+delta))
}

// escapedLetter finds a JSON escape of a letter or '_', with which a member name can be spelled other than
// exactly.
var escapedLetter = regexp.MustCompile(`\\u00(4[1-9a-fA-F]|5[0-9aAfF]|6[1-9a-fA-F]|7[0-9aA])`)

// nameVariant reports whether b may spell one of names other than exactly (in another case, or escaped).
// The translator's decoders match names as the JSON library does (exact, else ignoring case, after
// unescaping); the relay reader (ReadRelay) compares the raw names exactly. Real upstreams write the exact
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
	streams, bodies, _, _ := realWireBeta(f)
	for _, s := range streams {
		f.Add(s, false)
	}
	for _, b := range bodies {
		f.Add(b, true)
	}
	f.Add([]byte(`{"usage":{"input_tokens":"7","output_tokens":-3,"cache_creation_input_tokens":10,"cache_creation":{"ephemeral_5m_input_tokens":2}},"service_tier":"SERVICE_TIER_FLEX"}`), true)
	billingNames := []string{"usage", "message", "service_tier", "speed", "input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "cache_creation", "ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"}
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
