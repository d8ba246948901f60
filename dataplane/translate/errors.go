package translate

import (
	"net/http"

	"github.com/tollgate/tollgate/dataplane/canon"
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
	return canon.EncodeClientError(t.clientFamily(), e)
}
