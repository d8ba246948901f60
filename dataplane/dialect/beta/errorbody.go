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
}

// ErrorBody is f as a beta error body: {"type":"error","error":{type,message}}.
func ErrorBody(f canon.ErrorFields) []byte {
	b, err := json.Marshal(errorBody{Type: "error", Error: errorMember{Type: f.BetaType, Message: f.Message}})
	if err != nil { // cannot happen: plain structs of strings and ints
		return []byte(`{"error":{"message":"internal error","type":"server_error","param":null,"code":"internal_error"}}`)
	}
	return b
}
