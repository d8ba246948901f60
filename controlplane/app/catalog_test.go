package app

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/controlplane/admin"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/shared/testkit"
)

const cliToken = "cli-bootstrap-token-0123456789abcdef"

func catalogServer(t *testing.T) (*storetest.DB, string) {
	db := storetest.New(t)
	mux := http.NewServeMux()
	admin.RegisterHTTP(mux, admin.NewService(db.Pool, nil, cliToken, nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return db, srv.URL
}

func runCatalog(t *testing.T, url string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"TOLLGATE_ADMIN_URL": url, "TOLLGATE_ADMIN_TOKEN": cliToken}
	err := Main(context.Background(), append([]string{"catalog"}, args...), &out, &errb, func(k string) string { return env[k] })
	return out.String(), errb.String(), err
}

// The GitOps flow: plan a models.dev archive (as a CI job would), review, apply the plan id.
func TestCatalogCommandPlanThenApply(t *testing.T) {
	db, url := catalogServer(t)
	// A .tar.gz of the shipped models.dev tree.
	src := testkit.Shared(t, "catalogs", "models.dev")
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: "models.dev/" + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	gz.Close()
	archive := filepath.Join(t.TempDir(), "models.tar.gz")
	if err := os.WriteFile(archive, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	out, summary, err := runCatalog(t, url, "plan", "-format", "models.dev", "-file", archive)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, summary)
	}
	var plan struct {
		ID    string            `json:"id"`
		Added []json.RawMessage `json:"added"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || plan.ID == "" || len(plan.Added) < 80 {
		t.Fatalf("plan output %.300s (%v)", out, err)
	}
	if !strings.Contains(summary, "controlplane catalog apply -plan-id "+plan.ID) {
		t.Errorf("summary %q does not say how to apply", summary)
	}
	var n int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM price_rules`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("plan wrote %d rules (%v)", n, err)
	}
	if _, stderr, err := runCatalog(t, url, "apply", "-plan-id", plan.ID, "-exclude", "openai/gpt-5.4"); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM price_rules`).Scan(&n); err != nil || n != len(plan.Added)-1 {
		t.Fatalf("apply wrote %d rules, want %d (%v)", n, len(plan.Added)-1, err)
	}
	var price string
	if err := db.Pool.QueryRow(context.Background(), `SELECT input_price::text FROM price_rules WHERE model_match = 'claude-opus-4-6'`).Scan(&price); err != nil || price != "5" {
		t.Errorf("claude-opus-4-6 input %q (%v)", price, err)
	}
	// Errors of the API come back as a failing command naming them.
	if _, _, err := runCatalog(t, url, "apply", "-plan-id", plan.ID); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("second apply: %v, want a 409 error", err)
	}
}

func TestCatalogCommandRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{}, {"diff"}, {"plan", "-format", "genai-prices"}, {"plan", "-format", "csv", "-file", "x"},
		{"plan", "-format", "genai-prices", "-file", "x", "-map", "openai"}, {"apply"},
		{"plan", "-format", "genai-prices", "-file", "/nonexistent/data.json"},
	} {
		if _, _, err := runCatalog(t, "http://127.0.0.1:1", args...); err == nil {
			t.Errorf("catalog %v: no error", args)
		}
	}
	_ = io.Discard
}
