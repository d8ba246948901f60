package gamma

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/dataplane/sse"
	"github.com/tollgate/tollgate/shared/testkit"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

type wireAnswer struct {
	body   []byte
	header http.Header
	want   usage.Usage
}

// realWireGamma returns the gamma generateContent answers of the recorded provider traffic (testkit.RealWire:
// stream bodies, SSE or a JSON array, and buffered bodies) with their response headers and the usage each must
// bill (the cloud variant's trafficType named as the tier it is).
func realWireGamma(t testing.TB) (streams, bodies []wireAnswer) {
	s, b := testkit.RealWire(t, "gamma_generate_content")
	for _, as := range [][]testkit.WireAnswer{s, b} {
		for i := range as {
			switch w := &as[i].Want; w.ReportedTier {
			case "on_demand":
				w.ReportedTier = "standard"
			case "on_demand_flex", "on_demand_priority":
				w.ReportedTier = strings.TrimPrefix(w.ReportedTier, "on_demand_")
			}
		}
	}
	for _, a := range s {
		streams = append(streams, wireAnswer{body: a.Body, header: a.Header, want: a.Want})
	}
	for _, a := range b {
		bodies = append(bodies, wireAnswer{body: a.Body, header: a.Header, want: a.Want})
	}
	return streams, bodies
}

// events frames a stream body: SSE data payloads, or the elements of a JSON array.
func events(body []byte) [][]byte {
	var out [][]byte
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '[' {
		d := jsonkit.NewJSONArrayDecoder(bytes.NewReader(body))
		for {
			elem, err := d.Next()
			if err != nil {
				return out
			}
			out = append(out, bytes.Clone(elem))
		}
	}
	dec := sse.NewDecoder(bytes.NewReader(body))
	for {
		ev, err := dec.Next()
		if err != nil {
			return out
		}
		out = append(out, bytes.Clone(ev.Data))
	}
}

// streamBilled decodes a stream with the translator's decoder and returns what it bills and the events it
// read (a stream the translator cannot read stops after the event it refused, whose usage members are still billed when it is JSON).
func streamBilled(a wireAnswer) (u usage.Usage, found bool, read [][]byte) {
	d := GenerateContent{}.NewDecoder(&canon.State{})
	b := d.(canon.Biller)
	b.ObserveHeader(a.header)
	var out []canon.Event
	for _, ev := range events(a.body) {
		var err error
		out, err = d.Decode("", bytes.TrimSpace(ev), out[:0])
		if err != nil {
			if jsonkit.ValidJSON(bytes.TrimSpace(ev)) { // an event that is not JSON bills nothing
				read = append(read, ev)
			}
			break
		}
		read = append(read, ev)
	}
	u, found, _ = b.Billed()
	return u, found, read
}

// relayBilled bills the events of a stream as the passthrough does: each event's relay reader members, read
// by Billing.ObserveRelay when the reader found usage members, after the response header.
func relayBilled(events [][]byte, h http.Header) (usage.Usage, bool) {
	var b Billing
	b.ObserveHeader(h)
	var rel jsonkit.Relay
	for _, ev := range events {
		ReadRelay(ev, &rel)
		if rel.HasUsage {
			b.ObserveRelay(&rel)
		}
	}
	return b.Usage()
}

// checkStreamAgrees compares the decoder's billing of a stream with the passthrough relay billing of the
// events the decoder read.
func checkStreamAgrees(t *testing.T, a wireAnswer) {
	got, found, read := streamBilled(a)
	want, wantFound := relayBilled(read, a.header)
	if got != want || found != wantFound {
		t.Fatalf("decoder bills %+v found %v; the relay billing %+v %v\n%.2000s", got, found, want, wantFound, a.body)
	}
}

// checkBodyAgrees compares the billing of a buffered answer's decoding with BillBody, and BillBody on the
// whole body with BillBody on the usage members jsonkit.BodyScanner keeps of it (the passthrough's reading of a
// buffered answer); a body the translator cannot decode is billed by BillBody alone (proxy transform.go).
func checkBodyAgrees(t *testing.T, a wireAnswer) {
	if !json.Valid(a.body) {
		return
	}
	want, wantFound, werr := BillBody(vocab.KindGammaGenerateContent, vocab.OpGenerateContent, a.body, a.header)
	var sc jsonkit.BodyScanner
	_, _ = sc.Write(a.body)
	if red := sc.Reduced(); red != nil {
		got, found, err := BillBody(vocab.KindGammaGenerateContent, vocab.OpGenerateContent, red, a.header)
		if (err != nil) != (werr != nil) || got != want || found != wantFound {
			t.Fatalf("BillBody of the kept members %+v found %v err %v; of the body %+v %v %v: %s", got, found, err, want, wantFound, werr, a.body)
		}
	}
	r, err := GenerateContent{}.DecodeResponse(a.body, &canon.State{})
	if err != nil {
		return
	}
	var got usage.Usage
	if r.Billed != nil {
		got = *r.Billed
		GenerateContent{}.BillHeader(&got, a.header)
	}
	switch {
	case werr != nil:
		t.Fatalf("the translator decoded a body BillBody refuses (%v): %s", werr, a.body)
	case (r.Billed != nil) != wantFound:
		t.Fatalf("billed %v, BillBody found %v: %s", r.Billed, wantFound, a.body)
	case r.Billed != nil && got != want:
		t.Fatalf("billed %+v, BillBody %+v: %s", got, want, a.body)
	}
}

// TestBillingOnRealWire checks every real gamma answer is billed what it must be: a stream by the decoder
// and by the relay billing, a buffered answer by BillBody and by its decoding.
func TestBillingOnRealWire(t *testing.T) {
	streams, bodies := realWireGamma(t)
	for i, s := range streams {
		got, found, read := streamBilled(s)
		if !found || got != s.want {
			t.Fatalf("stream %d: decoder bills %+v found %v, want %+v\n%.2000s", i, got, found, s.want, s.body)
		}
		if got, found := relayBilled(read, s.header); !found || got != s.want {
			t.Fatalf("stream %d: relay billing %+v found %v, want %+v", i, got, found, s.want)
		}
	}
	for i, b := range bodies {
		if got, found, err := BillBody(vocab.KindGammaGenerateContent, vocab.OpGenerateContent, b.body, b.header); err != nil || !found || got != b.want {
			t.Fatalf("body %d: BillBody %+v found %v err %v, want %+v\n%.2000s", i, got, found, err, b.want, b.body)
		}
		checkBodyAgrees(t, b)
	}
}

// Each usageMetadata snapshot is taken whole: an earlier candidatesTokenCount does not survive into a later
// snapshot without one; the header's tier wins; image tokens are the IMAGE modality of the output.
func TestBillingTakesEachSnapshotWhole(t *testing.T) {
	stream := "data: " + `{"candidates":[{"content":{"parts":[{"text":"a"}],"role":"model"}}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":99,"serviceTier":"FLEX"}}` + "\n\n" +
		"data: " + `{"candidates":[{"content":{"parts":[{"text":"b"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":"10","cachedContentTokenCount":4,"thoughtsTokenCount":78,` +
		`"candidatesTokensDetails":[{"modality":"IMAGE","tokenCount":3}],"trafficType":"ON_DEMAND_PRIORITY"}}` + "\n\n"
	u, found, _ := streamBilled(wireAnswer{body: []byte(stream), header: http.Header{}})
	want := usage.Usage{Input: 6, CacheRead: 4, Output: 75, ImageOutput: 3, ReportedTier: "priority"}
	if !found || u != want {
		t.Fatalf("billed %+v found %v, want %+v", u, found, want)
	}
	h := http.Header{}
	h.Set(TierHeader, "SERVICE_TIER_STANDARD")
	if u, _, _ := streamBilled(wireAnswer{body: []byte(stream), header: h}); u.ReportedTier != "standard" {
		t.Fatalf("tier %q with the header, want standard", u.ReportedTier)
	}
	checkStreamAgrees(t, wireAnswer{body: []byte(stream), header: h})
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
	streams, bodies := realWireGamma(f)
	for _, s := range streams {
		f.Add(s.body, false, s.header.Get(TierHeader))
	}
	for _, b := range bodies {
		f.Add(b.body, true, b.header.Get(TierHeader))
	}
	billingNames := []string{"usageMetadata", "promptTokenCount", "cachedContentTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "toolUsePromptTokenCount", "totalTokenCount", "candidatesTokensDetails", "serviceTier", "trafficType", "modality", "tokenCount"}
	f.Fuzz(func(t *testing.T, b []byte, body bool, tier string) {
		if nameVariant(b, billingNames...) {
			return
		}
		a := wireAnswer{body: b, header: http.Header{}}
		if tier != "" {
			a.header.Set(TierHeader, tier)
		}
		if body {
			checkBodyAgrees(t, a)
			return
		}
		if !strings.Contains(string(b), "data:") && !strings.HasPrefix(strings.TrimSpace(string(b)), "[") {
			return
		}
		checkStreamAgrees(t, a)
	})
}
