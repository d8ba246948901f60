package mockupstream

import (
	"encoding/json"
	"math"
	"math/bits"
	"unicode/utf8"

	"github.com/tollgate/tollgate/dataplane/tokencount"
	"github.com/tollgate/tollgate/shared/vocab"
)

// A stream that did not end whole — cut by the mock (x-mock-disconnect-after) or left by its client — is
// billed like a provider bills it: for what it generated and wrote before the cut, never for the rest of
// the plan. What it wrote is exactly what a gateway that read the stream to the cut received (every event
// is flushed whole before the next one is generated; docs/mockupstream.md, "Admin reports"), and the bill is
// computed by the gateway's own rule for such a stream (docs/dataplane.md, "Local token counting"):
//
//   - the latest usage the written events reported (beta message_start then message_delta, gamma's running
//     usageMetadata, alpha chat's usage chunk), when one did — except that message_start's output_tokens
//     is a placeholder: a beta stream cut before message_delta bills message_start's input and cache
//     categories and the output text its written deltas carried, counted locally (with no text written,
//     the placeholder stands, as on the gateway);
//   - else the request's prompt and, for alpha chat and beta, the text the written deltas carried (alpha
//     chat content and tool-call arguments; beta text, thinking and tool-input fragments), counted with
//     dataplane/tokencount — the counter the gateway uses — in the request's dialect; other dialects' output
//     is not counted (0), as the gateway collects only those dialects' relayed text.
//
// A stream cut before its first event bills nothing (the gateway records a failed attempt). A stream
// ended by an in-stream error (x-mock-stream-error-after) is billed the same way when it had delivered
// output — reported usage with output tokens, or alpha chat text — and not at all before that: the
// gateway settles the first as an interrupted generation and the second as a failed one (docs/dataplane.md).

// reportUsage records b as the latest usage a written stream event reported.
func (x *exchange) reportUsage(endpoint, tier string, b Bill) {
	whole := x.bill
	x.billFor(endpoint, tier, b)
	x.reported, x.bill = x.bill, whole
}

// wroteText records output text a written alpha chat delta carried: its length, and the text itself up to
// tokencount.MaxExactBytes (cut at a character), as the gateway keeps it — a long stream is counted on that
// much and extrapolated by length, in flat memory.
func (x *exchange) wroteText(s string) {
	x.textBytes += int64(len(s))
	room := tokencount.MaxExactBytes - x.text.Len()
	if room <= 0 {
		return
	}
	if len(s) > room {
		for room > 0 && !utf8.RuneStart(s[room]) {
			room--
		}
		s = s[:room]
	}
	x.text.WriteString(s)
}

// settleBill decides x.bill once the exchange ended: the whole answer's bill, a cut stream's bill, or
// none. It counts tokens, so it runs before finish takes the server's lock.
func (x *exchange) settleBill() {
	whole := x.completed && !x.aborted && !x.erred && x.status >= 200 && x.status <= 299
	switch {
	case whole:
		return
	case !x.stream || x.events == 0 || x.bill == nil || x.kind == "" || x.s.opts.MaxRecords < 0:
		x.bill = nil
		return
	}
	final := true // the reported usage counts the output
	if x.kind == vocab.KindBetaMessages {
		final = x.betaWrittenText()
	}
	switch {
	case x.erred && !(x.reported != nil && x.reported.Output > 0) && x.textBytes == 0:
		x.bill = nil // failed before any output
		return
	case x.reported != nil && (final || x.textBytes == 0): // no text written: message_start's placeholder stands
		b := *x.reported
		x.bill = &b
		return
	case x.reported != nil:
		b := *x.reported
		if tokencount.Supported() {
			out, err := tokencount.CountText(x.kind, x.model, x.text.String())
			if err == nil {
				b.Output = extrapolate(out, int64(x.text.Len()), x.textBytes)
			}
		}
		x.bill = &b
		return
	}
	b, ok := x.localBill()
	if !ok {
		x.bill = nil
		return
	}
	x.bill = b
}

// localBill counts a cut stream without reported usage the gateway's way: the prompt of the request, and
// for alpha chat and beta the text written. Without the tokenizer (-tags notokenizer) the mock's own prompt count
// stands in (the gateway then bills its admission estimate: no agreement is possible).
func (x *exchange) localBill() (*Bill, bool) {
	b := *x.bill
	b.Input, b.Output, b.CacheRead, b.Cache5m, b.Cache30m, b.Cache1h, b.ImageOut, b.Images = 0, 0, 0, 0, 0, 0, 0, 0
	if !tokencount.Supported() {
		b.Input = int64(max(tokensOf(len(x.body)), 1))
		return &b, true
	}
	in, err := tokencount.CountPrompt(x.kind, x.model, x.body)
	if err != nil {
		return nil, false
	}
	b.Input = in
	if x.kind == vocab.KindAlphaChatCompletions || x.kind == vocab.KindBetaMessages {
		out, err := tokencount.CountText(x.kind, x.model, x.text.String())
		if err != nil {
			return nil, false
		}
		b.Output = extrapolate(out, int64(x.text.Len()), x.textBytes)
	}
	return &b, true
}

// extrapolate scales the tokens counted in the first kept bytes of a text to its whole length, floor(tokens
// × total / kept), saturating at math.MaxInt64: the gateway's rule for a long relayed text.
func extrapolate(tokens, kept, total int64) int64 {
	if kept <= 0 || total <= kept || tokens <= 0 {
		return tokens
	}
	hi, lo := bits.Mul64(uint64(tokens), uint64(total))
	if hi >= uint64(kept) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(kept))
	return int64(min(q, math.MaxInt64))
}

// betaWrittenText replays the event order of the planned beta stream (beta.go: message_start; per block
// content_block_start, ping after the first, its deltas, content_block_stop; then message_delta) over the
// events written before the cut, records with wroteText the output text of the deltas among them
// (thinking, tool-input fragments, text; not signatures), and reports whether message_delta was written
// (the reported usage then counts the output).
func (x *exchange) betaWrittenText() (final bool) {
	var req betaRequest
	if json.Unmarshal(x.body, &req) != nil {
		return true
	}
	written := x.events
	if x.erred {
		written-- // the error event took the place of a planned one
	}
	tools := make([]toolDef, 0, len(req.Tools))
	for _, t := range req.Tools {
		tools = append(tools, toolDef{name: t.Name, params: t.InputSchema})
	}
	forced := req.ToolChoice != nil && (req.ToolChoice.Type == "any" || req.ToolChoice.Type == "tool")
	thinking := req.Thinking != nil && (req.Thinking.Type == "enabled" || req.Thinking.Type == "adaptive")
	p := x.planFor(req.MaxTokens, tools, forced, thinking)
	seq := 1 // message_start
	block := func(deltas []string) {
		seq++ // content_block_start
		if seq == 2 {
			seq++ // ping
		}
		for _, d := range deltas {
			if seq < written {
				x.wroteText(d)
			}
			seq++
		}
		seq++ // content_block_stop
	}
	if p.reasoning != nil {
		block(append(p.reasoning, "")) // the signature delta carries no output text
	}
	if p.toolName != "" {
		block(append([]string{""}, splitFragments(p.toolArgs, 3)...))
	} else {
		block(p.words)
	}
	return seq < written // message_delta
}
