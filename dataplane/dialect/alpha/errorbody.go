package alpha

import (
	"encoding/json"

	"github.com/tollgate/tollgate/dataplane/canon"
)

type errorBody struct {
	Error errorMember `json:"error"`
}

type errorMember struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
	// Tollgate is the gateway's machine-readable object (canon.ErrorFields.Tollgate), omitted when nil.
	Tollgate map[string]any `json:"tollgate,omitempty"`
}

// ErrorBody is f as an alpha error body: {"error":{message,type,param,code}}.
func ErrorBody(f canon.ErrorFields) []byte {
	a := errorMember{Message: f.Message, Type: f.AlphaType, Code: f.AlphaCode, Tollgate: f.Tollgate}
	if f.Param != "" {
		a.Param = &f.Param
	}
	b, err := json.Marshal(errorBody{Error: a})
	if err != nil { // cannot happen: plain structs of strings and ints
		return []byte(`{"error":{"message":"internal error","type":"server_error","param":null,"code":"internal_error"}}`)
	}
	return b
}
