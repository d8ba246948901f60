package gamma

import (
	"encoding/json"
	"fmt"

	"github.com/tollgate/tollgate/dataplane/canon"
)

type errorBody struct {
	Error errorMember `json:"error"`
}

type errorMember struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Status  string         `json:"status"`
	Details []errorDetails `json:"details,omitempty"`
}

type errorDetails struct {
	Type       string `json:"@type"`
	RetryDelay string `json:"retryDelay,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Domain     string `json:"domain,omitempty"`
	// Metadata is the gateway's machine-readable object (canon.ErrorFields.Tollgate), every value a string.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// ErrorBody is f as a gamma error body: {"error":{code,message,status,details}}; RetryDelay adds a RetryInfo
// detail, Reason an ErrorInfo detail of domain tollgate.
func ErrorBody(f canon.ErrorFields) []byte {
	g := errorMember{Code: f.Status, Message: f.Message, Status: f.GammaStatus}
	if f.RetryDelay != "" {
		g.Details = append(g.Details, errorDetails{Type: "type.googleapis.com/google.rpc.RetryInfo", RetryDelay: f.RetryDelay + "s"})
	}
	if f.Reason != "" {
		d := errorDetails{Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: f.Reason, Domain: "tollgate"}
		if f.Tollgate != nil {
			d.Metadata = make(map[string]string, len(f.Tollgate))
			for k, v := range f.Tollgate {
				d.Metadata[k] = fmt.Sprint(v)
			}
		}
		g.Details = append(g.Details, d)
	}
	b, err := json.Marshal(errorBody{Error: g})
	if err != nil { // cannot happen: plain structs of strings and ints
		return []byte(`{"error":{"message":"internal error","type":"server_error","param":null,"code":"internal_error"}}`)
	}
	return b
}
