package canon

import (
	"encoding/json"
	"sync"

	"github.com/tollgate/tollgate/shared/usage"
)

// This file holds the canonical, dialect-neutral form every translator goes through. Each dialect package
// (dataplane/dialect/...) has a decoder into and an encoder out of this form (a Codec).

// partType classifies one content part.
type partType uint8

const (
	PartText partType = iota
	PartImage
	PartToolCall
	PartToolResult
	PartThinking
	PartRedactedThinking
	PartFile
)

// Part is one content element of a message or a response.
type Part struct {
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
	ResultParts []Part `json:"result_parts,omitempty"`

	// thinking: Text is the (summary) text, Signature the opaque continuity token.
	Signature string `json:"signature,omitempty"`

	// X holds the rarely set fields (get reads them, WithExtra sets them), so the part every message has is
	// 144 bytes instead of 240 (TestPartSize): the request decoders allocate one arena of parts per request.
	X *PartExtra `json:"-"`
}

// PartExtra is the rarely set part of a part: media details, alpha's verbatim streamed arguments and
// responses item ids. It is shared by copies of a part, so it is never written in place.
type PartExtra struct {
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

// Get returns p's rarely set fields (zero when none is set).
func (p Part) Get() PartExtra {
	if p.X == nil {
		return PartExtra{}
	}
	return *p.X
}

// WithExtra returns p with its rarely set fields x (nil when x is zero, as if none was set).
func (p Part) WithExtra(x PartExtra) Part {
	if x == (PartExtra{}) {
		p.X = nil
	} else {
		p.X = new(PartExtra) // allocated here only: &x would move every call's x to the heap
		*p.X = x
	}
	return p
}

type Message struct {
	Role  string `json:"role"` // "user" or "assistant"
	Parts []Part `json:"parts"`
}

type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolChoice: Mode is "auto", "none", "required" (any tool) or "tool" (Name forced).
type ToolChoice struct {
	Mode string `json:"mode"`
	Name string `json:"name,omitempty"`
}

// Reasoning is the requested thinking control. Effort is alpha-style (minimal|low|medium|high|...);
// Budget a token budget; Disabled an explicit off switch; IncludeThoughts gamma's flag.
type Reasoning struct {
	Effort          string `json:"effort,omitempty"`
	Budget          int    `json:"budget,omitempty"`
	Disabled        bool   `json:"disabled,omitempty"`
	Adaptive        bool   `json:"adaptive,omitempty"`
	IncludeThoughts bool   `json:"include_thoughts,omitempty"`
}

// ResponseFormat is a structured-output request: Type "json_object" or "json_schema".
type ResponseFormat struct {
	Type   string          `json:"type"`
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict *bool           `json:"strict,omitempty"`
}

// Request is the canonical generation request.
type Request struct {
	Model             string          `json:"model,omitempty"`
	System            []string        `json:"system,omitempty"`
	Messages          []Message       `json:"messages"`
	Tools             []Tool          `json:"tools,omitempty"`
	ToolChoice        *ToolChoice     `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	MaxTokens         *int            `json:"max_tokens,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	TopK              *int            `json:"top_k,omitempty"`
	Stop              []string        `json:"stop,omitempty"`
	Seed              *int64          `json:"seed,omitempty"`
	PresencePenalty   *float64        `json:"presence_penalty,omitempty"`
	FrequencyPenalty  *float64        `json:"frequency_penalty,omitempty"`
	Reasoning         *Reasoning      `json:"reasoning,omitempty"`
	Format            *ResponseFormat `json:"format,omitempty"`
	ServiceTier       string          `json:"service_tier,omitempty"`
	User              string          `json:"user,omitempty"`
	Stream            bool            `json:"stream,omitempty"`
	IncludeUsage      bool            `json:"include_usage,omitempty"`
}

// ReqStore is the storage a request decoder builds the canonical messages and their parts in. The
// Translator releases it once the upstream body is written: nothing refers to it afterwards (the body is
// a buffer of its own; the parts' strings point into the client's body or memory of their own, never into
// the store; st.req keeps only the request's flags), so the next request decodes into the same memory
// instead of ~15 KB of new parts that only give the GC work.
type ReqStore struct {
	Msgs           []Message `json:"-"`
	Parts, Results []Part    `json:"-"`
}

var reqStores = sync.Pool{New: func() any { return new(ReqStore) }}

// maxStoredParts bounds what a pooled store keeps (a huge request's storage is left to the GC).
const maxStoredParts = 1024

// Take returns the storage to decode a request of about n messages into: s itself, grown where it is
// too small, or — for a nil s (a decode not pooled) — new storage.
func (s *ReqStore) Take(n int) *ReqStore {
	if s == nil {
		s = new(ReqStore)
	}
	if s.Msgs == nil || cap(s.Msgs) < n {
		s.Msgs = make([]Message, 0, n)
	}
	if want := n + n/2 + 4; cap(s.Parts) < want {
		s.Parts = make([]Part, 0, want) // most messages have one part; appends grow it
	}
	return s
}

// Keep records the storage the decoder ended with (appends may have moved it), so release clears and
// reuses all of it.
func (s *ReqStore) Keep(msgs []Message, parts, results []Part) {
	s.Msgs, s.Parts, s.Results = msgs, parts, results
}

// PooledDecoder is a request decoder that can build the canonical request in given storage.
type PooledDecoder interface {
	DecodeInto(body []byte, st *State, store *ReqStore) (*Request, error)
}

// DecodePooled decodes a client request with c into storage from the pool; release returns it.
func DecodePooled(c Codec, body []byte, st *State) (*Request, *ReqStore, error) {
	p, ok := c.(PooledDecoder)
	if !ok {
		r, err := c.DecodeRequest(body, st)
		return r, nil, err
	}
	store := reqStores.Get().(*ReqStore)
	r, err := p.DecodeInto(body, st, store)
	if err != nil {
		return nil, nil, err // the store may be half written: it is left to the GC
	}
	return r, store, nil
}

// Release hands the storage of the request r decoded into s back for the next request and drops r's
// messages (which lived in it). Only what appends wrote is cleared: beyond the recorded lengths the
// storage is still zero. A nil s (not pooled) does nothing.
func (s *ReqStore) Release(r *Request) {
	if s == nil {
		return
	}
	r.Messages = nil
	if s.Reset() {
		reqStores.Put(s)
	}
}

// Reset clears what the last decode wrote and reports whether s is small enough to be kept.
func (s *ReqStore) Reset() bool {
	if cap(s.Parts) > maxStoredParts || cap(s.Results) > maxStoredParts || cap(s.Msgs) > maxStoredParts {
		return false
	}
	clear(s.Msgs)
	clear(s.Parts)
	clear(s.Results)
	s.Msgs, s.Parts, s.Results = s.Msgs[:0], s.Parts[:0], s.Results[:0]
	return true
}

// Finish is the canonical finish reason.
type Finish string

const (
	FinishNone          Finish = ""
	FinishStop          Finish = "stop"
	FinishStopSequence  Finish = "stop_sequence"
	FinishLength        Finish = "length"
	FinishToolCalls     Finish = "tool_calls"
	FinishContentFilter Finish = "content_filter"
	finishPause         Finish = "pause"
	FinishError         Finish = "error"
)

// Usage is the canonical usage every dialect's usage converts to and from (usage.go). Every count is an int token count; InputTotal includes
// cache reads and writes, OutputTotal includes reasoning.
type Usage struct {
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

// Merge keeps the latest non-zero value per field (streams report cumulative snapshots; never add).
func (u *Usage) Merge(o Usage) {
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

// Response is the canonical non-streaming response.
type Response struct {
	ID           string `json:"id,omitempty"`
	Model        string `json:"model,omitempty"`
	Created      int64  `json:"created,omitempty"`
	Parts        []Part `json:"parts"`
	Finish       Finish `json:"finish,omitempty"`
	StopSequence string `json:"stop_sequence,omitempty"`
	Usage        Usage  `json:"usage"`
	ServiceTier  string `json:"service_tier,omitempty"`
	// Refusal is alpha's refusal text, carried as text elsewhere.
	Refusal string `json:"refusal,omitempty"`
	// Billed is the billed usage the dialect read from the same decoding (every category and the reported
	// tier); nil when the answer reported none or the dialect does not bill from its decoder (see Biller).
	Billed *usage.Usage `json:"-"`
}

// EvType classifies one canonical stream event.
type EvType int

const (
	EvStart     EvType = iota // ID, Model known
	EvText                    // Text delta for block Index
	EvThinking                // thinking text delta
	EvSignature               // thinking signature (Text) for the thinking block Index
	EvRedacted                // redacted thinking block (Text = opaque data)
	EvToolStart               // tool call Index: CallID, Name
	EvToolArgs                // argument fragment (Text) for tool call Index
	EvBlockStop               // block Index finished
	EvFinish                  // Finish (+ StopSequence)
	EvUsage                   // Usage snapshot (cumulative)
	EvError                   // mid-stream error (Err)
)

// Event is one canonical stream event. Index identifies a content block within the upstream stream; each
// decoder guarantees that indices of distinct blocks differ.
type Event struct {
	Type         EvType
	Index        int
	Text         string
	CallID       string
	Name         string
	ItemID       string
	ID           string
	Model        string
	Finish       Finish
	StopSequence string
	Usage        Usage
	Err          *APIError
	ServiceTier  string
}

// Strp is a pointer to a copy of s (optional string members).
func Strp(s string) *string { return &s }

// HasToolCall reports whether parts hold a tool call.
func HasToolCall(parts []Part) bool {
	for _, p := range parts {
		if p.Type == PartToolCall {
			return true
		}
	}
	return false
}

// Clipped is s[start:] with its capacity clipped, so an append to it copies instead of overwriting what
// follows in the shared backing array.
func Clipped(s []Part, start int) []Part { return s[start:len(s):len(s)] }

// NonEmpty is s, or def when s is empty.
func NonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
