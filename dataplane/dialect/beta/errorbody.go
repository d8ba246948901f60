package beta

import (
	"encoding/json"

	"github.com/tollgate/tollgate/dataplane/canon"
)

type errorBody struct {
	Type  string      `json:"type"`
	Error errorMember `json:"error"`
}

type errorMember struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	// Tollgate is the gateway's machine-readable object (canon.ErrorFields.Tollgate), omitted when nil.
	Tollgate map[string]any `json:"tollgate,omitempty"`
}

// ErrorBody is f as a beta error body: {"type":"error","error":{type,message}}.
func ErrorBody(f canon.ErrorFields) []byte {
	b, err := json.Marshal(errorBody{Type: "error", Error: errorMember{Type: f.BetaType, Message: f.Message, Tollgate: f.Tollgate}})
	if err != nil { // cannot happen: plain structs of strings and ints
		return []byte(`{"error":{"message":"internal error","type":"server_error","param":null,"code":"internal_error"}}`)
	}
	return b
}
