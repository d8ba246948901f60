package translate

import (
	"net/http"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/httperr"
	"github.com/tollgate/tollgate/shared/vocab"
)

// ErrorBody renders an error the gateway itself raises (for example a *RequestError from Request) in the
// client's dialect. Any error that is not a *RequestError becomes a 400 with its message.
func (t *Translator) ErrorBody(err error) canon.ClientResponse {
	e := &canon.APIError{Status: http.StatusBadRequest, Class: canon.ClassInvalid, Message: err.Error()}
	if re, ok := err.(*canon.RequestError); ok {
		e.Param = re.Field
		e.Message = re.Error()
	} else if re := asRequestError(err); re != nil {
		e.Param = re.Field
		e.Message = re.Error()
	}
	return encodeClientError(t.clientFamily(), e)
}

// encodeClientError renders e for a client of the given family (its dialect's error body).
func encodeClientError(family vocab.Kind, e *canon.APIError) canon.ClientResponse {
	h := http.Header{"Content-Type": []string{"application/json"}}
	if e.RetryAfter != "" {
		h.Set("Retry-After", e.RetryAfter)
	}
	return canon.ClientResponse{Status: e.StatusFor(family), Header: h, Body: httperr.Render(family, e.Fields(family))}
}
