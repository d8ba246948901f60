package dev

import (
	"fmt"
	"strings"
)

// Example is one request a person can paste to try a dialect against the demo stack. The banner and the
// README print every example as a curl line (CurlLine); TestMakeRunBannerRequestsWorkAndCtrlCStopsAll
// runs the banner's lines as a shell would read them.
type Example struct {
	Dialect string // the client dialect and the kind of request
	SDK     string // the client SDKs that speak this dialect, and the call that sends this request
	SDKBase string // what those SDKs take as their base URL, after the data plane's URL
	Path    string // on the data plane
	// Headers are "Name: value" lines; KeyPlaceholder in a value stands for the API key. Each dialect
	// carries the key where its SDKs do (alpha Authorization: Bearer, beta x-api-key, gamma
	// x-goog-api-key).
	Headers []string
	Body    string // JSON
}

// DemoModel is the demo route's name; the seed also gives it the alias "demo".
const DemoModel = "demo-model"

// KeyPlaceholder marks where the API key goes in an Example's headers.
const KeyPlaceholder = "{key}"

// Examples are the demo requests, one per client-facing dialect the demo route serves. Each names the
// model the way its dialect does (alpha and beta in the body, gamma in the path).
func Examples(model string) []Example {
	const hello = "Hello from Tollgate"
	return []Example{{
		Dialect: "alpha chat completions",
		SDK:     "OpenAI SDKs: client.chat.completions.create",
		SDKBase: "/v1",
		Path:    "/v1/chat/completions",
		Headers: []string{"Authorization: Bearer " + KeyPlaceholder, "Content-Type: application/json"},
		Body:    fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]}`, model, hello),
	}, {
		Dialect: "alpha responses",
		SDK:     "OpenAI SDKs: client.responses.create",
		SDKBase: "/v1",
		Path:    "/v1/responses",
		Headers: []string{"Authorization: Bearer " + KeyPlaceholder, "Content-Type: application/json"},
		Body:    fmt.Sprintf(`{"model":%q,"input":%q}`, model, hello),
	}, {
		Dialect: "beta messages",
		SDK:     "Anthropic SDKs: client.messages.create",
		Path:    "/v1/messages",
		Headers: []string{"x-api-key: " + KeyPlaceholder, "anthropic-version: 2023-06-01", "Content-Type: application/json"},
		Body:    fmt.Sprintf(`{"model":%q,"max_tokens":256,"messages":[{"role":"user","content":%q}]}`, model, hello),
	}, {
		Dialect: "gamma generateContent",
		SDK:     "Google Gen AI (Gemini) SDKs: client.models.generate_content",
		Path:    "/v1beta/models/" + model + ":generateContent",
		Headers: []string{"x-goog-api-key: " + KeyPlaceholder, "Content-Type: application/json"},
		Body:    fmt.Sprintf(`{"contents":[{"role":"user","parts":[{"text":%q}]}]}`, hello),
	}}
}

// Comment is the line printed above e's curl line: the dialect, the SDKs and the base URL they take,
// for the data plane at baseURL (http://host:port).
func (e Example) Comment(baseURL string) string {
	return fmt.Sprintf("# %s (%s, base URL %s%s)", e.Dialect, e.SDK, baseURL, e.SDKBase)
}

// CurlLine renders e as one shell command against the data plane at baseURL (http://host:port) with key
// in place of KeyPlaceholder. Headers go in double quotes (so a key written as "$TOLLGATE_API_KEY" expands)
// and the body in single quotes; neither the demo keys nor the bodies contain a quote of the other kind.
func (e Example) CurlLine(baseURL, key string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "curl -sS %s%s", baseURL, e.Path)
	for _, h := range e.Headers {
		fmt.Fprintf(&b, ` -H "%s"`, strings.ReplaceAll(h, KeyPlaceholder, key))
	}
	fmt.Fprintf(&b, " -d '%s'", e.Body)
	return b.String()
}

// Banner is what `make run` prints once the stack is up: where everything is, and one working request
// per dialect with the SDKs that dialect stands for.
func (s *Stack) Banner() string {
	var b strings.Builder
	fmt.Fprintf(&b, `
Tollgate is running.
  data plane     http://%s
  admin API      http://%s   (admin token: %s)
  console        http://%s/console   (sign in with the admin token)
  demo API key   %s

Try it: one request per dialect (alpha = OpenAI, beta = Anthropic, gamma = Google Gen AI / Gemini).
`, s.DataPlane, s.AdminHTTP, s.AdminToken, s.AdminHTTP, s.APIKey)
	base := "http://" + s.DataPlane
	for _, e := range Examples(s.Model) {
		fmt.Fprintf(&b, "\n  %s\n  %s\n", e.Comment(base), e.CurlLine(base, s.APIKey))
	}
	b.WriteString("\nCtrl-C stops everything.\n")
	return b.String()
}
