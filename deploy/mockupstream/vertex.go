package mockupstream

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Vertex AI: an OAuth 2 token endpoint (JWT bearer grant, RFC 7523, as Google's) and the publishers' model
// methods, which require a token it issued.

const (
	jwtBearerGrant             = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	vertexAnthropicVersion     = "vertex-2023-10-16"
	defaultGoogleTokenLifetime = time.Hour
)

// googleToken is an access token the token endpoint issued.
type googleToken struct {
	subject string // the service account's client_email
	expires time.Time
}

// tokenError answers the OAuth error shape Google's token endpoint uses.
func tokenError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

// serveToken answers POST /token: a JWT assertion signed RS256 by a configured service account's private
// key (verified with its public key), with aud the token URI, unexpired, earns an access token.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	switch s.cloudSwitches().TokenDown {
	case "503":
		tokenError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "The token service is unavailable.")
		return
	case "refuse":
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
			return
		}
		panic(http.ErrAbortHandler)
	}
	if r.Method != http.MethodPost {
		tokenError(w, http.StatusMethodNotAllowed, "invalid_request", "POST required")
		return
	}
	if err := r.ParseForm(); err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request", "malformed form body")
		return
	}
	if g := r.PostForm.Get("grant_type"); g != jwtBearerGrant {
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type", "Invalid grant_type: "+g)
		return
	}
	sub, err := s.verifyAssertion(r.PostForm.Get("assertion"), s.tokenURI(r))
	if err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_grant", err.Error())
		return
	}
	life := s.opts.Clouds.GoogleTokenLifetime
	if life <= 0 {
		life = defaultGoogleTokenLifetime
	}
	var raw [24]byte
	_, _ = rand.Read(raw[:])
	tok := "ya29.mock-" + hex.EncodeToString(raw[:])
	now := s.now()
	s.mu.Lock()
	if s.googleTokens == nil {
		s.googleTokens = make(map[string]googleToken)
	}
	maps.DeleteFunc(s.googleTokens, func(_ string, t googleToken) bool { return !now.Before(t.expires) })
	s.googleTokens[tok] = googleToken{subject: sub, expires: now.Add(life)}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "expires_in": int(life / time.Second),
		"token_type": "Bearer"})
}

// tokenURI is the audience an assertion must name.
func (s *Server) tokenURI(r *http.Request) string {
	if u := s.opts.Clouds.GoogleTokenURI; u != "" {
		return u
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p != "" {
		scheme = p
	}
	return scheme + "://" + r.Host + "/token"
}

// cloudMessage is an error whose text is a cloud's own message, sent to the client verbatim (capitalised and
// punctuated as the cloud writes it).
type cloudMessage string

func (m cloudMessage) Error() string { return string(m) }

// errAccountNotFound is Google's answer to an assertion whose issuer is no service account it knows.
var errAccountNotFound = cloudMessage("Invalid grant: account not found")

// verifyAssertion checks the assertion's RS256 signature with its issuer's public key, its audience and its
// lifetime (exp required, at most an hour after iat, as Google requires); it returns the issuer.
func (s *Server) verifyAssertion(assertion, aud string) (string, error) {
	if assertion == "" {
		return "", cloudMessage("Missing required parameter: assertion")
	}
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(assertion, &claims, func(t *jwt.Token) (any, error) {
		iss, err := t.Claims.GetIssuer()
		if err != nil {
			return nil, fmt.Errorf("issuer: %w", err)
		}
		key, ok := s.opts.Clouds.GoogleServiceAccounts[iss]
		if !ok || key == nil {
			return nil, errAccountNotFound
		}
		return key, nil
	}, jwt.WithValidMethods([]string{"RS256"}), jwt.WithAudience(aud), jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(), jwt.WithTimeFunc(s.now), jwt.WithLeeway(0))
	switch {
	case errors.Is(err, errAccountNotFound):
		return "", errAccountNotFound
	case errors.Is(err, jwt.ErrTokenExpired), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "", cloudMessage("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "", cloudMessage("Invalid JWT: Failed audience check. The audience in the JWT claim must be " + aud + ".")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "", cloudMessage("Invalid JWT Signature.")
	case err != nil:
		return "", cloudMessage("Invalid JWT: " + err.Error())
	}
	if claims.IssuedAt != nil && claims.ExpiresAt.Sub(claims.IssuedAt.Time) > time.Hour {
		return "", cloudMessage("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
	}
	return claims.Issuer, nil
}

// vertexAuth requires an unexpired access token the token endpoint issued.
func (x *exchange) vertexAuth() bool {
	tok := bearerToken(x.r)
	x.s.mu.Lock()
	t, ok := x.s.googleTokens[tok]
	x.s.mu.Unlock()
	if !ok || !x.s.now().Before(t.expires) {
		msg, reason := "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
			"ACCESS_TOKEN_TYPE_UNSUPPORTED"
		switch {
		case tok == "":
			msg, reason = "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
				"CREDENTIALS_MISSING"
		case ok:
			reason = "ACCESS_TOKEN_EXPIRED"
		}
		x.w.Header().Set("WWW-Authenticate", `Bearer realm="https://accounts.google.com/"`)
		x.writeError(http.StatusUnauthorized, gammaError{Error: x.gammaErrorBody(http.StatusUnauthorized, msg, reason)})
		return false
	}
	x.key = t.subject
	return true
}

// vertexRoute answers /v1/projects/{project}/locations/{location}/publishers/{google|anthropic}/models/{model}:{method}.
func (x *exchange) vertexRoute(path string) {
	parts := strings.Split(strings.TrimPrefix(path, "/v1/projects/"), "/")
	if len(parts) != 7 || parts[1] != "locations" || parts[3] != "publishers" || parts[5] != "models" ||
		x.r.Method != http.MethodPost {
		x.fail(http.StatusNotFound, fmt.Sprintf("unknown route %s %s", x.r.Method, path))
		return
	}
	o := x.s.opts.Clouds
	if (o.GoogleProject != "" && parts[0] != o.GoogleProject) || (o.GoogleLocation != "" && parts[2] != o.GoogleLocation) {
		x.fail(http.StatusForbidden, fmt.Sprintf("Permission denied on resource project %s (or it may not exist).", parts[0]))
		return
	}
	model, method, ok := strings.Cut(parts[6], ":")
	if !ok {
		x.fail(http.StatusNotFound, fmt.Sprintf("unknown route %s %s", x.r.Method, path))
		return
	}
	switch parts[4] {
	case "google":
		switch method {
		case "generateContent", "streamGenerateContent", "countTokens":
			x.model = model
			x.gammaMethod(model, method)
			return
		}
	case "anthropic":
		switch method {
		case "rawPredict", "streamRawPredict":
			x.vertexAnthropic(model, method == "streamRawPredict")
			return
		}
	}
	x.fail(http.StatusNotFound, fmt.Sprintf("unknown route %s %s", x.r.Method, path))
}

// vertexAnthropic answers rawPredict / streamRawPredict: a beta messages body with Vertex's
// anthropic_version and no model (the path names it).
func (x *exchange) vertexAnthropic(model string, stream bool) {
	var head struct {
		AnthropicVersion *string         `json:"anthropic_version"`
		Model            json.RawMessage `json:"model"`
	}
	if err := json.Unmarshal(x.body, &head); err != nil {
		x.fail(http.StatusBadRequest, "invalid JSON body")
		return
	}
	switch {
	case head.AnthropicVersion == nil:
		x.fail(http.StatusBadRequest, "anthropic_version: Field required")
		return
	case *head.AnthropicVersion != vertexAnthropicVersion:
		x.fail(http.StatusBadRequest, "anthropic_version: Input should be '"+vertexAnthropicVersion+"'")
		return
	case head.Model != nil:
		x.fail(http.StatusBadRequest, "model: Extra inputs are not permitted")
		return
	}
	if !x.rewriteBody(map[string]any{"model": model, "stream": stream}, "anthropic_version") {
		return
	}
	x.betaMessages()
}
