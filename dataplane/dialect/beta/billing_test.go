package beta

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/dataplane/sse"
	"github.com/tollgate/tollgate/shared/usage"
)

// realWireBeta returns the beta messages answers of ../shared/wire/realwire.jsonl: stream bodies (SSE) and
// buffered bodies.
func realWireBeta(t testing.TB) (streams, bodies [][]byte) {
	f, err := os.Open("../../../../shared/wire/realwire.jsonl")
	if err != nil {
		t.Fatalf("the real-wire corpus: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var row struct {
			Dialect      string `json:"dialect"`
			Stream       bool   `json:"stream"`
			Status       int    `json:"status"`
			ResponseBody string `json:"response_body"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		if row.Dialect != "beta_messages" || row.Status != 200 {
			continue
		}
		if row.Stream {
			streams = append(streams, []byte(row.ResponseBody))
		} else {
			bodies = append(bodies, []byte(row.ResponseBody))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(streams) == 0 || len(bodies) == 0 {
		t.Fatalf("%d beta streams and %d bodies in the corpus, want some of each", len(streams), len(bodies))
	}
	return streams, bodies
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

// checkStreamAgrees compares the decoder's billing of a stream with shared/usage's accumulator reading the
// same events.
func checkStreamAgrees(t *testing.T, stream []byte) {
	got, found, reported, data := streamBilled(stream)
	var acc usage.BetaStream
	for _, ev := range data {
		_ = acc.Observe(ev)
	}
	want, wantFound := acc.Result()
	if got != want || found != wantFound || reported != acc.OutputReported() {
		t.Fatalf("decoder bills %+v found %v output reported %v; the accumulator %+v %v %v\n%.2000s",
			got, found, reported, want, wantFound, acc.OutputReported(), stream)
	}
}

// checkRelayAgrees compares the passthrough billing of a stream (its relay reader's members, read by
// Billing.ObserveRelay) with shared/usage's accumulator reading every event. Events that are not valid JSON
// are left out: the relay reader checks structure only (a scalar is not validated), as shared/usage's scan
// did, but the two skip a malformed scalar differently; providers send valid JSON.
func checkRelayAgrees(t *testing.T, stream []byte) {
	dec := sse.NewDecoder(bytes.NewReader(stream))
	var b Billing
	var acc usage.BetaStream
	var rel jsonkit.Relay
	for {
		ev, err := dec.Next()
		if err != nil {
			break
		}
		if !json.Valid(ev.Data) {
			continue
		}
		ReadRelay(ev.Data, &rel)
		if rel.HasUsage {
			b.ObserveRelay(&rel)
		}
		_ = acc.Observe(ev.Data)
	}
	got, found := b.Usage()
	want, wantFound := acc.Result()
	if got != want || found != wantFound || b.OutputReported() != acc.OutputReported() {
		t.Fatalf("relay billing %+v found %v output reported %v; the accumulator %+v %v %v\n%.2000s",
			got, found, b.OutputReported(), want, wantFound, acc.OutputReported(), stream)
	}
}

// checkBodyAgrees compares the billing of a buffered answer's decoding with usage.FromBeta; a body the
// translator cannot decode is billed by the data plane with usage.FromBody instead (proxy transform.go).
func checkBodyAgrees(t *testing.T, body []byte) {
	checkBillBodyAgrees(t, body)
	r, err := Messages{}.DecodeResponse(body, &canon.State{})
	if err != nil {
		return
	}
	want, wantFound, werr := usage.FromBeta(body)
	switch {
	case werr != nil:
		t.Fatalf("the translator decoded a body usage.FromBeta refuses (%v): %s", werr, body)
	case (r.Billed != nil) != wantFound:
		t.Fatalf("billed %v, FromBeta found %v: %s", r.Billed, wantFound, body)
	case r.Billed != nil && *r.Billed != want:
		t.Fatalf("billed %+v, FromBeta %+v: %s", *r.Billed, want, body)
	}
}

// checkBillBodyAgrees compares BillBody (a buffered answer's usage members alone) with usage.FromBeta. Bodies
// that are not valid JSON are left out (encoding/json refuses what the event decoder carries: invalid UTF-8).
func checkBillBodyAgrees(t *testing.T, body []byte) {
	if !json.Valid(body) {
		return
	}
	got, found, err := BillBody(body)
	want, wantFound, werr := usage.FromBeta(body)
	if (err != nil) != (werr != nil) || got != want || found != wantFound {
		t.Fatalf("BillBody %+v found %v err %v; FromBeta %+v %v %v: %s", got, found, err, want, wantFound, werr, body)
	}
}

func TestBillingAgreesOnRealWire(t *testing.T) {
	streams, bodies := realWireBeta(t)
	billed := 0
	for _, s := range streams {
		checkStreamAgrees(t, s)
		checkRelayAgrees(t, s)
		if _, found, _, _ := streamBilled(s); found {
			billed++
		}
	}
	for _, b := range bodies {
		checkBodyAgrees(t, b)
	}
	if billed != len(streams) {
		t.Fatalf("%d of %d real streams billed from the decoder", billed, len(streams))
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
	checkStreamAgrees(t, []byte(start+delta))
	checkRelayAgrees(t, []byte(start))
	checkRelayAgrees(t, []byte(start+delta))
}

// escapedLetter finds a JSON escape of a letter or '_', with which a member name can be spelled other than
// exactly.
var escapedLetter = regexp.MustCompile(`\\u00(4[1-9a-fA-F]|5[0-9aAfF]|6[1-9a-fA-F]|7[0-9aA])`)

// nameVariant reports whether b may spell one of names other than exactly (in another case, or escaped).
// The translator's decoders match names as the JSON library does (exact, else ignoring case, after
// unescaping); shared/usage's stream readers compare the raw names exactly. Real upstreams write the exact
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
	streams, bodies := realWireBeta(f)
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
		checkRelayAgrees(t, b)
	})
}
