package translate

import (
	"encoding/json"
	"sync"
)

// This file holds the canonical, dialect-neutral form every translator goes through. Each dialect has a
// decoder into and an encoder out of this form (files dialect_<kind>.go and dialect_<kind>_stream.go);
// a pair file (<client>_<upstream>.go) only adds what is specific to that pair.

// partType classifies one content part.
type partType uint8

const (
	partText partType = iota
	partImage
	partToolCall
	partToolResult
	partThinking
	partRedactedThinking
	partFile
)

// part is one content element of a message or a response.
type part struct {
	Type    partType `json:"type"`
	IsError bool     `json:"is_error,omitempty"` // tool result: the call failed
	Text    string   `json:"text,omitempty"`
	// Data: an image's or file's base64 payload; redacted thinking's opaque payload.
	Data string `json:"data,omitempty"`

	// tool call / tool result
	CallID string          `json:"call_id,omitempty"`
	Name   string          `json:"name,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"` // JSON object text
	// ResultParts holds a tool result's content (text and images).
	ResultParts []part `json:"result_parts,omitempty"`

	// thinking: Text is the (summary) text, Signature the opaque continuity token.
	Signature string `json:"signature,omitempty"`

	// x holds the rarely set fields (get reads them, withExtra sets them), so the part every message has is
	// 144 bytes instead of 240 (TestPartSize): the request decoders allocate one arena of parts per request.
	x *partExtra
}

// partExtra is the rarely set part of a part: media details, alpha's verbatim streamed arguments and
// responses item ids. It is shared by copies of a part, so it is never written in place.
type partExtra struct {
	// image / file
	MediaType string `json:"media_type,omitempty"`
	URL       string `json:"url,omitempty"`
	Detail    string `json:"detail,omitempty"`
	FileName  string `json:"file_name,omitempty"`
	// RawArgs, when set, is the exact argument text streamed to an alpha client (kept verbatim).
	RawArgs string `json:"raw_args,omitempty"`
	// ItemID keeps a responses reasoning/function item id for round trips.
	ItemID string `json:"item_id,omitempty"`
}

// get returns p's rarely set fields (zero when none is set).
func (p part) get() partExtra {
	if p.x == nil {
		return partExtra{}
	}
	return *p.x
}

// withExtra returns p with its rarely set fields x (nil when x is zero, as if none was set).
func (p part) withExtra(x partExtra) part {
	if x == (partExtra{}) {
		p.x = nil
	} else {
		p.x = new(partExtra) // allocated here only: &x would move every call's x to the heap
		*p.x = x
	}
	return p
}

type message struct {
	Role  string `json:"role"` // "user" or "assistant"
	Parts []part `json:"parts"`
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// toolChoice: Mode is "auto", "none", "required" (any tool) or "tool" (Name forced).
type toolChoice struct {
	Mode string `json:"mode"`
	Name string `json:"name,omitempty"`
}

// reasoning is the requested thinking control. Effort is alpha-style (minimal|low|medium|high|...);
// Budget a token budget; Disabled an explicit off switch; IncludeThoughts gamma's flag.
type reasoning struct {
	Effort          string `json:"effort,omitempty"`
	Budget          int    `json:"budget,omitempty"`
	Disabled        bool   `json:"disabled,omitempty"`
	Adaptive        bool   `json:"adaptive,omitempty"`
	IncludeThoughts bool   `json:"include_thoughts,omitempty"`
}

// responseFormat is a structured-output request: Type "json_object" or "json_schema".
type responseFormat struct {
	Type   string          `json:"type"`
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict *bool           `json:"strict,omitempty"`
}

// request is the canonical generation request.
type request struct {
	Model             string          `json:"model,omitempty"`
	System            []string        `json:"system,omitempty"`
	Messages          []message       `json:"messages"`
	Tools             []tool          `json:"tools,omitempty"`
	ToolChoice        *toolChoice     `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	MaxTokens         *int            `json:"max_tokens,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	TopK              *int            `json:"top_k,omitempty"`
	Stop              []string        `json:"stop,omitempty"`
	Seed              *int64          `json:"seed,omitempty"`
	PresencePenalty   *float64        `json:"presence_penalty,omitempty"`
	FrequencyPenalty  *float64        `json:"frequency_penalty,omitempty"`
	Reasoning         *reasoning      `json:"reasoning,omitempty"`
	Format            *responseFormat `json:"format,omitempty"`
	ServiceTier       string          `json:"service_tier,omitempty"`
	User              string          `json:"user,omitempty"`
	Stream            bool            `json:"stream,omitempty"`
	IncludeUsage      bool            `json:"include_usage,omitempty"`
}

// reqStore is the storage a request decoder builds the canonical messages and their parts in. The
// Translator releases it once the upstream body is written: nothing refers to it afterwards (the body is
// a buffer of its own; the parts' strings point into the client's body or memory of their own, never into
// the store; st.req keeps only the request's flags), so the next request decodes into the same memory
// instead of ~15 KB of new parts that only give the GC work.
type reqStore struct {
	msgs           []message
	parts, results []part
}

var reqStores = sync.Pool{New: func() any { return new(reqStore) }}

// maxStoredParts bounds what a pooled store keeps (a huge request's storage is left to the GC).
const maxStoredParts = 1024

// take returns the storage to decode a request of about n messages into: s itself, grown where it is
// too small, or — for a nil s (a decode not pooled) — new storage.
func (s *reqStore) take(n int) *reqStore {
	if s == nil {
		s = new(reqStore)
	}
	if s.msgs == nil || cap(s.msgs) < n {
		s.msgs = make([]message, 0, n)
	}
	if want := n + n/2 + 4; cap(s.parts) < want {
		s.parts = make([]part, 0, want) // most messages have one part; appends grow it
	}
	return s
}

// keep records the storage the decoder ended with (appends may have moved it), so release clears and
// reuses all of it.
func (s *reqStore) keep(msgs []message, parts, results []part) {
	s.msgs, s.parts, s.results = msgs, parts, results
}

// pooledDecoder is a request decoder that can build the canonical request in given storage.
type pooledDecoder interface {
	decodeInto(body []byte, st *reqState, store *reqStore) (*request, error)
}

// decodePooled decodes a client request with c into storage from the pool; release returns it.
func decodePooled(c codec, body []byte, st *reqState) (*request, *reqStore, error) {
	p, ok := c.(pooledDecoder)
	if !ok {
		r, err := c.decodeRequest(body, st)
		return r, nil, err
	}
	store := reqStores.Get().(*reqStore)
	r, err := p.decodeInto(body, st, store)
	if err != nil {
		return nil, nil, err // the store may be half written: it is left to the GC
	}
	return r, store, nil
}

// release hands the storage of the request r decoded into s back for the next request and drops r's
// messages (which lived in it). Only what appends wrote is cleared: beyond the recorded lengths the
// storage is still zero. A nil s (not pooled) does nothing.
func (s *reqStore) release(r *request) {
	if s == nil {
		return
	}
	r.Messages = nil
	if s.reset() {
		reqStores.Put(s)
	}
}

// reset clears what the last decode wrote and reports whether s is small enough to be kept.
func (s *reqStore) reset() bool {
	if cap(s.parts) > maxStoredParts || cap(s.results) > maxStoredParts || cap(s.msgs) > maxStoredParts {
		return false
	}
	clear(s.msgs)
	clear(s.parts)
	clear(s.results)
	s.msgs, s.parts, s.results = s.msgs[:0], s.parts[:0], s.results[:0]
	return true
}

// finish is the canonical finish reason.
type finish string

const (
	finishNone          finish = ""
	finishStop          finish = "stop"
	finishStopSequence  finish = "stop_sequence"
	finishLength        finish = "length"
	finishToolCalls     finish = "tool_calls"
	finishContentFilter finish = "content_filter"
	finishPause         finish = "pause"
	finishError         finish = "error"
)

// usage is the canonical usage every dialect's usage converts to and from (usage.go). Every count is an int token count; InputTotal includes
// cache reads and writes, OutputTotal includes reasoning.
type usage struct {
	Known        bool  `json:"-"`
	InputTotal   int64 `json:"input_total"`
	CacheRead    int64 `json:"cache_read,omitempty"`
	CacheWrite   int64 `json:"cache_write,omitempty"`
	CacheWrite5m int64 `json:"cache_write_5m,omitempty"`
	CacheWrite1h int64 `json:"cache_write_1h,omitempty"`
	OutputTotal  int64 `json:"output_total"`
	Reasoning    int64 `json:"reasoning,omitempty"`
	ToolPrompt   int64 `json:"tool_prompt,omitempty"`
	InputText    int64 `json:"input_text,omitempty"`
	InputImage   int64 `json:"input_image,omitempty"`
	InputAudio   int64 `json:"input_audio,omitempty"`
}

// merge keeps the latest non-zero value per field (streams report cumulative snapshots; never add).
func (u *usage) merge(o usage) {
	if !o.Known {
		return
	}
	u.Known = true
	set := func(dst *int64, v int64) {
		if v != 0 {
			*dst = v
		}
	}
	set(&u.InputTotal, o.InputTotal)
	set(&u.CacheRead, o.CacheRead)
	set(&u.CacheWrite, o.CacheWrite)
	set(&u.CacheWrite5m, o.CacheWrite5m)
	set(&u.CacheWrite1h, o.CacheWrite1h)
	set(&u.OutputTotal, o.OutputTotal)
	set(&u.Reasoning, o.Reasoning)
	set(&u.ToolPrompt, o.ToolPrompt)
	set(&u.InputText, o.InputText)
	set(&u.InputImage, o.InputImage)
	set(&u.InputAudio, o.InputAudio)
}

// response is the canonical non-streaming response.
type response struct {
	ID           string `json:"id,omitempty"`
	Model        string `json:"model,omitempty"`
	Created      int64  `json:"created,omitempty"`
	Parts        []part `json:"parts"`
	Finish       finish `json:"finish,omitempty"`
	StopSequence string `json:"stop_sequence,omitempty"`
	Usage        usage  `json:"usage"`
	ServiceTier  string `json:"service_tier,omitempty"`
	// Refusal is alpha's refusal text, carried as text elsewhere.
	Refusal string `json:"refusal,omitempty"`
}

// evType classifies one canonical stream event.
type evType int

const (
	evStart     evType = iota // ID, Model known
	evText                    // Text delta for block Index
	evThinking                // thinking text delta
	evSignature               // thinking signature (Text) for the thinking block Index
	evRedacted                // redacted thinking block (Text = opaque data)
	evToolStart               // tool call Index: CallID, Name
	evToolArgs                // argument fragment (Text) for tool call Index
	evBlockStop               // block Index finished
	evFinish                  // Finish (+ StopSequence)
	evUsage                   // Usage snapshot (cumulative)
	evError                   // mid-stream error (Err)
)

// event is one canonical stream event. Index identifies a content block within the upstream stream; each
// decoder guarantees that indices of distinct blocks differ.
type event struct {
	Type         evType
	Index        int
	Text         string
	CallID       string
	Name         string
	ItemID       string
	ID           string
	Model        string
	Finish       finish
	StopSequence string
	Usage        usage
	Err          *apiError
	ServiceTier  string
}
