// Package console serves the operator console under /console (pages listed in assets/js/pages.js). It is plain
// HTML, CSS and JavaScript modules embedded in the binary: no CDN, no build step, works offline. It talks
// only to the admin REST API on the same origin with the operator's bearer token, so every change it makes
// goes through the same validation, revision bump and snapshot publication as curl would.
//
// Every response carries a strict Content-Security-Policy (scripts, styles and connections from this
// origin only; no inline code; no framing). docs/console.md describes the page.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is sent with every console response. The page needs nothing but its own origin:
// module scripts and the stylesheet from /console/assets, fetch to /admin; the export download is a
// same-document blob: link, which needs no directive.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

// file is one embedded asset with its validator.
type file struct {
	body []byte
	etag string
}

// Handler serves the console: GET /console redirects to /console/, /console/ is the page and
// /console/assets/… its files. It expects the full request path (mount it at "/console/" without
// stripping the prefix). Responses carry an ETag, so a reload revalidates instead of downloading again.
func Handler() http.Handler {
	files := map[string]file{}
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		files[strings.TrimPrefix(path, "assets/")] = file{body: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	serve := func(w http.ResponseWriter, r *http.Request, name string) {
		f, ok := files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", f.etag)
		// ServeContent sets the Content-Type from the extension and answers If-None-Match with 304.
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /console/{$}", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, "index.html")
	})
	mux.HandleFunc("GET /console/assets/{path...}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("path")
		if name == "index.html" { // the page lives at /console/ only
			http.NotFound(w, r)
			return
		}
		serve(w, r, name)
	})
	return securityHeaders(mux)
}

// Register mounts the console on mux at /console and /console/.
func Register(mux *http.ServeMux) {
	h := Handler()
	mux.Handle("GET /console", h)
	mux.Handle("GET /console/", h)
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		// The assets change only with the binary: revalidate (ETag) on every load rather than pin a
		// stale page after an upgrade.
		h.Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}
