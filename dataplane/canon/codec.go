package canon

import (
	"crypto/rand"
	"io"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Codec is one dialect's decoder and encoder of the canonical form.
type Codec interface {
	DecodeRequest(body []byte, st *State) (*Request, error)
	EncodeRequest(r *Request, model string, stream bool, st *State) (*UpstreamRequest, error)
	DecodeResponse(body []byte, st *State) (*Response, error)
	EncodeResponse(r *Response, st *State) ([]byte, error)
	NewDecoder(st *State) StreamDecoder
	NewEncoder(w io.Writer, st *State) StreamEncoder
	// FieldName is the path, in this dialect's requests, of a member another dialect may refuse.
	FieldName(f Field) string
	// CheckDestination refuses what r carries that this dialect cannot send upstream (names in the
	// client's dialect: st.clientField).
	CheckDestination(r *Request, st *State) error
}

// StreamDecoder turns one upstream stream event (SSE event name + data, or a gamma array element with an
// empty name) into canonical events appended to out.
type StreamDecoder interface {
	Decode(name string, data []byte, out []Event) ([]Event, error)
}

// Biller is implemented by the stream decoders that bill from their own decoding: the billed usage of the
// events decoded so far (every category and the reported tier, by the dialect's rules), whether any event
// reported usage, and whether the output count was reported (beta's message_start reports a placeholder).
type Biller interface {
	// ObserveHeader takes the upstream response header (gamma's served tier is a header).
	ObserveHeader(h http.Header)
	Billed() (u usage.Usage, found, outputReported bool)
}

// HeaderBiller is implemented by the codecs whose buffered answer's billed usage (Response.Billed) also
// depends on the response header.
type HeaderBiller interface {
	BillHeader(u *usage.Usage, h http.Header)
}

// StreamEncoder writes client stream events.
type StreamEncoder interface {
	Emit(ev *Event) error
	Finish() error
	Fail(e *APIError) error
}

// State is the per-request state shared by the codecs of one Translator.
type State struct {
	Opts     Options    `json:"-"`
	Client   vocab.Kind `json:"-"`
	Upstream vocab.Kind `json:"-"`
	Stream   bool       `json:"-"`
	GammaSSE bool       `json:"-"`
	Lent     bool       `json:"-"` // ClientRequest.Lent: the request body is the caller's, unchanged while the translator is used
	Req      *Request   `json:"-"`
	idSuffix string
	// ClientCodec is the client's codec (its field names are the ones refusals cite).
	ClientCodec Codec `json:"-"`
}

func NewState(opts Options) *State { return &State{Opts: opts} }

// newID returns a fresh random suffix.
func (st *State) newID() string {
	if st.Opts.NewID != nil {
		return st.Opts.NewID()
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b [24]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

// RespSuffix is the per-response id suffix (stable for one request).
func (st *State) RespSuffix() string {
	if st.idSuffix == "" {
		st.idSuffix = st.newID()
	}
	return st.idSuffix
}

func (st *State) Now() int64 {
	if st.Opts.Now != nil {
		return st.Opts.Now().Unix()
	}
	return time.Now().Unix()
}

func (st *State) IncludeUsage() bool { return st.Req != nil && st.Req.IncludeUsage }
