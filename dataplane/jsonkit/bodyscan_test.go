package jsonkit

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// scanReduced feeds body to a BodyScanner in pieces of size step (0: whole).
func scanReduced(body []byte, step int) []byte {
	var s BodyScanner
	if step <= 0 {
		step = len(body) + 1
	}
	for len(body) > 0 {
		n := min(step, len(body))
		_, _ = s.Write(body[:n])
		body = body[n:]
	}
	return s.Reduced()
}

// usageMembers is what the dialects' body billing reads of a body: its usage members, matched as it matches
// them (UnmarshalEvent: ignoring case, after unescaping, the last one winning).
type usageMembers struct {
	Usage         json.RawMessage `json:"usage"`
	ServiceTier   json.RawMessage `json:"service_tier"`
	UsageMetadata json.RawMessage `json:"usageMetadata"`
}

// agree checks that the scanner's reduction of a valid body has the usage members of the whole body: what
// every dialect's body billing reads, so its billing of either is the same.
func agree(t *testing.T, body []byte, step int) {
	t.Helper()
	if !json.Valid(body) {
		return
	}
	red := scanReduced(body, step)
	var want usageMembers
	werr := UnmarshalEvent(body, &want)
	if red == nil {
		if werr == nil && (want.Usage != nil || want.ServiceTier != nil || want.UsageMetadata != nil) && len(body) < MaxKeptUsage {
			t.Fatalf("no reduction of %q, whole body has %+v", body, want)
		}
		return
	}
	var got usageMembers
	gerr := UnmarshalEvent(red, &got)
	if (werr == nil) != (gerr == nil) || (werr == nil && fmt.Sprint(got) != fmt.Sprint(want)) {
		t.Fatalf("step %d: reduced %q has %s %s %s (%v); whole body %q %s %s %s (%v)", step, red, got.Usage, got.ServiceTier,
			got.UsageMetadata, gerr, body, want.Usage, want.ServiceTier, want.UsageMetadata, werr)
	}
}

var scanSeeds = []string{
	`{"id":"x","choices":[{"message":{"content":"{\"usage\":1}"}}],"usage":{"prompt_tokens":3,"completion_tokens":5},"service_tier":"flex"}`,
	`{"usage":{"prompt_tokens":3},"USAGE":{"prompt_tokens":9}}`, `{"us\u0061ge":{"completion_tokens":7}}`, `{"uſage":{"input_tokens":2}}`,
	`{"usage":null}`, `{"usage":{"prompt_tokens":1},"usage":null}`, `{"Service_Tier":"priority","usage":{"prompt_tokens":1}}`,
	`{"candidates":[{"content":{"parts":[{"text":"a\\\"b"}]}}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":6}}`,
	`{"type":"message","usage":{"input_tokens":10,"output_tokens":20,"cache_read_input_tokens":1},"service_tier":"batch"}`,
	`{"data":[{"embedding":[0.1,-2e3,3]}],"usage":{"prompt_tokens":8,"total_tokens":8}}`, `{}`, ` { "usage" : { "total_tokens" : 4 } } `,
	`{"a":[{"usage":{"prompt_tokens":99}}],"b":{"usage":1},"usage":{"prompt_tokens":2}}`, `{"usage":"x"}`, `{"usage":12}`, `[]`, `{"a":1}x`,
}

func TestBodyScannerAgrees(t *testing.T) {
	for _, s := range scanSeeds {
		for _, step := range []int{0, 1, 2, 7} {
			agree(t, []byte(s), step)
		}
	}
}

// TestBodyScannerFindsUsageAfterAnyLength: usage after 40 MB of content is found, and the scanner keeps
// only the usage member, not the content (the old capture kept 16 MiB and then dropped the body).
func TestBodyScannerFindsUsageAfterAnyLength(t *testing.T) {
	var s BodyScanner
	_, _ = s.Write([]byte(`{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":"`))
	chunk := []byte(strings.Repeat("x", 32<<10))
	for range (40 << 20) / len(chunk) {
		_, _ = s.Write(chunk)
	}
	_, _ = s.Write([]byte(`"}}],"usage":{"input_tokens":10,"output_tokens":10000000}}`))
	red := s.Reduced()
	if cap(red) > 1<<10 {
		t.Errorf("scanner holds %d bytes for a 40 MB body", cap(red))
	}
	if want := `{"usage":{"input_tokens":10,"output_tokens":10000000}}`; !jsonEqual(red, want) {
		t.Fatalf("kept %s, want %s", red, want)
	}
}

func FuzzBodyScannerAgrees(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, body []byte, step uint8) {
		agree(t, body, int(step))
	})
}

// TestBodyScannerBounded: kept members beyond MaxKeptUsage yield no usage instead of growing, and Reset
// does not keep a large buffer for the next body.
func TestBodyScannerBounded(t *testing.T) {
	var s BodyScanner
	_, _ = s.Write([]byte(`{"usage":"` + strings.Repeat("x", 2*MaxKeptUsage) + `"}`))
	if s.Reduced() != nil || cap(s.out) > MaxKeptUsage+64<<10 {
		t.Fatalf("kept %d bytes for an oversized usage member", cap(s.out))
	}
	s.Reset()
	if cap(s.out) > 64<<10 {
		t.Errorf("Reset kept a %d-byte buffer", cap(s.out))
	}
	_, _ = s.Write([]byte(`{"usage":{"input_tokens":1}}`))
	if red := s.Reduced(); !jsonEqual(red, `{"usage":{"input_tokens":1}}`) {
		t.Fatalf("after Reset: kept %s", red)
	}
}

// jsonEqual reports whether the JSON document b is want, compared decoded.
func jsonEqual(b []byte, want string) bool {
	var got, w any
	return json.Unmarshal(b, &got) == nil && json.Unmarshal([]byte(want), &w) == nil && fmt.Sprint(got) == fmt.Sprint(w)
}
