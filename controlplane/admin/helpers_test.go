package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/secret"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

const bootstrapToken = "bootstrap-admin-token-0123456789"

// testBundle is one test's world: a fresh database, the service, and the REST API on a loopback
// HTTP server.
type testBundle struct {
	db  *storetest.DB
	box *secret.Box
	svc *admin.Service
	srv *httptest.Server
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	db := storetest.New(t)
	box, err := secret.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	svc := admin.NewService(db.Pool, box, bootstrapToken, nil)
	mux := http.NewServeMux()
	admin.RegisterHTTP(mux, svc)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &testBundle{db: db, box: box, svc: svc, srv: srv}
}

// response is a decoded HTTP answer.
type response struct {
	status int
	raw    []byte
	header http.Header
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.raw, v); err != nil {
		t.Fatalf("decode %s: %v", r.raw, err)
	}
}

// apiError is the admin error body.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Section   string `json:"section"`
			Index     *int   `json:"index"`
			Field     string `json:"field"`
			TierIndex *int   `json:"tier_index"`
			Message   string `json:"message"`
			Resource  string `json:"resource"`
			ID        int64  `json:"id"`
			Name      string `json:"name"`
		} `json:"details"`
	} `json:"error"`
}

func (r response) apiError(t *testing.T) apiError {
	t.Helper()
	var e apiError
	r.json(t, &e)
	if e.Error.Code == "" {
		t.Fatalf("error body without code: %s", r.raw)
	}
	return e
}

// hasField reports whether an error lists a detail for field (and tier index, when tier >= 0).
func (e apiError) hasField(field string, tier int) bool {
	for _, d := range e.Error.Details {
		if d.Field == field && (tier < 0 || (d.TierIndex != nil && *d.TierIndex == tier)) {
			return true
		}
	}
	return false
}

// call sends body (a string is sent as is, anything else as JSON) with the bootstrap token.
func (b *testBundle) call(t *testing.T, method, path string, body any) response {
	t.Helper()
	return b.callAs(t, bootstrapToken, method, path, body)
}

func (b *testBundle) callAs(t *testing.T, token, method, path string, body any) response {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, b.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, raw: raw, header: resp.Header}
}

// must asserts the status and decodes the body into v (when non-nil).
func (b *testBundle) must(t *testing.T, want int, method, path string, body, v any) response {
	t.Helper()
	r := b.call(t, method, path, body)
	if r.status != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.raw, want)
	}
	if v != nil {
		r.json(t, v)
	}
	return r
}

// state is what "nothing changed" compares: the config revision and a digest of every config table.
func (b *testBundle) state(t *testing.T) string {
	t.Helper()
	var s string
	err := b.db.Pool.QueryRow(context.Background(), `SELECT concat_ws('|',
		(SELECT revision FROM config_revision),
		(SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY id), '')) FROM price_rules t),
		(SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY id), '')) FROM routing_rules t),
		(SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY id), '')) FROM providers t),
		(SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY id), '')) FROM routes t),
		(SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY id), '')) FROM route_members t),
		(SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY id), '')) FROM credentials t),
		(SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY id), '')) FROM users t),
		(SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY id), '')) FROM api_keys t),
		(SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY scope, scope_id), '')) FROM quotas t))`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (b *testBundle) revision(t *testing.T) int64 {
	t.Helper()
	var rev int64
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT revision FROM config_revision`).Scan(&rev); err != nil {
		t.Fatal(err)
	}
	return rev
}

// provider creates a provider of the channel type and returns its id.
func (b *testBundle) provider(t *testing.T, name, channel string) int64 {
	t.Helper()
	var p struct {
		ID int64 `json:"id"`
	}
	body := map[string]any{"name": name, "channel_type": channel, "base_url": "https://upstream.example/v1"}
	if s, ok := cloudSettings[channel]; ok {
		body["settings"] = json.RawMessage(s)
	}
	b.must(t, http.StatusCreated, "POST", "/admin/providers", body, &p)
	return p.ID
}

// cloudSettings are valid settings of each cloud channel type (the others take none).
var cloudSettings = map[string]string{
	"aws_bedrock":  `{"region":"us-east-1"}`,
	"gcp_vertex":   `{"project":"proj-1","location":"us-east5"}`,
	"azure_openai": `{"url_form":"deployment","api_version":"2024-10-21"}`,
}

// rule is a valid price rule body; override fields with kv pairs.
func rule(kv ...any) map[string]any {
	r := map[string]any{
		"provider_id": nil, "match_type": "exact", "model_match": "model-a",
		"input_price": "1.50", "output_price": "6.000", "cache_read_price": "0.15",
		"cache_creation_5m_price": "1.875", "cache_creation_30m_price": "2.5", "cache_creation_1h_price": "3",
		"image_output_price": "0.000001", "enabled": true, "pricing_tiers_json": []any{},
	}
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		if kv[i+1] == deleteKey {
			delete(r, k)
			continue
		}
		r[k] = kv[i+1]
	}
	return r
}

type deleteMarker struct{}

var deleteKey = deleteMarker{}

// refusal is a request the admin API must refuse without changing anything.
type refusal struct {
	name, method, path string
	body               any
	status             int
	field              string // a detail must name this field ("": none required)
}

// refuses runs each refusal as a subtest: the status, the named field, and the stored state unchanged.
func (b *testBundle) refuses(t *testing.T, cases []refusal) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			before := b.state(t)
			r := b.call(t, tt.method, tt.path, tt.body)
			if r.status != tt.status {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, r.status, r.raw, tt.status)
			}
			if e := r.apiError(t); tt.field != "" && !e.hasField(tt.field, -1) {
				t.Errorf("details do not name %q: %s", tt.field, r.raw)
			}
			if b.state(t) != before {
				t.Error("state changed by a refused request")
			}
		})
	}
}
