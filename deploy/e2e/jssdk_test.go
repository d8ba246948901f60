package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The official JavaScript SDKs (openai, @anthropic-ai/sdk, @google/genai; exact versions pinned in
// deploy/e2e/jssdk/package-lock.json) join the Go SDKs: deploy/e2e/jssdk/run.mjs calls every client API
// plain and streaming, for text and for a tool call, on the routes of the alpha, beta and gamma providers of
// the sdkStart stack (passthrough on the client's own channel, transform_to on the two others), and the
// test checks what each SDK parsed with the Go suite's sdkStack.check and the usage row each call produced.
// node and npm are required: without them the test fails (it never skips). The packages are installed with
// `npm ci` into a cache directory keyed by the lock file (never into the repository).

// jssdkResult is one line of run.mjs's output.
type jssdkResult struct {
	Case    string `json:"case"`
	Client  string `json:"client"`
	Channel string `json:"channel"`
	Stream  bool   `json:"stream"`
	Tool    bool   `json:"tool"`
	Text    string `json:"text"`
	Calls   []struct {
		ID   string         `json:"id"`
		Name string         `json:"name"`
		Args map[string]any `json:"args"`
	} `json:"calls"`
	Finish     string   `json:"finish"`
	HasUsage   bool     `json:"hasUsage"`
	In         int64    `json:"in"`
	Out        int64    `json:"out"`
	Total      int64    `json:"total"`
	Error      string   `json:"error"`
	RequestIDs []string `json:"requestIds"`
	// Cost is the tollgate member's cost the SDK kept in the final usage object (openai's and genai's
	// plain objects; run.mjs with TOLLGATE_INCLUDE_COST).
	Cost string `json:"cost"`
}

// jssdkKinds maps run.mjs's client names to the inbound kind the gateway classifies their requests as.
var jssdkKinds = map[sdkClient]string{sdkChat: "alpha_chat_completions", sdkResponses: "alpha_responses",
	sdkMessages: "beta_messages", sdkGenai: "gamma_generate_content"}

// jssdkDestKind is the destination kind of the default cell behind an upstream path (sdkUpstreamPath).
func jssdkDestKind(path string) string {
	switch {
	case path == "/v1/chat/completions":
		return "alpha_chat_completions"
	case path == "/v1/responses":
		return "alpha_responses"
	case path == "/v1/messages":
		return "beta_messages"
	}
	return "gamma_generate_content"
}

// TestJSSDK: 48 calls (4 client APIs × 3 providers × plain/stream × text/tool) by the official JavaScript
// SDKs, each checked for content, finish, usage as the SDK reports it and the usage row it was billed with.
func TestJSSDK(t *testing.T) {
	t.Parallel()
	jssdkSuite(t, false)
}

// TestJSSDKStreamsWithCost: the same suite with every call asking for its cost (X-Tollgate-Include-Cost): each
// SDK parses the streams whose final usage event carries the cost and tollgate members as it parses them
// without, and every stream does carry them.
func TestJSSDKStreamsWithCost(t *testing.T) {
	t.Parallel()
	jssdkSuite(t, true)
}

// jssdkSuite runs run.mjs against its own stack and checks every case; withCost has every call ask for its
// cost and checks the streams carry it.
func jssdkSuite(t *testing.T, withCost bool) {
	dir := jssdkInstall(t)
	s := sdkStart(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, "node", filepath.Join(dir, "run.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TOLLGATE_URL="+s.url, "TOLLGATE_KEY="+s.key)
	if withCost {
		cmd.Env = append(cmd.Env, "TOLLGATE_INCLUDE_COST=1")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node run.mjs: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), out)
	}

	var results []jssdkResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var r jssdkResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("run.mjs printed %q: %v", sc.Text(), err)
		}
		results = append(results, r)
	}
	if want := len(sdkClients) * len(sdkChannels) * 2 * 2; len(results) != want {
		t.Fatalf("run.mjs reported %d cases, want %d\nstderr:\n%s", len(results), want, stderr.String())
	}

	var ids []string
	byID := map[string]jssdkResult{}
	for _, r := range results {
		t.Run(strings.TrimPrefix(r.Case, "jssdk/"), func(t *testing.T) {
			if r.Error != "" {
				t.Fatalf("SDK: %s", r.Error)
			}
			client := sdkClient(r.Client)
			rec := s.upstream(t, r.Case)
			if want := sdkUpstreamPath(client, r.Channel, r.Stream); rec.Path != want || rec.Stream != r.Stream {
				t.Errorf("upstream request %s (stream %v), want %s (stream %v)", rec.Path, rec.Stream, want, r.Stream)
			}
			got := sdkResult{Text: r.Text, Finish: r.Finish, In: r.In, Out: r.Out, Total: r.Total, HasUsage: r.HasUsage}
			for _, c := range r.Calls {
				got.Calls = append(got.Calls, sdkCall{ID: c.ID, Name: c.Name, Args: c.Args})
			}
			out := int64(sdkTextTokens)
			if r.Tool {
				out = sdkToolTokens
			}
			s.check(t, r.Case, got, sdkWant{tool: r.Tool, noID: client == sdkGenai, finish: client.finish(r.Tool), out: out})
			if withCost && r.Stream && client != sdkMessages && r.Cost == "" {
				// (anthropic's stream helper rebuilds the message's usage from known members only)
				t.Errorf("the SDK's final usage object has no tollgate cost")
			}
			if len(r.RequestIDs) != 1 || r.RequestIDs[0] == "" {
				t.Fatalf("request ids %q, want the one X-Request-Id of one HTTP call", r.RequestIDs)
			}
			ids = append(ids, r.RequestIDs[0])
			byID[r.RequestIDs[0]] = r
		})
	}

	// Every call is billed: one usage row per request id, recording the cell and what the client was told.
	type row struct {
		kind, impl, dest, endState string
		status                     int32
		in, out                    int64
	}
	rows := map[string]row{}
	deadline := time.Now().Add(20 * time.Second)
	for len(rows) < len(ids) && time.Now().Before(deadline) {
		q, err := s.c.db.Pool.Query(ctx, `SELECT request_id, inbound_kind, implementation, coalesce(dest_kind, ''), end_state,
			http_status, input_tokens, output_tokens FROM usages WHERE request_id = ANY($1)`, ids)
		if err != nil {
			t.Fatal(err)
		}
		for q.Next() {
			var id string
			var r row
			if err := q.Scan(&id, &r.kind, &r.impl, &r.dest, &r.endState, &r.status, &r.in, &r.out); err != nil {
				t.Fatal(err)
			}
			rows[id] = r
		}
		q.Close()
		if err := q.Err(); err != nil {
			t.Fatal(err)
		}
		if len(rows) < len(ids) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, id := range ids {
		r := byID[id]
		got, ok := rows[id]
		if !ok {
			t.Errorf("%s: no usage row for request %s after 20 s", r.Case, id)
			continue
		}
		client := sdkClient(r.Client)
		want := row{kind: jssdkKinds[client], impl: "transform_to", dest: jssdkDestKind(sdkUpstreamPath(client, r.Channel, r.Stream)),
			endState: "completed", status: 200, in: r.In, out: r.Out}
		if r.Channel == client.native() {
			want.impl, want.dest = "passthrough", got.dest
		}
		if got != want {
			t.Errorf("%s: usage row %+v, want %+v", r.Case, got, want)
		}
	}
}

// jssdkInstall returns a directory holding run.mjs and the pinned packages, installed once per lock file
// with `npm ci` under the user cache directory ($XDG_CACHE_HOME/tollgate-jssdk/<lock hash>, ~/.cache by
// default). node and npm missing is a failure: `make test` installs them (.ci/testtools).
func jssdkInstall(t *testing.T) string {
	t.Helper()
	for _, bin := range []string{"node", "npm"} {
		if _, err := osexec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed: the JavaScript SDK suite needs node and npm on PATH (`make test` installs them with apt: .ci/testtools): %v", bin, err)
		}
	}
	src := "jssdk"
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(src, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(src, "run.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no cache directory for the npm packages: %v", err)
	}
	sum := sha256.Sum256(append(append([]byte{}, manifest...), lock...))
	dir := filepath.Join(cache, "tollgate-jssdk", hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
		// Install into a fresh directory and rename it into place, so concurrent runs never see half an install.
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		for name, b := range map[string][]byte{"package.json": manifest, "package-lock.json": lock} {
			if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := osexec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", tmp, err, out)
		}
		if err := os.Rename(tmp, dir); err != nil {
			if _, statErr := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); statErr != nil {
				t.Fatalf("install the npm packages into %s: %v", dir, err)
			}
		}
	}
	// ES modules resolve packages from the importing file's directory: the script runs from a directory of
	// the test's own with a link to the installed node_modules, so an edited run.mjs needs no reinstall.
	run := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "node_modules"), filepath.Join(run, "node_modules")); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"package.json": manifest, "run.mjs": script} {
		if err := os.WriteFile(filepath.Join(run, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return run
}
