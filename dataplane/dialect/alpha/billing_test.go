package alpha

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

// realWireChat returns the alpha chat completions answers of ../shared/wire/realwire.jsonl: stream bodies
// (SSE) and buffered bodies.
func realWireChat(t testing.TB) (streams, bodies [][]byte) {
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
		if row.Dialect != "alpha_chat_completions" || row.Status != 200 {
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
		t.Fatalf("%d chat streams and %d bodies in the corpus, want some of each", len(streams), len(bodies))
	}
	return streams, bodies
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

func checkStreamAgrees(t *testing.T, stream []byte) {
	got, found, read := streamBilled(stream)
	var acc usage.AlphaChatStream
	for _, ev := range read {
		_ = acc.Observe(ev)
	}
	want, wantFound := acc.Result()
	if got != want || found != wantFound {
		t.Fatalf("decoder bills %+v found %v; the accumulator %+v %v\n%.2000s", got, found, want, wantFound, stream)
	}
}

// checkRelayAgrees compares the passthrough billing of a stream (its relay reader's members, read by
// Billing.ObserveRelay) with shared/usage's accumulator reading every event. Events that are not valid JSON
// are left out: the relay reader checks structure only, as shared/usage's scan did, but the two skip a
// malformed scalar differently; providers send valid JSON.
func checkRelayAgrees(t *testing.T, stream []byte) {
	dec := sse.NewDecoder(bytes.NewReader(stream))
	var b Billing
	var acc usage.AlphaChatStream
	var rel jsonkit.Relay
	for {
		ev, err := dec.Next()
		if err != nil {
			break
		}
		if !json.Valid(ev.Data) {
			continue
		}
		ReadChatRelay(ev.Data, &rel)
		if rel.HasUsage {
			b.ObserveRelay(&rel)
		}
		_ = acc.Observe(ev.Data)
	}
	got, found := b.Usage()
	want, wantFound := acc.Result()
	if got != want || found != wantFound {
		t.Fatalf("relay billing %+v found %v; the accumulator %+v %v\n%.2000s", got, found, want, wantFound, stream)
	}
}

// checkBodyAgrees compares the billing of a buffered answer's decoding with usage.FromAlphaChat; a body the
// translator cannot decode is billed by the data plane with usage.FromBody instead (proxy transform.go).
func checkBodyAgrees(t *testing.T, body []byte) {
	checkBillBodyAgrees(t, body)
	r, err := Chat{}.DecodeResponse(body, &canon.State{})
	if err != nil {
		return
	}
	want, wantFound, werr := usage.FromAlphaChat(body)
	switch {
	case werr != nil:
		t.Fatalf("the translator decoded a body usage.FromAlphaChat refuses (%v): %s", werr, body)
	case (r.Billed != nil) != wantFound:
		t.Fatalf("billed %v, FromAlphaChat found %v: %s", r.Billed, wantFound, body)
	case r.Billed != nil && *r.Billed != want:
		t.Fatalf("billed %+v, FromAlphaChat %+v: %s", *r.Billed, want, body)
	}
}

// checkBillBodyAgrees compares BillChatBody (a buffered answer's usage members alone) with
// usage.FromAlphaChat. Bodies that are not valid JSON are left out (encoding/json refuses what the event
// decoder carries: invalid UTF-8).
func checkBillBodyAgrees(t *testing.T, body []byte) {
	if !json.Valid(body) {
		return
	}
	got, found, err := BillChatBody(body)
	want, wantFound, werr := usage.FromAlphaChat(body)
	if (err != nil) != (werr != nil) || got != want || found != wantFound {
		t.Fatalf("BillChatBody %+v found %v err %v; FromAlphaChat %+v %v %v: %s", got, found, err, want, wantFound, werr, body)
	}
}

func TestBillingAgreesOnRealWire(t *testing.T) {
	streams, bodies := realWireChat(t)
	billed := 0
	for _, s := range streams {
		checkStreamAgrees(t, s)
		checkRelayAgrees(t, s)
		if _, found, _ := streamBilled(s); found {
			billed++
		}
	}
	for _, b := range bodies {
		checkBodyAgrees(t, b)
	}
	if billed == 0 {
		t.Fatalf("none of %d real streams billed from the decoder", len(streams))
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
	checkRelayAgrees(t, []byte(stream))
	checkRelayAgrees(t, []byte(fast))
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
	streams, bodies := realWireChat(f)
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
		checkRelayAgrees(t, b)
	})
}
