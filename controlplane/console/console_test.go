package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandlerServesEmbeddedConsole(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux)
	tests := []struct {
		name, path   string
		wantStatus   int
		wantType     string
		wantContains string
	}{
		{"page", "/console/", http.StatusOK, "text/html", `<script type="module" src="assets/js/main.js">`},
		{"bare path redirects", "/console", http.StatusMovedPermanently, "", ""},
		{"stylesheet", "/console/assets/console.css", http.StatusOK, "text/css", "--accent"},
		{"module", "/console/assets/js/pricing.js", http.StatusOK, "javascript", "export function initPricing"},
		{"exact json", "/console/assets/js/wire.js", http.StatusOK, "javascript", "rawJSON"},
		{"missing asset", "/console/assets/nope.js", http.StatusNotFound, "", ""},
		{"no directory listing", "/console/assets/js/", http.StatusNotFound, "", ""},
		{"unknown page", "/console/other", http.StatusNotFound, "", ""},
		{"index only at the root", "/console/assets/index.html", http.StatusNotFound, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			res := rec.Result()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("GET %s = %d, want %d", tt.path, res.StatusCode, tt.wantStatus)
			}
			if got := res.Header.Get("Content-Security-Policy"); got != ContentSecurityPolicy {
				t.Errorf("GET %s Content-Security-Policy = %q, want %q", tt.path, got, ContentSecurityPolicy)
			}
			if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("GET %s X-Content-Type-Options = %q, want nosniff", tt.path, got)
			}
			if tt.wantType != "" && !strings.Contains(res.Header.Get("Content-Type"), tt.wantType) {
				t.Errorf("GET %s Content-Type = %q, want %s", tt.path, res.Header.Get("Content-Type"), tt.wantType)
			}
			if tt.wantContains != "" && !strings.Contains(string(body), tt.wantContains) {
				t.Errorf("GET %s body lacks %q", tt.path, tt.wantContains)
			}
			if tt.wantStatus == http.StatusMovedPermanently && res.Header.Get("Location") != "/console/" {
				t.Errorf("GET %s Location = %q, want /console/", tt.path, res.Header.Get("Location"))
			}
		})
	}
}

func TestHandlerRevalidatesWithETag(t *testing.T) {
	h := Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/console/assets/js/main.js", nil))
	etag := rec.Header().Get("ETag")
	if rec.Code != http.StatusOK || etag == "" {
		t.Fatalf("GET main.js = %d with ETag %q, want 200 with an ETag", rec.Code, etag)
	}
	req := httptest.NewRequest(http.MethodGet, "/console/assets/js/main.js", nil)
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("GET main.js with If-None-Match = %d, want 304", rec.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/console/", nil))
	if other := rec.Header().Get("ETag"); other == "" || other == etag {
		t.Errorf("index ETag = %q, want its own (main.js has %q)", other, etag)
	}
}

// TestCSPIsStrict guards the policy itself: no inline code, no third-party origins.
func TestCSPIsStrict(t *testing.T) {
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*"} {
		if strings.Contains(ContentSecurityPolicy, bad) {
			t.Errorf("ContentSecurityPolicy contains %q: %s", bad, ContentSecurityPolicy)
		}
	}
	for _, need := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(ContentSecurityPolicy, need) {
			t.Errorf("ContentSecurityPolicy lacks %q: %s", need, ContentSecurityPolicy)
		}
	}
}

// TestAssetsHaveNoInlineCodeOrRemoteURLs keeps the page working under the CSP and offline: every script
// and stylesheet is a same-origin file, and nothing is fetched from elsewhere.
func TestAssetsHaveNoInlineCodeOrRemoteURLs(t *testing.T) {
	index, err := assets.ReadFile("assets/index.html")
	if err != nil {
		t.Fatal(err)
	}
	html := string(index)
	for _, bad := range []string{"<script>", "style=", "onclick=", "onload=", "javascript:"} {
		if strings.Contains(html, bad) {
			t.Errorf("index.html contains %q, which the CSP blocks", bad)
		}
	}
	names := []string{"assets/index.html", "assets/console.css"}
	for _, dir := range []string{"assets/js", "assets/js/pages"} {
		entries, err := assets.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				names = append(names, dir+"/"+e.Name())
			}
		}
	}
	if len(names) < 15 {
		t.Fatalf("only %d console files found: %v", len(names), names)
	}
	for _, name := range names {
		b, err := assets.ReadFile(name)
		if err != nil {
			t.Fatalf("embedded %s: %v", name, err)
		}
		for _, bad := range []string{"http://", "https://", "//cdn", "@import"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s references %q; the console must work offline", name, bad)
			}
		}
	}
}

// TestVendoredChartLibrary: uPlot ships with its licence and loads nothing from elsewhere (its comments
// cite web pages; no import, fetch or stylesheet URL does).
func TestVendoredChartLibrary(t *testing.T) {
	lic, err := assets.ReadFile("assets/vendor/uplot/LICENSE")
	if err != nil || !strings.Contains(string(lic), "MIT License") {
		t.Fatalf("uPlot LICENSE: %v", err)
	}
	js, err := assets.ReadFile("assets/vendor/uplot/uPlot.esm.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"import(", "fetch(", "XMLHttpRequest", "eval(", "new Function", "@import", `from "http`, "url(http"} {
		if strings.Contains(string(js), bad) {
			t.Errorf("uPlot.esm.js contains %q", bad)
		}
	}
	css, err := assets.ReadFile("assets/vendor/uplot/uPlot.min.css")
	if err != nil || strings.Contains(string(css), "http") {
		t.Errorf("uPlot.min.css: %v (must reference nothing remote)", err)
	}
}
