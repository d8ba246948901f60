// Package translate owns the `transform_to` implementation of the data plane: it converts requests,
// responses, errors and streams between the content-generation dialects (alpha chat completions, alpha
// responses, beta messages, gamma generateContent), converts embeddings alpha <-> gamma and token counting
// between the families, and synthesises a client stream from one buffered upstream response (with
// per-dialect keepalives) when the destination cannot stream.
//
// Every conversion goes through one canonical form (ir.go): each dialect has a decoder into it and an encoder
// out of it (dialect_<kind>.go, dialect_<kind>_stream.go). The pair files (<client>_<upstream>.go)
// hold what is specific to a pair: the fields it refuses. A Translator is created per request with New and is
// not safe for concurrent use.
//
// Typical use by the data plane:
//
//	t, err := translate.New(translate.Pair{Op: op, Kind: kind, DestOp: destOp, DestKind: destKind}, opts)
//	up, err := t.Request(translate.ClientRequest{Body: body, Model: upstreamModel, Stream: wantsStream})
//	// send up.Method up.Path with up.Header and up.Body; then, depending on t.Mode():
//	//   ModeBuffered:   status/body -> t.Response or t.Error
//	//   ModeStream:     s := t.NewStream(w); s.Pump(upstreamBody, false, flush)
//	//   ModeSynthesize: t.SynthesizeWhile(ctx, interval, w, flush, fetch) (keepalives, then the stream)
package translate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

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

// Options tune a Translator. The zero value is valid.
type Options struct {
	// BetaMaxTokens is the default beta max_tokens (DefaultBetaMaxTokens when 0).
	BetaMaxTokens int
	// Edge disables live keepalives (platforms that buffer the whole response body). The final wire shape
	// is unchanged. Builds with the `edge` tag force it on.
	Edge bool
	// NewID returns a random id suffix (letters and digits); nil uses crypto/rand. Tests inject it.
	NewID func() string
	// Now is the clock for `created` timestamps; nil uses time.Now.
	Now func() time.Time
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

// UpstreamRequest is what to send upstream. Path includes the query (e.g. `?alt=sse`). Header holds only the
// headers the destination dialect needs beyond auth (e.g. `anthropic-version`); the caller adds credentials.
type UpstreamRequest struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// ClientResponse is a complete client response: status, extra headers and body.
type ClientResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// Translator converts one request and its response. Create one per request.
type Translator struct {
	pair     Pair
	opts     Options
	client   codec
	upstream codec
	st       *reqState
	policy   pairPolicy

	special specialOp // count_tokens / create_embedding handlers, nil for generation
	reqDone bool
	arrOpen bool // gamma JSON-array synthesis: '[' already written
}

// New returns the translator for p, or an error wrapping ErrUnsupported.
func New(p Pair, opts Options) (*Translator, error) {
	if opts.BetaMaxTokens <= 0 {
		opts.BetaMaxTokens = DefaultBetaMaxTokens
	}
	if edgeBuild {
		opts.Edge = true
	}
	t := &Translator{pair: p, opts: opts, st: newReqState(opts)}
	switch {
	case p.Op.IsGeneration() && p.DestOp.IsGeneration():
		if p.Op == vocab.OpGenerateContent && p.DestOp == vocab.OpStreamGenerateContent {
			return nil, fmt.Errorf("new translator %s: buffered client with streaming destination: %w", p, ErrUnsupported)
		}
		pol, ok := pairPolicyFor(p.Kind, p.DestKind)
		if !ok {
			return nil, fmt.Errorf("new translator %s: %w", p, ErrUnsupported)
		}
		if p.Kind == p.DestKind && p.Op == p.DestOp {
			return nil, fmt.Errorf("new translator %s: identity is passthrough: %w", p, ErrUnsupported)
		}
		t.policy = pol
		t.client, t.upstream = codecFor(p.Kind), codecFor(p.DestKind)
		t.st.client = p.Kind
		t.st.upstream = p.DestKind
		t.st.stream = p.Op == vocab.OpStreamGenerateContent
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
	if t.special != nil || !t.st.stream {
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
	if t.pair.Kind == vocab.KindGammaGenerateContent && !t.st.gammaSSE {
		return "application/json"
	}
	return "text/event-stream"
}

// Request converts the client request into the upstream request. A field that cannot be carried without
// changing the request's meaning yields a *RequestError (HTTP 400, naming the field).
func (t *Translator) Request(in ClientRequest) (*UpstreamRequest, error) {
	t.reqDone = true
	t.st.gammaSSE = in.GammaSSE
	t.st.lent = in.Lent
	if t.special != nil {
		up, err := t.special.request(in)
		if err != nil {
			return nil, fmt.Errorf("translate %s request: %w", t.pair, err)
		}
		return up, nil
	}
	if in.Stream {
		t.st.stream = true
	}
	upStream := t.pair.DestOp == vocab.OpStreamGenerateContent && t.st.stream
	if t.policy.identity {
		// The same upstream understands every field; only what the synthesised stream cannot show is refused.
		r, err := identityCheck(t.pair.Kind, in.Body)
		if err != nil {
			return nil, fmt.Errorf("translate %s request: %w", t.pair, err)
		}
		t.st.req = r
		up, err := identityRequest(t.pair.Kind, in, upStream)
		if err != nil {
			return nil, fmt.Errorf("translate %s request: %w", t.pair, err)
		}
		return up, nil
	}
	r, store, err := decodePooled(t.client, in.Body, t.st)
	if err != nil {
		return nil, fmt.Errorf("translate %s request: %w", t.pair, err)
	}
	t.st.req = r
	if err := t.policy.check(r, t.st); err != nil {
		store.release(r)
		return nil, fmt.Errorf("translate %s request: %w", t.pair, err)
	}
	up, err := t.upstream.encodeRequest(r, in.Model, upStream, t.st)
	store.release(r) // the upstream body is written: the messages are no longer needed (st.req keeps the flags)
	if err != nil {
		return nil, fmt.Errorf("translate %s request: %w", t.pair, err)
	}
	return up, nil
}

// Response converts a 2xx buffered upstream body into the client's body (ModeBuffered).
func (t *Translator) Response(body []byte) ([]byte, error) {
	if t.special != nil {
		out, err := t.special.response(body)
		if err != nil {
			return nil, fmt.Errorf("translate %s response: %w", t.pair, err)
		}
		return out, nil
	}
	r, err := t.upstream.decodeResponse(body, t.st)
	if err != nil {
		return nil, fmt.Errorf("translate %s response: %w", t.pair, err)
	}
	out, err := t.client.encodeResponse(r, t.st)
	if err != nil {
		return nil, fmt.Errorf("translate %s response: %w", t.pair, err)
	}
	return out, nil
}

// Error converts an upstream error response (any dialect, any status) into the client dialect's error
// status, headers (Retry-After preserved or derived from gamma RetryInfo) and body.
func (t *Translator) Error(status int, header http.Header, body []byte) ClientResponse {
	e := parseUpstreamError(status, header, body)
	return encodeClientError(t.clientFamily(), e)
}

func (t *Translator) clientFamily() vocab.Kind {
	if t.pair.Kind.IsFamily() {
		return t.pair.Kind
	}
	return t.pair.Kind.Family()
}

// NewStream returns the per-request stream converter writing client events to w (ModeStream).
func (t *Translator) NewStream(w io.Writer) *Stream {
	return &Stream{dec: t.upstream.newDecoder(t.st), enc: t.client.newEncoder(w, t.st), st: t.st}
}

// identityRequest patches a same-kind request for a buffered upstream: the stream flag goes, the model is
// replaced, and every other field (known or not) is kept byte-for-byte in value.
func identityRequest(k vocab.Kind, in ClientRequest, stream bool) (*UpstreamRequest, error) {
	switch k {
	case vocab.KindGammaGenerateContent:
		method := "generateContent"
		path := gammaModelPath(in.Model, method)
		if stream {
			path = gammaModelPath(in.Model, "streamGenerateContent") + "?alt=sse"
		}
		return &UpstreamRequest{Method: http.MethodPost, Path: path, Header: jsonHeader(), Body: in.Body}, nil
	case vocab.KindBetaMessages:
		b, err := patchJSON(in.Body, map[string]any{"model": in.Model}, "stream")
		if err != nil {
			return nil, err
		}
		h := jsonHeader()
		h.Set("anthropic-version", "2023-06-01")
		return &UpstreamRequest{Method: http.MethodPost, Path: "/v1/messages", Header: h, Body: b}, nil
	case vocab.KindAlphaResponses:
		b, err := patchJSON(in.Body, map[string]any{"model": in.Model}, "stream", "stream_options")
		if err != nil {
			return nil, err
		}
		return &UpstreamRequest{Method: http.MethodPost, Path: "/v1/responses", Header: jsonHeader(), Body: b}, nil
	default:
		b, err := patchJSON(in.Body, map[string]any{"model": in.Model}, "stream", "stream_options")
		if err != nil {
			return nil, err
		}
		return &UpstreamRequest{Method: http.MethodPost, Path: "/v1/chat/completions", Header: jsonHeader(), Body: b}, nil
	}
}

// identityCheck reads what a same-kind buffered cell needs from the request (include_usage) and refuses
// what a stream synthesised from one buffered response cannot show: several choices/candidates, logprobs,
// audio output, background responses.
func identityCheck(k vocab.Kind, body []byte) (*request, error) {
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
		return nil, badRequest("body", fmt.Errorf("invalid JSON: %w", err))
	}
	r := &request{IncludeUsage: k != vocab.KindAlphaChatCompletions}
	switch k {
	case vocab.KindAlphaChatCompletions:
		switch {
		case in.N != nil && *in.N > 1:
			return nil, refuse("n", "n > 1 cannot be synthesised as a stream from a buffered response")
		case in.Logprobs:
			return nil, refuse("logprobs", "logprobs cannot be synthesised as a stream")
		case in.Audio != nil:
			return nil, refuse("audio", "audio output cannot be synthesised as a stream")
		}
		if in.StreamOptions != nil {
			r.IncludeUsage = in.StreamOptions.IncludeUsage
		}
	case vocab.KindAlphaResponses:
		if in.Background {
			return nil, refuse("background", "background responses cannot be synthesised as a stream")
		}
	case vocab.KindGammaGenerateContent:
		if gc := in.GenerationConfig; gc != nil {
			if gc.CandidateCount != nil && *gc.CandidateCount > 1 {
				return nil, refuse("generationConfig.candidateCount", "candidateCount > 1 cannot be synthesised as a stream")
			}
			if gc.ResponseLogprobs {
				return nil, refuse("generationConfig.responseLogprobs", "logprobs cannot be synthesised as a stream")
			}
		}
	}
	return r, nil
}
