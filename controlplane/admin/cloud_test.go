package admin_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/store"
	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

// serviceAccountKey is a service-account JSON key with a fresh RSA key.
func serviceAccountKey(t *testing.T) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]string{"type": "service_account", "project_id": "proj-1", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "gateway@proj-1.iam.gserviceaccount.com", "client_id": "1", "token_uri": "http://127.0.0.1:9/token"})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cloudCase is one cloud provider as the tests create it: its settings, a credential that fits them
// and the tell-tale part of that credential that must never be stored or answered in clear.
type cloudCase struct {
	ch               vocab.ChannelType
	settings         string
	baseURL          string // "" derives it from the settings
	wantBaseURL      string
	secret, telltale string
	// changed settings for the update, still fitting the credential
	updated string
}

func cloudCases(t *testing.T) []cloudCase {
	sa := serviceAccountKey(t)
	return []cloudCase{
		{ch: vocab.ChannelAWSBedrock, settings: `{"region":"us-west-2"}`, wantBaseURL: "https://bedrock-runtime.us-west-2.amazonaws.com",
			secret:   `{"access_key_id":"AKIAEXAMPLE0001","secret_access_key":"wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY","session_token":"FwoGZXIvYXdzEXAMPLE"}`,
			telltale: "wJalrXUtnFEMI-K7MDENG", updated: `{"region":"eu-west-1","invoke_model_prefixes":["anthropic.","meta."]}`},
		{ch: vocab.ChannelGCPVertex, settings: `{"project":"proj-1","location":"global"}`, wantBaseURL: "https://aiplatform.googleapis.com",
			secret: sa, telltale: "PRIVATE KEY", updated: `{"project":"proj-1","location":"europe-west4","anthropic_model_prefixes":["claude-"]}`},
		{ch: vocab.ChannelAzureOpenAI, settings: `{"api_version":"2024-10-21","auth":"entra_client_credentials"}`, baseURL: "https://tg-res.openai.azure.com",
			wantBaseURL: "https://tg-res.openai.azure.com",
			secret:      `{"tenant_id":"contoso.onmicrosoft.com","client_id":"app-1","client_secret":"azure-client-secret-value"}`,
			telltale:    "azure-client-secret-value", updated: `{"url_form":"v1","auth":"entra_client_credentials","entra_token_url":"http://127.0.0.1:9/token"}`},
	}
}

// sameJSON compares two JSON documents by value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// TestCloudProvidersREST creates, reads, updates and resets a provider of each cloud channel type over
// REST: settings stored as given, the base URL derived from the region where none is given, the
// declared default cells seeded and restored, a credential fitting the settings sealed at rest and never
// answered, and the snapshot carrying the settings and the credential in clear.
func TestCloudProvidersREST(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, tc := range cloudCases(t) {
		t.Run(string(tc.ch), func(t *testing.T) {
			var p store.Provider
			b.must(t, http.StatusCreated, "POST", "/admin/providers", map[string]any{"name": "cloud-" + string(tc.ch),
				"channel_type": tc.ch, "base_url": tc.baseURL, "settings": json.RawMessage(tc.settings)}, &p)
			if p.ChannelType != string(tc.ch) || p.BaseURL != tc.wantBaseURL || !sameJSON(t, p.Settings, []byte(tc.settings)) {
				t.Errorf("created %s %s %s, want %s %s %s", p.ChannelType, p.BaseURL, p.Settings, tc.ch, tc.wantBaseURL, tc.settings)
			}
			rows := b.routingRows(t, p.ID)
			if len(rows) != len(admin.DefaultCells(tc.ch)) {
				t.Errorf("seeded %d cells, want %d", len(rows), len(admin.DefaultCells(tc.ch)))
			}
			assertDefaults(t, tc.ch, rows)

			var cred store.CredentialInfo
			r := b.must(t, http.StatusCreated, "POST", fmt.Sprintf("/admin/providers/%d/credentials", p.ID), map[string]any{"secret": tc.secret}, &cred)
			if strings.Contains(string(r.raw), tc.telltale) {
				t.Errorf("create credential answered the secret: %s", r.raw)
			}
			var sealed []byte
			if err := b.db.Pool.QueryRow(ctx, `SELECT secret_ciphertext FROM credentials WHERE id = $1`, cred.ID).Scan(&sealed); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(sealed), tc.telltale) || strings.Contains(string(sealed), `_id"`) {
				t.Error("credential stored in clear")
			}
			if plain, err := b.box.Open(sealed); err != nil || string(plain) != tc.secret {
				t.Errorf("Open(stored) = %.20q…, %v; want the secret as written", plain, err)
			}
			for _, path := range []string{fmt.Sprintf("/admin/providers/%d", p.ID), "/admin/providers"} {
				if r := b.must(t, http.StatusOK, "GET", path, nil, nil); strings.Contains(string(r.raw), tc.telltale) {
					t.Errorf("GET %s answered the secret", path)
				}
			}

			// Update: new settings that still fit the credential; routing rows untouched.
			var up store.Provider
			b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/providers/%d", p.ID), map[string]any{"name": p.Name,
				"channel_type": tc.ch, "base_url": p.BaseURL, "settings": json.RawMessage(tc.updated)}, &up)
			if !sameJSON(t, up.Settings, []byte(tc.updated)) || up.BaseURL != p.BaseURL || len(up.Credentials) != 1 {
				t.Errorf("updated = %+v", up)
			}
			var got store.Provider
			b.must(t, http.StatusOK, "GET", fmt.Sprintf("/admin/providers/%d", p.ID), nil, &got)
			if !sameJSON(t, got.Settings, []byte(tc.updated)) {
				t.Errorf("GET after update: settings %s", got.Settings)
			}

			// Reset restores the declared cells after an operator disabled one and deleted another.
			first := rows[cellKey{string(admin.DefaultCells(tc.ch)[0].Operation), string(admin.DefaultCells(tc.ch)[0].Kind)}]
			b.must(t, http.StatusOK, "PUT", fmt.Sprintf("/admin/providers/%d/routing-rules", p.ID), map[string]any{"rules": []any{
				map[string]any{"id": first.ID, "operation": first.Operation, "kind": first.Kind, "implementation": "unsupported", "sort_order": 1}}}, nil)
			last := admin.DefaultCells(tc.ch)[len(admin.DefaultCells(tc.ch))-1]
			b.must(t, http.StatusNoContent, "DELETE", fmt.Sprintf("/admin/providers/%d/routing-rules/%s/%s", p.ID, last.Operation, last.Kind), nil, nil)
			b.must(t, http.StatusOK, "POST", fmt.Sprintf("/admin/providers/%d/routing-rules/reset", p.ID), nil, nil)
			after := b.routingRows(t, p.ID)
			assertDefaults(t, tc.ch, after)
			if len(after) != len(rows) {
				t.Errorf("after reset %d cells, want %d", len(after), len(rows))
			}

			// The snapshot carries the provider, its settings and the credential in clear, and compiles.
			msg, err := store.ReadSnapshot(ctx, b.db.Pool, b.box)
			if err != nil {
				t.Fatal(err)
			}
			var sp *configv1.Provider
			for _, x := range msg.Providers {
				if x.Id == p.ID {
					sp = x
				}
			}
			if sp == nil || sp.ChannelType != string(tc.ch) || !sameJSON(t, []byte(sp.SettingsJson), []byte(tc.updated)) ||
				len(sp.Credentials) != 1 || sp.Credentials[0].Secret != tc.secret {
				t.Fatalf("snapshot provider = %v", sp)
			}
			comp, err := snapshot.Compile(msg)
			if err != nil {
				t.Fatalf("snapshot with a %s provider does not compile: %v", tc.ch, err)
			}
			cp := comp.Provider(p.ID)
			if cp == nil || cp.Channel != tc.ch || len(cp.Credentials) != 1 || cp.Credentials[0].Secret != tc.secret {
				t.Fatalf("compiled provider = %+v", cp)
			}
		})
	}
}

// TestCloudProviderRefusals: invalid settings, a missing Azure endpoint, credentials that do not fit
// the auth mode and settings changes that would strand a stored credential are refused with 422 naming
// the field, without quoting the secret, and change nothing.
func TestCloudProviderRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bedrock := b.provider(t, "bedrock-1", "aws_bedrock")
	vertex := b.provider(t, "vertex-1", "gcp_vertex")
	azure := b.provider(t, "azure-1", "azure_openai")
	create := func(ch, settings string, extra ...any) map[string]any {
		m := map[string]any{"name": "n-" + ch, "channel_type": ch, "settings": json.RawMessage(settings)}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}
	cred := func(pid int64) string { return fmt.Sprintf("/admin/providers/%d/credentials", pid) }
	b.refuses(t, []refusal{
		{"bedrock without region", "POST", "/admin/providers", create("aws_bedrock", `{}`), 422, "settings.region"},
		{"bedrock bad region", "POST", "/admin/providers", create("aws_bedrock", `{"region":"virginia"}`), 422, "settings.region"},
		{"bedrock bad auth", "POST", "/admin/providers", create("aws_bedrock", `{"region":"us-east-1","auth":"iam"}`), 422, "settings.auth"},
		{"bedrock unknown setting", "POST", "/admin/providers", create("aws_bedrock", `{"region":"us-east-1","model":"x"}`), 422, "settings"},
		{"vertex without project", "POST", "/admin/providers", create("gcp_vertex", `{"location":"global"}`), 422, "settings.project"},
		{"vertex bad location", "POST", "/admin/providers", create("gcp_vertex", `{"project":"p-1","location":"moon-1"}`), 422, "settings.location"},
		{"azure without endpoint", "POST", "/admin/providers", create("azure_openai", `{"api_version":"2024-10-21"}`), 422, "base_url"},
		{"azure without api_version", "POST", "/admin/providers", create("azure_openai", `{}`, "base_url", "https://r.openai.azure.com"), 422, "settings.api_version"},
		{"azure v1 with api_version", "POST", "/admin/providers", create("azure_openai", `{"url_form":"v1","api_version":"2024-10-21"}`, "base_url", "https://r.openai.azure.com"), 422, "settings.api_version"},
		{"azure bad auth", "POST", "/admin/providers", create("azure_openai", `{"url_form":"v1","auth":"basic"}`, "base_url", "https://r.openai.azure.com"), 422, "settings.auth"},
		{"update to bad settings", "PUT", fmt.Sprintf("/admin/providers/%d", vertex), create("gcp_vertex", `{"project":"p-1"}`, "name", "vertex-1", "base_url", "https://x.example"), 422, "settings.location"},
		{"sigv4 credential as a plain key", "POST", cred(bedrock), map[string]any{"secret": "AKIA:secret-value-123"}, 422, "secret"},
		{"sigv4 credential without secret key", "POST", cred(bedrock), map[string]any{"secret": `{"access_key_id":"AKIA1"}`}, 422, "secret"},
		{"vertex credential not a key", "POST", cred(vertex), map[string]any{"secret": "ya29.a-token"}, 422, "secret"},
		{"vertex user credential", "POST", cred(vertex), map[string]any{"secret": `{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r"}`}, 422, "secret"},
		{"azure api key as JSON", "POST", cred(azure), map[string]any{"secret": `{"api_key":"k"}`}, 422, "secret"},
	})

	// Messages name what is wrong without quoting the secret.
	r := b.call(t, "POST", cred(bedrock), map[string]any{"secret": `{"access_key_id":"AKIA1","secret_access_key":""}`})
	if e := r.apiError(t); r.status != 422 || !strings.Contains(string(r.raw), "secret_access_key is required") || !e.hasField("secret", -1) {
		t.Errorf("missing secret key: %d %s", r.status, r.raw)
	}
	r = b.call(t, "POST", cred(bedrock), map[string]any{"secret": "AKIA:do-not-echo-this-secret"})
	if strings.Contains(string(r.raw), "do-not-echo-this-secret") {
		t.Errorf("refusal quotes the secret: %s", r.raw)
	}

	// A Bedrock provider with an access key may not switch to API-key auth while the key is stored.
	b.must(t, http.StatusCreated, "POST", cred(bedrock), map[string]any{"secret": `{"access_key_id":"AKIA1","secret_access_key":"s3cr3t-value"}`}, nil)
	b.refuses(t, []refusal{
		{"auth switch strands the access key", "PUT", fmt.Sprintf("/admin/providers/%d", bedrock),
			map[string]any{"name": "bedrock-1", "channel_type": "aws_bedrock", "base_url": "https://upstream.example/v1",
				"settings": json.RawMessage(`{"region":"us-east-1","auth":"api_key"}`)}, 422, ""},
		{"channel switch strands the access key", "PUT", fmt.Sprintf("/admin/providers/%d", bedrock),
			map[string]any{"name": "bedrock-1", "channel_type": "azure_openai", "base_url": "https://upstream.example/v1",
				"settings": json.RawMessage(`{"url_form":"v1"}`)}, 422, ""},
	})
	r = b.call(t, "PUT", fmt.Sprintf("/admin/providers/%d", bedrock), map[string]any{"name": "bedrock-1", "channel_type": "aws_bedrock",
		"base_url": "https://upstream.example/v1", "settings": json.RawMessage(`{"region":"us-east-1","auth":"api_key"}`)})
	if strings.Contains(string(r.raw), "s3cr3t-value") || !strings.Contains(string(r.raw), "does not fit the new settings") {
		t.Errorf("auth switch refusal = %s", r.raw)
	}
}

// TestCloudProvidersGRPC: the same through AdminService — create (settings_json, derived base URL,
// seeded cells), get, update, a credential, reset, and a settings problem as a field violation.
func TestCloudProvidersGRPC(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client, _ := b.grpcClient(t)
	ctx := withToken(bootstrapToken)
	for _, tc := range cloudCases(t) {
		t.Run(string(tc.ch), func(t *testing.T) {
			created, err := client.CreateProvider(ctx, &adminv1.CreateProviderRequest{Provider: &configv1.Provider{Name: "g-" + string(tc.ch),
				ChannelType: string(tc.ch), BaseUrl: tc.baseURL, Enabled: true, SettingsJson: tc.settings}})
			if err != nil {
				t.Fatal(err)
			}
			p := created.Provider
			if p.BaseUrl != tc.wantBaseURL || !sameJSON(t, []byte(p.SettingsJson), []byte(tc.settings)) {
				t.Errorf("created = %v", p)
			}
			if _, err := client.CreateCredential(ctx, &adminv1.CreateCredentialRequest{Credential: &configv1.Credential{ProviderId: p.Id,
				Secret: tc.secret, Enabled: true}}); err != nil {
				t.Fatal(err)
			}
			_, err = client.CreateCredential(ctx, &adminv1.CreateCredentialRequest{Credential: &configv1.Credential{ProviderId: p.Id,
				Secret: "{}", Enabled: true}})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(strings.Join(fieldViolations(err), ","), "secret") {
				t.Errorf("unfit credential: %v (%v)", err, fieldViolations(err))
			}
			got, err := client.GetProvider(ctx, &adminv1.GetProviderRequest{Id: p.Id})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Provider.Credentials) != 1 || got.Provider.Credentials[0].Secret != "" {
				t.Errorf("GetProvider credentials = %v (the secret must never be answered)", got.Provider.Credentials)
			}
			p.SettingsJson = tc.updated
			up, err := client.UpdateProvider(ctx, &adminv1.UpdateProviderRequest{Provider: p})
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, []byte(up.Provider.SettingsJson), []byte(tc.updated)) {
				t.Errorf("updated settings = %s", up.Provider.SettingsJson)
			}
			p.SettingsJson = `{"nope":true}`
			_, err = client.UpdateProvider(ctx, &adminv1.UpdateProviderRequest{Provider: p})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(strings.Join(fieldViolations(err), ","), "settings") {
				t.Errorf("bad settings update: %v (%v)", err, fieldViolations(err))
			}
			if _, err := b.db.Pool.Exec(context.Background(), `DELETE FROM routing_rules WHERE provider_id = $1`, p.Id); err != nil {
				t.Fatal(err)
			}
			reset, err := client.ResetRoutingRules(ctx, &adminv1.ResetRoutingRulesRequest{ProviderId: p.Id})
			if err != nil {
				t.Fatal(err)
			}
			if len(reset.Items) != len(admin.DefaultCells(tc.ch)) {
				t.Errorf("reset restored %d cells, want %d", len(reset.Items), len(admin.DefaultCells(tc.ch)))
			}
			assertDefaults(t, tc.ch, b.routingRows(t, p.Id))
		})
	}
}
