package translate

import "github.com/tollgate/tollgate/dataplane/canon"

// The request and response envelopes the dialects read and write are the canonical form's; the data plane
// names them through this package.
type (
	// Options configures a Translator (see canon.Options).
	Options = canon.Options
	// UpstreamRequest is the request to send upstream.
	UpstreamRequest = canon.UpstreamRequest
	// ClientResponse is a complete client answer (status, headers, body).
	ClientResponse = canon.ClientResponse
	// RequestError is a refused client request: HTTP 400 naming the field.
	RequestError = canon.RequestError
)
