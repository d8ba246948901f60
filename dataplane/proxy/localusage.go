package proxy

import (
	"math"
	"math/bits"
	"strings"
	"unicode/utf8"

	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/tokencount"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// CountLocally is the LocalUsageFunc backed by package tokencount: for a content-generation request whose
// upstream reported no usage it counts the prompt and the collected output text locally; found is false
// when the tokenizer is compiled out.
func CountLocally(kind vocab.Kind, op vocab.Operation, model string, reqBody []byte, output string, outputBytes int64) (usage.Usage, bool) {
	if !op.IsGeneration() || !tokencount.Supported() {
		return usage.Usage{}, false
	}
	u, _, err := tokencount.Count(kind, model, reqBody, output)
	if err != nil {
		return usage.Usage{}, false
	}
	u.Output = extrapolate(u.Output, int64(len(output)), outputBytes)
	return u, true
}

// extrapolate scales the tokens counted in the first kept bytes of a text to its whole length (as
// tokencount does beyond MaxExactBytes), saturating at math.MaxInt64.
func extrapolate(tokens, kept, total int64) int64 {
	if kept <= 0 || total <= kept || tokens <= 0 {
		return tokens
	}
	hi, lo := bits.Mul64(uint64(tokens), uint64(total))
	if hi >= uint64(kept) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(kept))
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// responseText returns the output text of a buffered generation answer for local counting: its first
// maxCollectedText bytes (cut at a character) and its whole length; nothing when the body is not JSON.
func responseText(body []byte) (string, int64) {
	text, err := tokencount.ResponseText(body)
	if err != nil {
		return "", 0
	}
	return text[:keepLen(text, 0)], int64(len(text))
}

// maxCollectedText bounds the relayed text kept for local counting: tokencount counts this much exactly
// and extrapolates the rest by length, so a stream of any length is counted in flat memory.
const maxCollectedText = tokencount.MaxExactBytes

// textCollector keeps the text of alpha chat deltas (content and
// tool-call arguments), for local counting when the upstream reports no usage: the first
// maxCollectedText bytes (cut at a character boundary) and the length of the whole.
type textCollector struct {
	on    bool // collecting this stream
	b     strings.Builder
	total int64  // bytes of text seen, kept or not
	pend  []byte // scratch for one event's text (alpha.ChunkText)
}

// addBytes collects b.
func (t *textCollector) addBytes(b []byte) {
	t.total += int64(len(b))
	t.b.Write(b[:keepLen(b, t.b.Len())])
}

// addString collects s.
func (t *textCollector) addString(s string) {
	t.total += int64(len(s))
	t.b.WriteString(s[:keepLen(s, t.b.Len())])
}

// keepLen returns how much of s still fits after kept bytes, cut at a character boundary.
func keepLen[T ~string | ~[]byte](s T, kept int) int {
	room := maxCollectedText - kept
	if room <= 0 {
		return 0
	}
	if len(s) <= room {
		return len(s)
	}
	for room > 0 && !utf8.RuneStart(s[room]) {
		room--
	}
	return room
}

// observe collects the text of one chunk.
func (t *textCollector) observe(data []byte) { t.pend = alpha.ChunkText(data, t.pend, t.addBytes) }
