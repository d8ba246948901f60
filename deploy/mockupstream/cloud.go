package mockupstream

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The mock as the three clouds that host the dialects' models: AWS Bedrock (bedrock.go), Google Vertex AI
// (vertex.go) and Azure OpenAI (azure.go). Each checks what its cloud checks (SigV4, OAuth access tokens,
// api-key) and answers in its cloud's own shapes; the generation itself is the dialect handlers' plan, so
// a cloud call is billed like a first-party call, under the cloud's provider name.

// Provider names of cloud bills (Bill.Provider); first-party bills have none.
const (
	ProviderBedrock = "aws_bedrock"
	ProviderVertex  = "gcp_vertex"
	ProviderAzure   = "azure_openai"
)

// CloudOptions are the credentials the cloud endpoints accept. A cloud whose credentials are all empty
// refuses every call to it.
type CloudOptions struct {
	// AWS is the access key Bedrock requests must be SigV4-signed with (service "bedrock", AWSRegion).
	// With a SessionToken the request must carry it (X-Amz-Security-Token); a SessionExpires in the past
	// refuses it as expired.
	AWS            AWSCredentials
	AWSRegion      string   // default us-east-1
	BedrockAPIKeys []string // Bedrock API keys (Authorization: Bearer)

	// GoogleServiceAccounts maps a service account's client_email (the JWT assertion's iss) to its public
	// key; the token endpoint (POST /token) verifies assertions with it.
	GoogleServiceAccounts map[string]*rsa.PublicKey
	// GoogleTokenURI is the aud an assertion must carry. Empty: the URL the assertion was posted to
	// (scheme from X-Forwarded-Proto or the connection, the request's Host, path /token).
	GoogleTokenURI string
	// GoogleTokenLifetime is the lifetime of issued access tokens (default 1 hour).
	GoogleTokenLifetime time.Duration
	// GoogleProject / GoogleLocation, when set, are the only project and location Vertex paths may name.
	GoogleProject, GoogleLocation string

	// AzureKeys are the accepted api-key values; AzureEntraTokens the accepted Entra ID bearer tokens.
	AzureKeys, AzureEntraTokens []string

	// Now is the cloud's clock (signing-time skew, session and token expiry). Nil: time.Now.
	Now func() time.Time
}

// AWSCredentials is an AWS access key.
type AWSCredentials struct {
	AccessKeyID, SecretAccessKey, SessionToken string
	SessionExpires                             time.Time // zero: never
}

// CloudSwitches are the clouds' fault switches (SetCloudSwitches, PUT /_mock/clouds).
type CloudSwitches struct {
	// Throttle answers every cloud API call 429 in its cloud's shape (Bedrock ThrottlingException, Vertex
	// RESOURCE_EXHAUSTED, Azure code "429"), with Retry-After (x-mock-retry-after, default 1).
	Throttle bool `json:"throttle,omitempty"`
	// TokenDown makes the OAuth token endpoint fail: "503" answers 503, "refuse" closes the connection
	// before any byte (what a client sees of a refused connection). Empty: up.
	TokenDown string `json:"token_down,omitempty"`
}

// SetCloudSwitches replaces the cloud switches.
func (s *Server) SetCloudSwitches(c CloudSwitches) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cloudSw = c
}

func (s *Server) cloudSwitches() CloudSwitches {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cloudSw
}

func (s *Server) now() time.Time {
	if s.opts.Clouds.Now != nil {
		return s.opts.Clouds.Now()
	}
	return time.Now()
}

// cloudOf says which cloud a path belongs to ("" = first party).
func cloudOf(path string) string {
	switch {
	case strings.HasPrefix(path, "/model/"):
		return ProviderBedrock
	case strings.HasPrefix(path, "/v1/projects/"):
		return ProviderVertex
	case strings.HasPrefix(path, "/openai/"):
		return ProviderAzure
	}
	return ""
}

// cloudDialect is the dialect whose answer a cloud path carries (its error shape after authentication).
func cloudDialect(cloud, path string) string {
	switch cloud {
	case ProviderBedrock:
		return DialectBeta
	case ProviderVertex:
		if strings.Contains(path, "/publishers/anthropic/") {
			return DialectBeta
		}
		return DialectGamma
	}
	return DialectAlpha
}

// cloudAuth checks the cloud's credentials and sets x.key to the authenticated principal; on refusal it
// has answered.
func (x *exchange) cloudAuth() bool {
	switch x.cloud {
	case ProviderBedrock:
		return x.bedrockAuth()
	case ProviderVertex:
		return x.vertexAuth()
	case ProviderAzure:
		return x.azureAuth()
	}
	return false
}

// routeCloud answers an authenticated cloud call.
func (x *exchange) routeCloud(path string) {
	if x.s.cloudSwitches().Throttle {
		x.fail(http.StatusTooManyRequests, "Too many requests, please wait before trying again.")
		return
	}
	switch x.cloud {
	case ProviderBedrock:
		x.bedrockRoute(path)
	case ProviderVertex:
		x.vertexRoute(path)
	case ProviderAzure:
		x.azureRoute(path)
	}
}

// cloudFail answers a cloud's own error shape; false when the dialect's shape applies.
func (x *exchange) cloudFail(status int, msg string) bool {
	switch {
	case x.cloud == ProviderBedrock:
		x.bedrockFail(status, bedrockErrorType(status), msg)
		return true
	case x.cloud == ProviderAzure && (status == http.StatusUnauthorized || status == http.StatusTooManyRequests ||
		status == http.StatusNotFound):
		if status == http.StatusTooManyRequests {
			msg = fmt.Sprintf("Requests to the Azure OpenAI API have exceeded the rate limit of your current pricing tier. Please retry after %s second(s).", x.ctl.retryAfter)
		}
		x.writeError(status, map[string]any{"error": map[string]any{"code": strconv.Itoa(status), "message": msg}})
		return true
	case x.cloud == ProviderVertex && x.dialect == DialectBeta && (status == http.StatusUnauthorized ||
		status == http.StatusForbidden || status == http.StatusTooManyRequests):
		// Vertex's front door answers auth, permission and quota errors in Google's shape, whatever the model.
		x.writeError(status, gammaError{Error: x.gammaErrorBody(status, msg, "")})
		return true
	}
	return false
}

// writeError answers status with body (Retry-After already set by fail for 429/503/529).
func (x *exchange) writeError(status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		b = []byte(`{"message":"mock encode failure"}`)
	}
	x.w.Header().Set("Content-Type", "application/json")
	x.w.WriteHeader(status)
	x.status = status
	_, _ = x.w.Write(b)
	x.completed = true
}

// rewriteBody replaces the body a dialect handler reads: the cloud's request less its own fields (del),
// with the fields set (the model from the path, stream from the method). The prompt the mock counts is this
// first-party body.
func (x *exchange) rewriteBody(set map[string]any, del ...string) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(x.body, &m); err != nil || m == nil {
		x.fail(http.StatusBadRequest, "invalid JSON body")
		return false
	}
	for _, k := range del {
		delete(m, k)
	}
	for k, v := range set {
		b, err := json.Marshal(v)
		if err != nil {
			x.fail(http.StatusInternalServerError, "mock could not encode the request")
			return false
		}
		m[k] = b
	}
	b, err := json.Marshal(m)
	if err != nil {
		x.fail(http.StatusInternalServerError, "mock could not encode the request")
		return false
	}
	x.body = b
	return true
}

// bearerToken is the Authorization bearer token, or "".
func bearerToken(r *http.Request) string {
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

func oneOf(v string, set []string) bool { return v != "" && slices.Contains(set, v) }
