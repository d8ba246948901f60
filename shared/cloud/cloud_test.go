package cloud_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/shared/cloud"
	"github.com/tollgate/tollgate/shared/vocab"
)

// serviceAccount is a service-account JSON key with a fresh RSA key; edit changes its members.
func serviceAccount(t *testing.T, edit func(m map[string]any)) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{"type": "service_account", "project_id": "proj-1", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "gw@proj-1.iam.gserviceaccount.com", "client_id": "1", "token_uri": "https://oauth2.example/token"}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func problems(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var ps cloud.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %v is not cloud.Problems", err)
	}
	return ps.Error()
}

func TestSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ch       vocab.ChannelType
		settings string
		want     string // substring of the problems; "" valid
	}{
		{vocab.ChannelAWSBedrock, `{"region":"us-east-1"}`, ""},
		{vocab.ChannelAWSBedrock, `{"region":"us-gov-west-1","auth":"api_key","invoke_model_prefixes":[]}`, ""},
		{vocab.ChannelAWSBedrock, `{}`, "settings.region: required"},
		{vocab.ChannelAWSBedrock, `{"region":"US East"}`, `settings.region: "US East" is not an AWS region`},
		{vocab.ChannelAWSBedrock, `{"region":"us-east-1","auth":"password"}`, `settings.auth: must be "sigv4"`},
		{vocab.ChannelAWSBedrock, `{"region":"us-east-1","invoke_model_prefixes":[""]}`, "settings.invoke_model_prefixes[0]"},
		{vocab.ChannelAWSBedrock, `{"region":"us-east-1","regoin":"x"}`, `settings: unknown setting "regoin"`},
		{vocab.ChannelAWSBedrock, `{"region":1}`, "settings: cannot unmarshal number"},
		{vocab.ChannelGCPVertex, `{"project":"my-proj","location":"us-east5"}`, ""},
		{vocab.ChannelGCPVertex, `{"project":"my-proj","location":"global"}`, ""},
		{vocab.ChannelGCPVertex, `{"location":"us-east5"}`, "settings.project: required"},
		{vocab.ChannelGCPVertex, `{"project":"a/b","location":"us-east5"}`, "settings.project: \"a/b\" is not a project id"},
		{vocab.ChannelGCPVertex, `{"project":"my-proj"}`, "settings.location: required"},
		{vocab.ChannelGCPVertex, `{"project":"my-proj","location":"mars"}`, `settings.location: "mars" is not a Google Cloud region`},
		{vocab.ChannelAzureOpenAI, `{"api_version":"2024-10-21"}`, ""},
		{vocab.ChannelAzureOpenAI, `{"url_form":"v1","auth":"entra_token"}`, ""},
		{vocab.ChannelAzureOpenAI, `{"url_form":"v1","auth":"entra_client_credentials","entra_token_url":"http://127.0.0.1:9/t"}`, ""},
		{vocab.ChannelAzureOpenAI, `{}`, `settings.api_version: required with url_form "deployment"`},
		{vocab.ChannelAzureOpenAI, `{"api_version":"latest"}`, `settings.api_version: "latest" is not an api-version`},
		{vocab.ChannelAzureOpenAI, `{"url_form":"v1","api_version":"2024-10-21"}`, "settings.api_version: the v1 URL form takes no api-version"},
		{vocab.ChannelAzureOpenAI, `{"url_form":"v2"}`, `settings.url_form: must be "deployment"`},
		{vocab.ChannelAzureOpenAI, `{"url_form":"v1","auth":"oauth"}`, `settings.auth: must be "api_key"`},
		{vocab.ChannelAzureOpenAI, `{"url_form":"v1","entra_scope":"x"}`, "settings.auth: entra_scope and entra_token_url apply"},
		{vocab.ChannelAzureOpenAI, `{"url_form":"v1","auth":"entra_client_credentials","entra_token_url":"/t"}`, "settings.entra_token_url"},
		{vocab.ChannelAlpha, `{"anything":1}`, ""},
	}
	for _, tt := range tests {
		got := problems(t, cloud.CheckSettings(tt.ch, []byte(tt.settings)))
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("CheckSettings(%s, %s) = %q, want %q", tt.ch, tt.settings, got, tt.want)
		}
	}
}

func TestDefaultBaseURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ch             vocab.ChannelType
		settings, want string
	}{
		{vocab.ChannelAWSBedrock, `{"region":"eu-central-1"}`, "https://bedrock-runtime.eu-central-1.amazonaws.com"},
		{vocab.ChannelGCPVertex, `{"project":"p-1","location":"us-east5"}`, "https://us-east5-aiplatform.googleapis.com"},
		{vocab.ChannelGCPVertex, `{"project":"p-1","location":"global"}`, "https://aiplatform.googleapis.com"},
		{vocab.ChannelAzureOpenAI, `{"api_version":"2024-10-21"}`, ""},
		{vocab.ChannelAWSBedrock, `{}`, ""},
	} {
		if got := cloud.DefaultBaseURL(tt.ch, []byte(tt.settings)); got != tt.want {
			t.Errorf("DefaultBaseURL(%s, %s) = %q, want %q", tt.ch, tt.settings, got, tt.want)
		}
	}
}

func TestModelWire(t *testing.T) {
	t.Parallel()
	b, err := cloud.ParseBedrock([]byte(`{"region":"us-east-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]bool{
		"anthropic.claude-sonnet-4-20250514-v1:0":                                                      true,
		"us.anthropic.claude-sonnet-4-20250514-v1:0":                                                   true,
		"arn:aws:bedrock:us-east-1:123456789012:inference-profile/global.anthropic.claude-opus-4-v1:0": true,
		"meta.llama3-70b-instruct-v1:0":                                                                false,
		"amazon.nova-pro-v1:0":                                                                         false,
		"us.amazon.nova-pro-v1:0":                                                                      false,
	} {
		if got := b.InvokeModel(model); got != want {
			t.Errorf("InvokeModel(%s) = %v, want %v", model, got, want)
		}
	}
	none, _ := cloud.ParseBedrock([]byte(`{"region":"us-east-1","invoke_model_prefixes":[]}`))
	if none.InvokeModel("anthropic.claude-3-haiku") {
		t.Error("invoke_model_prefixes [] still sends a model to InvokeModel")
	}
	v, _ := cloud.ParseVertex([]byte(`{"project":"p-1","location":"global"}`))
	if !v.Anthropic("claude-sonnet-4@20250514") || v.Anthropic("gemini-2.5-pro") {
		t.Error("Vertex publisher by model: want claude-* anthropic, gemini-* google")
	}
}

func TestSecrets(t *testing.T) {
	t.Parallel()
	const (
		sigv4  = `{"region":"us-east-1"}`
		bkey   = `{"region":"us-east-1","auth":"api_key"}`
		vertex = `{"project":"p-1","location":"us-east5"}`
		azKey  = `{"api_version":"2024-10-21"}`
		azTok  = `{"url_form":"v1","auth":"entra_token"}`
		azCC   = `{"url_form":"v1","auth":"entra_client_credentials"}`
	)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	tests := []struct {
		name     string
		ch       vocab.ChannelType
		settings string
		secret   string
		want     string
	}{
		{"sigv4", vocab.ChannelAWSBedrock, sigv4, `{"access_key_id":"AKIAEXAMPLE","secret_access_key":"s3cr3t"}`, ""},
		{"sigv4 session", vocab.ChannelAWSBedrock, sigv4, `{"access_key_id":"ASIAEXAMPLE","secret_access_key":"s3cr3t","session_token":"tok"}`, ""},
		{"sigv4 no secret key", vocab.ChannelAWSBedrock, sigv4, `{"access_key_id":"AKIAEXAMPLE"}`, "secret: secret_access_key is required"},
		{"sigv4 plain key", vocab.ChannelAWSBedrock, sigv4, `AKIAEXAMPLE:s3cr3t`, "secret: must be a JSON object"},
		{"sigv4 typo", vocab.ChannelAWSBedrock, sigv4, `{"access_key":"A","secret_access_key":"s3cr3t"}`, `unknown member "access_key"`},
		{"bedrock api key", vocab.ChannelAWSBedrock, bkey, `ABSKexamplekey==`, ""},
		{"bedrock api key json", vocab.ChannelAWSBedrock, bkey, `{"access_key_id":"A","secret_access_key":"s"}`, "takes the Bedrock API key itself"},
		{"bedrock api key newline", vocab.ChannelAWSBedrock, bkey, "ABSK\nx", "must not contain line breaks"},
		{"service account", vocab.ChannelGCPVertex, vertex, serviceAccount(t, nil), ""},
		{"not json", vocab.ChannelGCPVertex, vertex, `ya29.token`, "must be a service-account JSON key"},
		{"user credentials", vocab.ChannelGCPVertex, vertex, serviceAccount(t, func(m map[string]any) { m["type"] = "authorized_user" }), `"type" must be "service_account"`},
		{"no email", vocab.ChannelGCPVertex, vertex, serviceAccount(t, func(m map[string]any) { delete(m, "client_email") }), "client_email is required"},
		{"no token uri", vocab.ChannelGCPVertex, vertex, serviceAccount(t, func(m map[string]any) { delete(m, "token_uri") }), "token_uri is required"},
		{"no private key", vocab.ChannelGCPVertex, vertex, serviceAccount(t, func(m map[string]any) { delete(m, "private_key") }), "private_key is required"},
		{"garbage private key", vocab.ChannelGCPVertex, vertex, serviceAccount(t, func(m map[string]any) { m["private_key"] = "not pem" }), "private_key: not a PEM block"},
		{"ec private key", vocab.ChannelGCPVertex, vertex, serviceAccount(t, func(m map[string]any) {
			m["private_key"] = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}))
		}), "private_key: not an RSA key"},
		{"azure key", vocab.ChannelAzureOpenAI, azKey, `0123456789abcdef`, ""},
		{"azure empty", vocab.ChannelAzureOpenAI, azKey, ``, "secret: required"},
		{"entra token", vocab.ChannelAzureOpenAI, azTok, `eyJ0eXAiOiJKV1QifQ.e30.sig`, ""},
		{"entra client", vocab.ChannelAzureOpenAI, azCC, `{"tenant_id":"contoso.onmicrosoft.com","client_id":"c","client_secret":"s"}`, ""},
		{"entra client missing", vocab.ChannelAzureOpenAI, azCC, `{"tenant_id":"t/x","client_id":"c"}`, "tenant_id must be a directory id"},
		{"bad settings", vocab.ChannelAzureOpenAI, `{}`, `k`, "settings.api_version"},
		{"first party", vocab.ChannelBeta, `{}`, `anything`, ""},
	}
	for _, tt := range tests {
		got := problems(t, cloud.CheckSecret(tt.ch, []byte(tt.settings), tt.secret))
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: CheckSecret = %q, want %q", tt.name, got, tt.want)
		}
		if tt.secret != "" && len(tt.secret) > 8 && got != "" && strings.Contains(got, tt.secret) {
			t.Errorf("%s: the problem quotes the secret: %q", tt.name, got)
		}
	}
	sa, err := cloud.ParseServiceAccount(serviceAccount(t, nil))
	if err != nil || sa.Email != "gw@proj-1.iam.gserviceaccount.com" || sa.TokenURL != "https://oauth2.example/token" ||
		len(sa.Scopes) != 1 || sa.Scopes[0] != cloud.VertexScope {
		t.Errorf("ParseServiceAccount = %+v, %v", sa, err)
	}
	az, _ := cloud.ParseAzure([]byte(azCC))
	cc, _ := cloud.ParseEntraClient(`{"tenant_id":"tid-1","client_id":"c","client_secret":"s"}`)
	cfg := az.TokenConfig(cc)
	if cfg.TokenURL != "https://login.microsoftonline.com/tid-1/oauth2/v2.0/token" || cfg.Scopes[0] != cloud.DefaultEntraScope ||
		cfg.ClientID != "c" || cfg.ClientSecret != "s" {
		t.Errorf("TokenConfig = %+v", cfg)
	}
}

func TestServiceAccountMemberTypes(t *testing.T) {
	t.Parallel()
	got := problems(t, cloud.CheckSecret(vocab.ChannelGCPVertex, []byte(`{"project":"p-1","location":"global"}`),
		serviceAccount(t, func(m map[string]any) { m["private_key"] = 42 })))
	if !strings.Contains(got, "do not have the types of a service-account key") || strings.Contains(got, `"type" must be`) {
		t.Errorf("a number as private_key: %q", got)
	}
}
