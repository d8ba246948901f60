package translate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/dialect/gamma"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// ErrUnsupported is returned by New for a pair this package does not translate.
var ErrUnsupported = errors.New("translate: unsupported translation pair")

// DefaultBetaMaxTokens is the beta `max_tokens` supplied when the client gave no token cap (beta requires it).
const DefaultBetaMaxTokens = 4096

// DefaultKeepaliveInterval is the keepalive period while waiting for a buffered upstream (spec: 15 s).
const DefaultKeepaliveInterval = 15 * time.Second

// Pair names one routing cell: the inbound operation and kind, and the destination operation and kind.
// For generation, Kind and DestKind are content kinds; for count_tokens and create_embedding they are
// family kinds (alpha, beta, gamma).
type Pair struct {
	Op       vocab.Operation
	Kind     vocab.Kind
	DestOp   vocab.Operation
	DestKind vocab.Kind
}

func (p Pair) String() string {
	return fmt.Sprintf("%s/%s -> %s/%s", p.Op, p.Kind, p.DestOp, p.DestKind)
}

// Mode says how the caller relays the upstream response to the client.
type Mode int

const (
	// ModeBuffered: the client wants one body; convert it with Response (2xx) or Error.
	ModeBuffered Mode = iota
	// ModeStream: both sides stream; convert events with NewStream.
	ModeStream
	// ModeSynthesize: the client wants a stream but the upstream answers with one body; send Keepalive while
	// waiting, then Synthesize.
	ModeSynthesize
)

// ClientRequest is the inbound request as the translator needs it.
type ClientRequest struct {
	// Body is the client's JSON body.
	Body []byte
	// Model is the upstream model id (it replaces the body's `model` or goes into gamma's path).
	Model string
	// Stream reports whether the client wants a stream (alpha/beta `"stream":true`, gamma
	// `:streamGenerateContent`). New's Pair already says so for generation; it is honoured either way.
	Stream bool
	// GammaSSE reports, for gamma clients, whether the client asked for `alt=sse`; otherwise a gamma client
	// stream is written in the JSON-array framing.
	GammaSSE bool
	// Lent says the caller lends Body instead of giving the translator a copy: it neither writes to Body nor
	// reuses its memory until it has stopped using the Translator (its last Response, Stream, Synthesize,
	// Error or Keepalive call has returned), so the decoded request may point into Body instead of into a
	// copy of it. Without Lent the translator copies Body and the caller may reuse it once Request returns.
	Lent bool
}

// Translator converts one request and its response. Create one per request.
type Translator struct {
	pair     Pair
	opts     canon.Options
	client   canon.Codec
	upstream canon.Codec
	st       *canon.State
	// identity: same kind on both sides (buffered synthesis only): the request is patched, not re-encoded.
	identity bool

	special specialOp // count_tokens / create_embedding handlers, nil for generation
	reqDone bool
	arrOpen bool         // gamma JSON-array synthesis: '[' already written
	billed  *usage.Usage // the billed usage the last decoded buffered answer reported (Billed)
}

// Billed returns the billed usage of the buffered upstream answer Response or Synthesize last decoded, read
// by the upstream dialect from that decoding; ok is false when that dialect does not bill from its decoder,
// the answer could not be decoded, or it reported no usage (the caller reads the body's usage itself then).
// h is the upstream response header (gamma's served tier).
func (t *Translator) Billed(h http.Header) (u usage.Usage, ok bool) {
	if t.billed == nil {
		return usage.Usage{}, false
	}
	u = *t.billed
	if hb, ok := t.upstream.(canon.HeaderBiller); ok {
		hb.BillHeader(&u, h)
	}
	return u, true
}

// New returns the translator for p, or an error wrapping ErrUnsupported.
func New(p Pair, opts canon.Options) (*Translator, error) {
	if opts.BetaMaxTokens <= 0 {
		opts.BetaMaxTokens = DefaultBetaMaxTokens
	}
	if edgeBuild {
		opts.Edge = true
	}
	t := &Translator{pair: p, opts: opts, st: canon.NewState(opts)}
	switch {
	case p.Op.IsGeneration() && p.DestOp.IsGeneration():
		if p.Op == vocab.OpGenerateContent && p.DestOp == vocab.OpStreamGenerateContent {
			return nil, fmt.Errorf("new translator %s: buffered client with streaming destination: %w", p, ErrUnsupported)
		}
		t.client, t.upstream = codecFor(p.Kind), codecFor(p.DestKind)
		if t.client == nil || t.upstream == nil {
			return nil, fmt.Errorf("new translator %s: %w", p, ErrUnsupported)
		}
		if p.Kind == p.DestKind && p.Op == p.DestOp {
			return nil, fmt.Errorf("new translator %s: identity is passthrough: %w", p, ErrUnsupported)
		}
		t.identity = p.Kind == p.DestKind
		t.st.ClientCodec = t.client
		t.st.Client = p.Kind
		t.st.Upstream = p.DestKind
		t.st.Stream = p.Op == vocab.OpStreamGenerateContent
	case p.Op == vocab.OpCountTokens && p.DestOp == vocab.OpCountTokens:
		sp, err := newCountTokens(p)
		if err != nil {
			return nil, err
		}
		t.special = sp
	case p.Op == vocab.OpCreateEmbedding && p.DestOp == vocab.OpCreateEmbedding:
		sp, err := newEmbedding(p)
		if err != nil {
			return nil, err
		}
		t.special = sp
	default:
		return nil, fmt.Errorf("new translator %s: %w", p, ErrUnsupported)
	}
	return t, nil
}

// Mode reports how the response must be relayed (valid after Request; for generation it depends only on
// the pair and ClientRequest.Stream).
func (t *Translator) Mode() Mode {
	if t.special != nil || !t.st.Stream {
		return ModeBuffered
	}
	if t.pair.DestOp == vocab.OpStreamGenerateContent {
		return ModeStream
	}
	return ModeSynthesize
}

// ContentType is the client response Content-Type for the translated success response.
func (t *Translator) ContentType() string {
	if t.Mode() == ModeBuffered {
		return "application/json"
	}
	if t.pair.Kind == vocab.KindGammaGenerateContent && !t.st.GammaSSE {
		return "application/json"
	}
	return "text/event-stream"
}

// Request converts the client request into the upstream request. A field that cannot be carried without
// changing the request's meaning yields a *RequestError (HTTP 400, naming the field).
func (t *Translator) Request(in ClientRequest) (*canon.UpstreamRequest, error) {
	t.reqDone = true
	t.st.GammaSSE = in.GammaSSE
	t.st.Lent = in.Lent
	if t.special != nil {
		up, err := t.special.Request(in)
		if err != nil {
			return nil, fmt.Errorf("translate %s request: %w", t.pair, err)
		}
		return up, nil
	}
	if in.Stream {
		t.st.Stream = true
	}
	upStream := t.pair.DestOp == vocab.OpStreamGenerateContent && t.st.Stream
	if t.identity {
		// The same upstream understands every field; only what the synthesised stream cannot show is refused.
		r, err := identityCheck(t.pair.Kind, in.Body)
		if err != nil {
			return nil, fmt.Errorf("translate %s request: %w", t.pair, err)
		}
		t.st.Req = r
		up, err := identityRequest(t.pair.Kind, in, upStream)
		if err != nil {
			return nil, fmt.Errorf("translate %s request: %w", t.pair, err)
		}
		return up, nil
	}
	r, store, err := canon.DecodePooled(t.client, in.Body, t.st)
	if err != nil {
		return nil, fmt.Errorf("translate %s request: %w", t.pair, err)
	}
	t.st.Req = r
	if err := t.upstream.CheckDestination(r, t.st); err != nil {
		store.Release(r)
		return nil, fmt.Errorf("translate %s request: %w", t.pair, err)
	}
	up, err := t.upstream.EncodeRequest(r, in.Model, upStream, t.st)
	store.Release(r) // the upstream body is written: the messages are no longer needed (st.req keeps the flags)
	if err != nil {
		return nil, fmt.Errorf("translate %s request: %w", t.pair, err)
	}
	return up, nil
}

// Response converts a 2xx buffered upstream body into the client's body (ModeBuffered).
func (t *Translator) Response(body []byte) ([]byte, error) {
	if t.special != nil {
		out, err := t.special.Response(body)
		if err != nil {
			return nil, fmt.Errorf("translate %s response: %w", t.pair, err)
		}
		return out, nil
	}
	r, err := t.upstream.DecodeResponse(body, t.st)
	if err != nil {
		return nil, fmt.Errorf("translate %s response: %w", t.pair, err)
	}
	t.billed = r.Billed
	out, err := t.client.EncodeResponse(r, t.st)
	if err != nil {
		return nil, fmt.Errorf("translate %s response: %w", t.pair, err)
	}
	return out, nil
}

// Error converts an upstream error response (any dialect, any status) into the client dialect's error
// status, headers (Retry-After preserved or derived from gamma RetryInfo) and body.
func (t *Translator) Error(status int, header http.Header, body []byte) canon.ClientResponse {
	e := canon.ParseUpstreamError(status, header, body)
	return encodeClientError(t.clientFamily(), e)
}

func (t *Translator) clientFamily() vocab.Kind {
	if t.pair.Kind.IsFamily() {
		return t.pair.Kind
	}
	return t.pair.Kind.Family()
}

// ShowUsage has an alpha chat client's stream carry its usage chunk as if the client had asked for it
// (stream_options.include_usage): a client that asked for its cost gets it there (docs/cost.md). Call it
// after Request.
func (t *Translator) ShowUsage() {
	if t.st.Req != nil {
		t.st.Req.IncludeUsage = true
	}
}

// NewStream returns the per-request stream converter writing client events to w (ModeStream).
func (t *Translator) NewStream(w io.Writer) *Stream {
	return &Stream{dec: t.upstream.NewDecoder(t.st), enc: t.client.NewEncoder(w, t.st), st: t.st}
}

// patchJSON is jsonkit.Patch with its refusal as the client's bad request.
func patchJSON(body []byte, model string, del ...string) ([]byte, error) {
	b, err := jsonkit.Patch(body, model, del...)
	if err != nil {
		return nil, canon.BadRequest("body", err)
	}
	return b, nil
}

// identityRequest patches a same-kind request for a buffered upstream: the stream flag goes, the model is
// replaced, and every other field (known or not) is kept byte-for-byte in value.
func identityRequest(k vocab.Kind, in ClientRequest, stream bool) (*canon.UpstreamRequest, error) {
	switch k {
	case vocab.KindGammaGenerateContent:
		method := "generateContent"
		path := gamma.ModelPath(in.Model, method)
		if stream {
			path = gamma.ModelPath(in.Model, "streamGenerateContent") + "?alt=sse"
		}
		return &canon.UpstreamRequest{Method: http.MethodPost, Path: path, Header: canon.JSONHeader(), Body: in.Body}, nil
	case vocab.KindBetaMessages:
		b, err := patchJSON(in.Body, in.Model, "stream")
		if err != nil {
			return nil, err
		}
		h := canon.JSONHeader()
		h.Set("anthropic-version", "2023-06-01")
		return &canon.UpstreamRequest{Method: http.MethodPost, Path: "/v1/messages", Header: h, Body: b}, nil
	case vocab.KindAlphaResponses:
		b, err := patchJSON(in.Body, in.Model, "stream", "stream_options")
		if err != nil {
			return nil, err
		}
		return &canon.UpstreamRequest{Method: http.MethodPost, Path: "/v1/responses", Header: canon.JSONHeader(), Body: b}, nil
	default:
		b, err := patchJSON(in.Body, in.Model, "stream", "stream_options")
		if err != nil {
			return nil, err
		}
		return &canon.UpstreamRequest{Method: http.MethodPost, Path: "/v1/chat/completions", Header: canon.JSONHeader(), Body: b}, nil
	}
}

// identityCheck reads what a same-kind buffered cell needs from the request (include_usage) and refuses
// what a stream synthesised from one buffered response cannot show: several choices/candidates, logprobs,
// audio output, background responses.
func identityCheck(k vocab.Kind, body []byte) (*canon.Request, error) {
	var in struct {
		N             *int `json:"n"`
		Logprobs      bool `json:"logprobs"`
		Audio         any  `json:"audio"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Background       bool `json:"background"`
		GenerationConfig *struct {
			CandidateCount   *int `json:"candidateCount"`
			ResponseLogprobs bool `json:"responseLogprobs"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, canon.BadRequest("body", fmt.Errorf("invalid JSON: %w", err))
	}
	r := &canon.Request{IncludeUsage: k != vocab.KindAlphaChatCompletions}
	switch k {
	case vocab.KindAlphaChatCompletions:
		switch {
		case in.N != nil && *in.N > 1:
			return nil, canon.Refuse("n", "n > 1 cannot be synthesised as a stream from a buffered response")
		case in.Logprobs:
			return nil, canon.Refuse("logprobs", "logprobs cannot be synthesised as a stream")
		case in.Audio != nil:
			return nil, canon.Refuse("audio", "audio output cannot be synthesised as a stream")
		}
		if in.StreamOptions != nil {
			r.IncludeUsage = in.StreamOptions.IncludeUsage
		}
	case vocab.KindAlphaResponses:
		if in.Background {
			return nil, canon.Refuse("background", "background responses cannot be synthesised as a stream")
		}
	case vocab.KindGammaGenerateContent:
		if gc := in.GenerationConfig; gc != nil {
			if gc.CandidateCount != nil && *gc.CandidateCount > 1 {
				return nil, canon.Refuse("generationConfig.candidateCount", "candidateCount > 1 cannot be synthesised as a stream")
			}
			if gc.ResponseLogprobs {
				return nil, canon.Refuse("generationConfig.responseLogprobs", "logprobs cannot be synthesised as a stream")
			}
		}
	}
	return r, nil
}
