package canon

// ErrorFields are what one error body says, whoever raised the error: the gateway itself (httperr.Error)
// or an upstream whose error is carried to a client of another dialect (package translate, for buffered
// answers and in-stream errors alike). Each dialect package writes its own error body from them (ErrorBody);
// httperr.Render picks the client's.
type ErrorFields struct {
	// Status is the HTTP status (gamma's error.code).
	Status  int
	Message string
	// AlphaType, AlphaCode (nil: null) and Param ("": null) are alpha's error.type, .code and .param.
	AlphaType string
	AlphaCode *string
	Param     string
	// BetaType is beta's error.type.
	BetaType string
	// GammaStatus is gamma's error.status. RetryDelay (whole seconds), when not "", adds a RetryInfo
	// detail; Reason, when not "", an ErrorInfo detail of domain tollgate.
	GammaStatus string
	RetryDelay  string
	Reason      string
	// Tollgate, when not nil, is the gateway's machine-readable object of the error (docs/cost.md, the cost
	// cap's 402): alpha and beta error.tollgate, gamma the ErrorInfo detail's metadata (values as strings).
	Tollgate map[string]any
}
