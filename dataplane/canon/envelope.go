package canon

import (
	"net/http"
	"time"
)

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
