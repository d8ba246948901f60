// Package cloud owns the settings and credentials of the cloud-hosted channel types — aws_bedrock,
// gcp_vertex and azure_openai (docs/providers.md): their typed form, their validation, the default base
// URL each derives from its region, and the per-model choice of the wire a cloud model speaks. The
// control plane uses it to refuse a bad provider or credential on write; a data plane uses the same
// parsers to address and authenticate its upstream calls.
package cloud

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/oauth2/google"
	"golang.org/x/oauth2/jwt"

	"github.com/tollgate/tollgate/shared/vocab"
)

// Problem is one invalid field: Field is a dotted path under settings ("settings.region") or "secret".
// Messages never quote a secret.
type Problem struct {
	Field   string
	Message string
}

func (p Problem) Error() string { return p.Field + ": " + p.Message }

// Problems is the list of problems of one settings object or secret; nil when valid.
type Problems []Problem

func (ps Problems) Error() string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.Error()
	}
	return strings.Join(s, "; ")
}

func (ps *Problems) add(field, format string, args ...any) {
	*ps = append(*ps, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (ps Problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// Auth modes.
const (
	// AuthSigV4 signs Bedrock calls with an AWS access key (SigV4, service "bedrock").
	AuthSigV4 = "sigv4"
	// AuthAPIKey sends a Bedrock API key as a bearer token (aws_bedrock) or the Azure `api-key` header
	// (azure_openai).
	AuthAPIKey = "api_key"
	// AuthEntraToken sends a static Entra ID access token as `Authorization: Bearer` (azure_openai).
	AuthEntraToken = "entra_token"
	// AuthEntraClientCredentials obtains Entra ID tokens with the OAuth 2 client-credentials grant
	// (azure_openai).
	AuthEntraClientCredentials = "entra_client_credentials"
	// AuthServiceAccount exchanges a service-account key for OAuth 2 access tokens (gcp_vertex; the only
	// mode there).
	AuthServiceAccount = "service_account"
)

// Azure URL forms.
const (
	// AzureDeployment is `/openai/deployments/{deployment}/…?api-version=…`, the deployment being the
	// upstream model id.
	AzureDeployment = "deployment"
	// AzureV1 is `/openai/v1/…` with the deployment in the body's `model`.
	AzureV1 = "v1"
)

// Defaults.
var (
	// DefaultInvokeModelPrefixes are the Bedrock model ids served through InvokeModel with the beta body.
	DefaultInvokeModelPrefixes = []string{"anthropic."}
	// DefaultAnthropicModelPrefixes are the Vertex models of publisher anthropic (rawPredict, beta body).
	DefaultAnthropicModelPrefixes = []string{"claude-"}
)

const (
	// VertexScope is the OAuth scope of Vertex AI calls.
	VertexScope = "https://www.googleapis.com/auth/cloud-platform"
	// DefaultEntraScope is the scope of Azure OpenAI tokens.
	DefaultEntraScope = "https://cognitiveservices.azure.com/.default"
	// DefaultEntraAuthority is the Entra ID authority the token URL is derived from.
	DefaultEntraAuthority = "https://login.microsoftonline.com"
)

// Bedrock is an aws_bedrock provider's settings.
type Bedrock struct {
	// Region is the AWS region (required), e.g. "us-east-1"; it is the SigV4 scope and names the default
	// endpoint https://bedrock-runtime.{region}.amazonaws.com.
	Region string `json:"region"`
	// Auth is AuthSigV4 (default) or AuthAPIKey.
	Auth string `json:"auth,omitempty"`
	// InvokeModelPrefixes selects the models served through InvokeModel with the beta body (see
	// InvokeModel); absent: DefaultInvokeModelPrefixes; [] sends every model through Converse.
	InvokeModelPrefixes *[]string `json:"invoke_model_prefixes,omitempty"`
}

// Vertex is a gcp_vertex provider's settings.
type Vertex struct {
	// Project is the Google Cloud project id (required).
	Project string `json:"project"`
	// Location is the region, e.g. "us-east5", or "global" (required).
	Location string `json:"location"`
	// AnthropicModelPrefixes selects the models of publisher anthropic (rawPredict, beta body); every
	// other model is publisher google (generateContent, gamma). Absent: DefaultAnthropicModelPrefixes.
	AnthropicModelPrefixes *[]string `json:"anthropic_model_prefixes,omitempty"`
}

// Azure is an azure_openai provider's settings. Its base_url is the resource endpoint
// (https://{resource}.openai.azure.com).
type Azure struct {
	// URLForm is AzureDeployment (default) or AzureV1.
	URLForm string `json:"url_form,omitempty"`
	// APIVersion is the `api-version` query parameter: required by the deployment form, refused by v1.
	APIVersion string `json:"api_version,omitempty"`
	// Auth is AuthAPIKey (default), AuthEntraToken or AuthEntraClientCredentials.
	Auth string `json:"auth,omitempty"`
	// EntraScope is the scope asked for with client credentials; default DefaultEntraScope.
	EntraScope string `json:"entra_scope,omitempty"`
	// EntraTokenURL overrides the token endpoint of client credentials; default
	// DefaultEntraAuthority/{tenant_id}/oauth2/v2.0/token.
	EntraTokenURL string `json:"entra_token_url,omitempty"`
}

var (
	awsRegion    = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	gcpLocation  = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]+$`)
	gcpProject   = regexp.MustCompile(`^[a-z0-9][a-z0-9.:-]*[a-z0-9]$`)
	azureVersion = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}(-preview)?$`)
)

// decodeStrict decodes a settings object refusing unknown members (a misspelt setting is an error,
// not a silent default).
func decodeStrict(raw []byte, v any, ps *Problems) bool {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			ps.add("settings", "unknown setting %s", f)
		} else {
			ps.add("settings", "%s", strings.TrimPrefix(msg, "json: "))
		}
		return false
	}
	return true
}

func checkPrefixes(field string, list *[]string, ps *Problems) {
	if list == nil {
		return
	}
	for i, p := range *list {
		if strings.TrimSpace(p) == "" {
			ps.add(fmt.Sprintf("%s[%d]", field, i), "must be a non-empty model id prefix")
		}
	}
}

// ParseBedrock decodes and validates aws_bedrock settings.
func ParseBedrock(raw []byte) (Bedrock, error) {
	var s Bedrock
	var ps Problems
	if !decodeStrict(raw, &s, &ps) {
		return s, ps
	}
	switch {
	case s.Region == "":
		ps.add("settings.region", `required: the AWS region of the Bedrock runtime, e.g. "us-east-1"`)
	case !awsRegion.MatchString(s.Region):
		ps.add("settings.region", `%q is not an AWS region name (like "us-east-1")`, s.Region)
	}
	if s.Auth == "" {
		s.Auth = AuthSigV4
	}
	if s.Auth != AuthSigV4 && s.Auth != AuthAPIKey {
		ps.add("settings.auth", `must be %q (an access key, SigV4) or %q (a Bedrock API key), got %q`, AuthSigV4, AuthAPIKey, s.Auth)
	}
	checkPrefixes("settings.invoke_model_prefixes", s.InvokeModelPrefixes, &ps)
	return s, ps.err()
}

// ParseVertex decodes and validates gcp_vertex settings.
func ParseVertex(raw []byte) (Vertex, error) {
	var s Vertex
	var ps Problems
	if !decodeStrict(raw, &s, &ps) {
		return s, ps
	}
	switch {
	case s.Project == "":
		ps.add("settings.project", "required: the Google Cloud project id")
	case !gcpProject.MatchString(s.Project):
		ps.add("settings.project", "%q is not a project id (lower-case letters, digits, '-', '.', ':')", s.Project)
	}
	switch {
	case s.Location == "":
		ps.add("settings.location", `required: the Vertex AI region, e.g. "us-east5", or "global"`)
	case s.Location != "global" && !gcpLocation.MatchString(s.Location):
		ps.add("settings.location", `%q is not a Google Cloud region (like "us-east5") or "global"`, s.Location)
	}
	checkPrefixes("settings.anthropic_model_prefixes", s.AnthropicModelPrefixes, &ps)
	return s, ps.err()
}

// ParseAzure decodes and validates azure_openai settings.
func ParseAzure(raw []byte) (Azure, error) {
	var s Azure
	var ps Problems
	if !decodeStrict(raw, &s, &ps) {
		return s, ps
	}
	if s.URLForm == "" {
		s.URLForm = AzureDeployment
	}
	switch s.URLForm {
	case AzureDeployment:
		switch {
		case s.APIVersion == "":
			ps.add("settings.api_version", `required with url_form "deployment": the api-version query parameter, e.g. "2024-10-21"`)
		case !azureVersion.MatchString(s.APIVersion):
			ps.add("settings.api_version", `%q is not an api-version (YYYY-MM-DD, optionally with "-preview")`, s.APIVersion)
		}
	case AzureV1:
		if s.APIVersion != "" {
			ps.add("settings.api_version", `the v1 URL form takes no api-version; remove it or use url_form "deployment"`)
		}
	default:
		ps.add("settings.url_form", `must be %q (/openai/deployments/{deployment}/…) or %q (/openai/v1/…), got %q`, AzureDeployment, AzureV1, s.URLForm)
	}
	if s.Auth == "" {
		s.Auth = AuthAPIKey
	}
	switch s.Auth {
	case AuthAPIKey, AuthEntraToken:
		if s.EntraScope != "" || s.EntraTokenURL != "" {
			ps.add("settings.auth", "entra_scope and entra_token_url apply to auth %q only", AuthEntraClientCredentials)
		}
	case AuthEntraClientCredentials:
		if s.EntraScope == "" {
			s.EntraScope = DefaultEntraScope
		}
		if s.EntraTokenURL != "" {
			if u, err := url.Parse(s.EntraTokenURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				ps.add("settings.entra_token_url", "%q: want an absolute http(s) URL", s.EntraTokenURL)
			}
		}
	default:
		ps.add("settings.auth", `must be %q (the api-key header), %q (a static Entra ID bearer token) or %q (Entra ID client credentials), got %q`,
			AuthAPIKey, AuthEntraToken, AuthEntraClientCredentials, s.Auth)
	}
	return s, ps.err()
}

// CheckSettings validates the settings of a provider of channel ch; channel types that are not cloud
// types have no typed settings (nil).
func CheckSettings(ch vocab.ChannelType, raw []byte) error {
	var err error
	switch ch {
	case vocab.ChannelAWSBedrock:
		_, err = ParseBedrock(raw)
	case vocab.ChannelGCPVertex:
		_, err = ParseVertex(raw)
	case vocab.ChannelAzureOpenAI:
		_, err = ParseAzure(raw)
	}
	return err
}

// DefaultBaseURL is the base URL a cloud provider uses when none is given: the regional Bedrock runtime
// or Vertex AI endpoint. Azure has none (the resource endpoint is the operator's); "" when settings are
// invalid or ch is not a cloud with a derived endpoint.
func DefaultBaseURL(ch vocab.ChannelType, raw []byte) string {
	switch ch {
	case vocab.ChannelAWSBedrock:
		if s, err := ParseBedrock(raw); err == nil {
			return "https://bedrock-runtime." + s.Region + ".amazonaws.com"
		}
	case vocab.ChannelGCPVertex:
		if s, err := ParseVertex(raw); err == nil {
			if s.Location == "global" {
				return "https://aiplatform.googleapis.com"
			}
			return "https://" + s.Location + "-aiplatform.googleapis.com"
		}
	}
	return ""
}

// matchPrefix reports whether the model id's last '/'-separated segment (the model of an ARN or a
// resource path) starts with one of prefixes, either directly or after one leading dot-separated
// segment (Bedrock's cross-region inference profiles: "us.", "eu.", "apac.", "global.", …).
func matchPrefix(model string, prefixes []string) bool {
	seg := model[strings.LastIndexByte(model, '/')+1:]
	rest := ""
	if i := strings.IndexByte(seg, '.'); i >= 0 {
		rest = seg[i+1:]
	}
	return slices.ContainsFunc(prefixes, func(p string) bool {
		return strings.HasPrefix(seg, p) || (rest != "" && strings.HasPrefix(rest, p))
	})
}

// InvokeModel reports whether a Bedrock model is served through InvokeModel /
// InvokeModelWithResponseStream with the beta body (true) or through Converse (false).
func (s Bedrock) InvokeModel(model string) bool {
	prefixes := DefaultInvokeModelPrefixes
	if s.InvokeModelPrefixes != nil {
		prefixes = *s.InvokeModelPrefixes
	}
	return matchPrefix(model, prefixes)
}

// Anthropic reports whether a Vertex model is of publisher anthropic (rawPredict, beta) rather than
// google (generateContent, gamma).
func (s Vertex) Anthropic(model string) bool {
	prefixes := DefaultAnthropicModelPrefixes
	if s.AnthropicModelPrefixes != nil {
		prefixes = *s.AnthropicModelPrefixes
	}
	return matchPrefix(model, prefixes)
}

// AWSKey is an aws_bedrock sigv4 credential's secret, a JSON object.
type AWSKey struct {
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	SessionToken    string `json:"session_token,omitempty"`
}

// EntraClient is an azure_openai entra_client_credentials credential's secret, a JSON object.
type EntraClient struct {
	TenantID     string `json:"tenant_id"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

// ParseAWSKey decodes a sigv4 secret.
func ParseAWSKey(secret string) (AWSKey, error) {
	var k AWSKey
	var ps Problems
	if !decodeSecret(secret, &k, `{"access_key_id": "AKIA…", "secret_access_key": "…", "session_token": "…" (optional)}`, &ps) {
		return k, ps
	}
	if k.AccessKeyID == "" {
		ps.add("secret", "access_key_id is required")
	} else if strings.ContainsAny(k.AccessKeyID, " \t\r\n/") {
		ps.add("secret", "access_key_id must not contain whitespace or '/'")
	}
	if k.SecretAccessKey == "" {
		ps.add("secret", "secret_access_key is required")
	}
	return k, ps.err()
}

// ParseEntraClient decodes an entra_client_credentials secret.
func ParseEntraClient(secret string) (EntraClient, error) {
	var c EntraClient
	var ps Problems
	if !decodeSecret(secret, &c, `{"tenant_id": "…", "client_id": "…", "client_secret": "…"}`, &ps) {
		return c, ps
	}
	if c.TenantID == "" {
		ps.add("secret", "tenant_id is required")
	} else if strings.ContainsAny(c.TenantID, "/?#% \t") {
		ps.add("secret", "tenant_id must be a directory id or domain (no '/', '?', '#', '%%' or spaces)")
	}
	if c.ClientID == "" {
		ps.add("secret", "client_id is required")
	}
	if c.ClientSecret == "" {
		ps.add("secret", "client_secret is required")
	}
	return c, ps.err()
}

// TokenConfig is the client-credentials configuration of an Entra ID application for settings s.
func (s Azure) TokenConfig(c EntraClient) *clientcredentials.Config {
	tokenURL := s.EntraTokenURL
	if tokenURL == "" {
		tokenURL = DefaultEntraAuthority + "/" + url.PathEscape(c.TenantID) + "/oauth2/v2.0/token"
	}
	scope := s.EntraScope
	if scope == "" {
		scope = DefaultEntraScope
	}
	return &clientcredentials.Config{ClientID: c.ClientID, ClientSecret: c.ClientSecret, TokenURL: tokenURL, Scopes: []string{scope}}
}

// ParseServiceAccount parses a gcp_vertex secret, a service-account JSON key, with x/oauth2/google and
// returns its JWT configuration (client_email, private key, token URI) for the Vertex scope.
func ParseServiceAccount(secret string) (*jwt.Config, error) {
	var ps Problems
	data := []byte(secret)
	if !json.Valid(data) {
		ps.add("secret", "must be a service-account JSON key (the file Google Cloud downloads for a service account)")
		return nil, ps
	}
	if _, err := google.CredentialsFromJSONWithType(context.Background(), data, google.ServiceAccount, VertexScope); err != nil {
		ps.add("secret", "not a service-account key: %s", credentialError(err))
		return nil, ps
	}
	cfg, err := google.JWTConfigFromJSON(data, VertexScope)
	if err != nil {
		ps.add("secret", "not a service-account key: %s", credentialError(err))
		return nil, ps
	}
	// The library puts Google's token endpoint in place of a missing token_uri; a key without one was
	// edited, so it is refused rather than sent elsewhere than its issuer said.
	var raw struct {
		TokenURI string `json:"token_uri"`
	}
	_ = json.Unmarshal(data, &raw)
	if cfg.Email == "" {
		ps.add("secret", "client_email is required")
	}
	if raw.TokenURI == "" {
		ps.add("secret", "token_uri is required")
	} else if u, err := url.Parse(raw.TokenURI); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		ps.add("secret", "token_uri must be an absolute http(s) URL")
	}
	if len(cfg.PrivateKey) == 0 {
		ps.add("secret", "private_key is required")
	} else if err := checkPrivateKey(cfg.PrivateKey); err != nil {
		ps.add("secret", "private_key: %v", err)
	}
	return cfg, ps.err()
}

// credentialError keeps the library's reason without any of the key's content (its JSON errors may
// quote a value).
func credentialError(err error) string {
	if strings.Contains(err.Error(), "expected credential type") {
		return `its "type" must be "service_account"`
	}
	return "its members do not have the types of a service-account key"
}

// checkPrivateKey checks that a PEM private key is an RSA key (Google signs JWT assertions with RS256).
func checkPrivateKey(p []byte) error {
	block, _ := pem.Decode(p)
	if block == nil {
		return errors.New("not a PEM block")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if _, ok := k.(*rsa.PrivateKey); !ok {
			return errors.New("not an RSA key")
		}
		return nil
	}
	if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
		return errors.New("not a PKCS#8 or PKCS#1 RSA private key")
	}
	return nil
}

func decodeSecret(secret string, v any, shape string, ps *Problems) bool {
	dec := json.NewDecoder(strings.NewReader(secret))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			ps.add("secret", "unknown member %s; want %s", f, shape)
		} else {
			ps.add("secret", "must be a JSON object %s", shape)
		}
		return false
	}
	return true
}

// checkKey checks a secret that is a key itself (not a JSON object).
func checkKey(secret, what string, ps *Problems) {
	t := strings.TrimSpace(secret)
	switch {
	case t == "":
		ps.add("secret", "required")
	case strings.HasPrefix(t, "{"):
		ps.add("secret", "auth %q takes %s itself, not a JSON object", AuthAPIKey, what)
	case t != secret || strings.ContainsAny(secret, "\r\n"):
		ps.add("secret", "%s must not contain line breaks or surrounding spaces", what)
	}
}

// CheckSecret validates a credential's secret against its provider's channel type and settings. Non-cloud
// channels take any non-empty secret. Invalid settings make every secret invalid.
func CheckSecret(ch vocab.ChannelType, settings []byte, secret string) error {
	var ps Problems
	switch ch {
	case vocab.ChannelAWSBedrock:
		s, err := ParseBedrock(settings)
		if err != nil {
			return err
		}
		if s.Auth == AuthAPIKey {
			checkKey(secret, "the Bedrock API key", &ps)
			return ps.err()
		}
		_, err = ParseAWSKey(secret)
		return err
	case vocab.ChannelGCPVertex:
		if _, err := ParseVertex(settings); err != nil {
			return err
		}
		_, err := ParseServiceAccount(secret)
		return err
	case vocab.ChannelAzureOpenAI:
		s, err := ParseAzure(settings)
		if err != nil {
			return err
		}
		switch s.Auth {
		case AuthEntraClientCredentials:
			_, err := ParseEntraClient(secret)
			return err
		case AuthEntraToken:
			checkKey(secret, "the Entra ID access token", &ps)
		default:
			checkKey(secret, "the Azure OpenAI key", &ps)
		}
		return ps.err()
	}
	return nil
}
