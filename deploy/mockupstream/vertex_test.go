package mockupstream

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

const saEmail = "gateway@mock-project.iam.gserviceaccount.com"

var (
	saKeyOnce sync.Once
	saKey     *rsa.PrivateKey
	otherKey  *rsa.PrivateKey
)

func serviceAccountKeys(t *testing.T) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	saKeyOnce.Do(func() {
		var err error
		if saKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if otherKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
	return saKey, otherKey
}

// serviceAccountJSON is a service-account key file whose token_uri is the mock.
func serviceAccountJSON(t *testing.T, key *rsa.PrivateKey, email, tokenURI string) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "mock-project", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": email, "client_id": "1", "token_uri": tokenURI,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type vertexClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *vertexClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *vertexClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

func vertexMock(t *testing.T) (*testBundle, *vertexClock) {
	t.Helper()
	key, _ := serviceAccountKeys(t)
	clk := &vertexClock{}
	b := setup(t, Options{Clouds: CloudOptions{GoogleServiceAccounts: map[string]*rsa.PublicKey{saEmail: &key.PublicKey},
		GoogleTokenLifetime: 30 * time.Minute, GoogleProject: "mock-project", GoogleLocation: "us-central1", Now: clk.now}})
	return b, clk
}

func (b *testBundle) ctx() context.Context {
	return context.WithValue(context.Background(), oauth2.HTTPClient, b.srv.Client())
}

// vertexToken gets an access token from the mock with x/oauth2's service-account (JWT bearer) flow.
func vertexToken(t *testing.T, b *testBundle) string {
	t.Helper()
	key, _ := serviceAccountKeys(t)
	conf, err := google.JWTConfigFromJSON(serviceAccountJSON(t, key, saEmail, b.srv.URL+"/token"),
		"https://www.googleapis.com/auth/cloud-platform")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := conf.TokenSource(b.ctx()).Token()
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	return tok.AccessToken
}

const vertexBase = "/v1/projects/mock-project/locations/us-central1/publishers/"

func TestVertexTokenFlowAndGenerate(t *testing.T) {
	b, clk := vertexMock(t)
	// CredentialsFromJSONWithType (what a gateway loads a service-account key file with) gets a token from the mock.
	key, _ := serviceAccountKeys(t)
	creds, err := google.CredentialsFromJSONWithType(b.ctx(), serviceAccountJSON(t, key, saEmail, b.srv.URL+"/token"),
		google.ServiceAccount, "https://www.googleapis.com/auth/cloud-platform")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := creds.TokenSource.Token()
	if err != nil || tok.AccessToken == "" || time.Until(tok.Expiry) > 31*time.Minute || time.Until(tok.Expiry) < 29*time.Minute {
		t.Fatalf("CredentialsFromJSON token %+v: %v (want a 30-minute token)", tok, err)
	}
	auth := "Bearer " + vertexToken(t, b)
	body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	r := b.post(t, vertexBase+"google/models/g-1-flash:generateContent", body, "Authorization", auth)
	m := decodeJSON(t, r.body)
	um := m["usageMetadata"].(map[string]any)
	r = b.post(t, vertexBase+"google/models/g-1-flash:streamGenerateContent?alt=sse", body, "Authorization", auth)
	if !strings.HasPrefix(string(r.body), "data: ") {
		t.Fatalf("alt=sse stream %s", r.body)
	}
	r = b.post(t, vertexBase+"google/models/g-1-flash:streamGenerateContent", body, "Authorization", auth)
	if !strings.HasPrefix(string(r.body), "[") {
		t.Fatalf("array stream %s", r.body)
	}
	bills := b.mock.Bills()
	if len(bills) != 3 || bills[0].Provider != ProviderVertex || bills[0].APIKey != saEmail || bills[0].Model != "g-1-flash" ||
		jsonNum(um["promptTokenCount"]) != jsonNum(bills[0].Input) || jsonNum(um["candidatesTokenCount"]) != jsonNum(bills[0].Output) {
		t.Fatalf("bills %+v usage %v", bills, um)
	}
	if m := decodeJSON(t, b.post(t, vertexBase+"google/models/g-1-flash:countTokens", body, "Authorization", auth).body); m["totalTokens"] == nil {
		t.Fatalf("countTokens %v", m)
	}
	if len(b.mock.Bills()) != 3 {
		t.Fatal("countTokens billed")
	}
	// The first-party billing export leaves cloud bills out; the provider's export has them.
	day := time.Now().UTC().Truncate(24 * time.Hour)
	first, _ := b.mock.BillingCSV(day, day.Add(24*time.Hour))
	cloud, _ := b.mock.ProviderBillingCSV(ProviderVertex, day, day.Add(24*time.Hour))
	if strings.Contains(string(first), "g-1-flash") || !strings.Contains(string(cloud), "g-1-flash") {
		t.Fatalf("exports: first party %q, vertex %q", first, cloud)
	}

	// An expired access token is refused in Google's shape.
	clk.advance(31 * time.Minute)
	r = b.call(t, http.MethodPost, vertexBase+"google/models/g-1-flash:generateContent", body, "Authorization", auth)
	if r.status != http.StatusUnauthorized || decodeJSON(t, r.body)["error"].(map[string]any)["status"] != "UNAUTHENTICATED" {
		t.Fatalf("expired token: %d %s", r.status, r.body)
	}
	if !strings.Contains(string(r.body), "ACCESS_TOKEN_EXPIRED") {
		t.Fatalf("expired token reason: %s", r.body)
	}
}

func TestVertexAnthropicRawPredict(t *testing.T) {
	b, _ := vertexMock(t)
	auth := "Bearer " + vertexToken(t, b)
	body := `{"anthropic_version":"vertex-2023-10-16","max_tokens":32,"messages":[{"role":"user","content":"hi"}]}`
	r := b.post(t, vertexBase+"anthropic/models/claude-mock@20250101:rawPredict", body, "Authorization", auth)
	m := decodeJSON(t, r.body)
	if m["type"] != "message" || m["model"] != "claude-mock@20250101" {
		t.Fatalf("rawPredict %s", r.body)
	}
	r = b.post(t, vertexBase+"anthropic/models/claude-mock@20250101:streamRawPredict", body, "Authorization", auth)
	if evs := parseSSE(t, r.body); len(evs) == 0 || evs[0].name != "message_start" || evs[len(evs)-1].name != "message_stop" {
		t.Fatalf("streamRawPredict %s", r.body)
	}
	u := m["usage"].(map[string]any)
	bl := b.mock.Bills()
	if len(bl) != 2 || bl[0].Provider != ProviderVertex || bl[0].Endpoint != EndpointMessages ||
		jsonNum(u["input_tokens"]) != jsonNum(bl[0].Input) || jsonNum(u["output_tokens"]) != jsonNum(bl[0].Output) {
		t.Fatalf("bills %+v usage %v", bl, u)
	}
	for _, bad := range []string{
		`{"max_tokens":32,"messages":[{"role":"user","content":"hi"}]}`,
		`{"anthropic_version":"bedrock-2023-05-31","max_tokens":32,"messages":[{"role":"user","content":"hi"}]}`,
		`{"anthropic_version":"vertex-2023-10-16","model":"x","max_tokens":32,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		if r := b.call(t, http.MethodPost, vertexBase+"anthropic/models/c:rawPredict", bad, "Authorization", auth); r.status != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", bad, r.status, r.body)
		}
	}
	if r := b.call(t, http.MethodPost, "/v1/projects/other/locations/us-central1/publishers/anthropic/models/c:rawPredict", body,
		"Authorization", auth); r.status != http.StatusForbidden {
		t.Fatalf("other project: %d %s", r.status, r.body)
	}
	if r := b.call(t, http.MethodPost, vertexBase+"anthropic/models/c:rawPredict", body); r.status != http.StatusUnauthorized {
		t.Fatalf("no token: %d %s", r.status, r.body)
	}
}

func TestVertexTokenRefusals(t *testing.T) {
	key, other := serviceAccountKeys(t)
	cases := []struct {
		name string
		mod  func(b *testBundle, clk *vertexClock, conf *oauthJWT)
		want string
	}{
		{"expired assertion", func(_ *testBundle, clk *vertexClock, _ *oauthJWT) { clk.advance(2 * time.Hour) }, "short-lived"},
		{"assertion from the future", func(_ *testBundle, clk *vertexClock, _ *oauthJWT) { clk.advance(-2 * time.Hour) }, "short-lived"},
		{"wrong audience", func(b *testBundle, _ *vertexClock, c *oauthJWT) { c.aud = b.srv.URL + "/other" }, "audience"},
		{"unknown issuer", func(_ *testBundle, _ *vertexClock, c *oauthJWT) { c.email = "nobody@x.iam.gserviceaccount.com" }, "account not found"},
		{"signed by another key", func(_ *testBundle, _ *vertexClock, c *oauthJWT) { c.key = other }, "Signature"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, clk := vertexMock(t)
			c := &oauthJWT{key: key, email: saEmail}
			tc.mod(b, clk, c)
			conf, err := google.JWTConfigFromJSON(serviceAccountJSON(t, c.key, c.email, b.srv.URL+"/token"), "s")
			if err != nil {
				t.Fatal(err)
			}
			conf.Audience = c.aud
			_, err = conf.TokenSource(b.ctx()).Token()
			var re *oauth2.RetrieveError
			if !asRetrieve(err, &re) {
				t.Fatalf("token error %v, want a refusal", err)
			}
			var body struct {
				Error            string `json:"error"`
				ErrorDescription string `json:"error_description"`
			}
			_ = json.Unmarshal(re.Body, &body)
			if re.Response.StatusCode != http.StatusBadRequest || body.Error != "invalid_grant" ||
				!strings.Contains(body.ErrorDescription, tc.want) {
				t.Fatalf("token error %v, want 400 invalid_grant mentioning %q", err, tc.want)
			}
		})
	}
}

type oauthJWT struct {
	key   *rsa.PrivateKey
	email string
	aud   string
}

func asRetrieve(err error, re **oauth2.RetrieveError) bool {
	for err != nil {
		if r, ok := err.(*oauth2.RetrieveError); ok {
			*re = r
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

func TestVertexTokenEndpointDown(t *testing.T) {
	for _, mode := range []string{"503", "refuse"} {
		t.Run(mode, func(t *testing.T) {
			b, _ := vertexMock(t)
			b.mock.SetCloudSwitches(CloudSwitches{TokenDown: mode})
			key, _ := serviceAccountKeys(t)
			conf, err := google.JWTConfigFromJSON(serviceAccountJSON(t, key, saEmail, b.srv.URL+"/token"), "s")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conf.TokenSource(b.ctx()).Token(); err == nil {
				t.Fatal("token obtained from a token endpoint that is down")
			}
			b.mock.SetCloudSwitches(CloudSwitches{})
			if _, err := conf.TokenSource(b.ctx()).Token(); err != nil {
				t.Fatalf("token endpoint back up: %v", err)
			}
		})
	}
}

func TestVertexThrottle(t *testing.T) {
	b, _ := vertexMock(t)
	auth := "Bearer " + vertexToken(t, b)
	b.mock.SetCloudSwitches(CloudSwitches{Throttle: true})
	r := b.call(t, http.MethodPost, vertexBase+"google/models/g:generateContent", `{"contents":[{"parts":[{"text":"x"}]}]}`,
		"Authorization", auth, "x-mock-retry-after", "7")
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "7" ||
		decodeJSON(t, r.body)["error"].(map[string]any)["status"] != "RESOURCE_EXHAUSTED" {
		t.Fatalf("throttled: %d %v %s", r.status, r.header, r.body)
	}
}
