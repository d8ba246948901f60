package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	dpconfig "github.com/tollgate/tollgate/dataplane/config"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/dataplane/syncer"
	"github.com/tollgate/tollgate/deploy/mockupstream"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/testkit"
)

// dpFakeCP is a minimal SnapshotService: it sends one snapshot to every watcher, then holds the stream. As a
// SettlementService it keeps every record a data plane offers and answers Unavailable, so records stay in
// the outbox, where the tests read them; a record the data plane could not append to Redis (spilled under
// load and delivered straight to the control plane) is found in offered instead of being lost to the test.
type dpFakeCP struct {
	snapshotv1.UnimplementedSnapshotServiceServer
	settlementv1.UnimplementedSettlementServiceServer
	snap *snapshotv1.Snapshot

	mu      sync.Mutex
	offered map[string]*settlementv1.SettlementRecord // by request id
}

func (f *dpFakeCP) Settle(_ context.Context, req *settlementv1.SettleRequest) (*settlementv1.SettleResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.offered == nil {
		f.offered = map[string]*settlementv1.SettlementRecord{}
	}
	for _, r := range req.GetRecords() {
		f.offered[r.GetRequestId()] = r
	}
	return nil, status.Error(codes.Unavailable, "the test control plane leaves settlement records in the outbox")
}

// offeredRecords returns the records offered to f so far.
func (f *dpFakeCP) offeredRecords() map[string]*settlementv1.SettlementRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]*settlementv1.SettlementRecord, len(f.offered))
	for id, r := range f.offered {
		out[id] = r
	}
	return out
}

func (f *dpFakeCP) Watch(_ *snapshotv1.WatchRequest, st grpc.ServerStreamingServer[snapshotv1.WatchResponse]) error {
	if err := st.SendHeader(metadata.Pairs(syncer.HeaderVersion, fmt.Sprint(f.snap.GetVersion()))); err != nil {
		return err
	}
	if err := st.Send(&snapshotv1.WatchResponse{Snapshot: f.snap}); err != nil {
		return err
	}
	<-st.Context().Done()
	return nil
}

// dpEnv is a real data plane (dataplane/app) on loopback, fed a snapshot by dpFakeCP over gRPC, in front of
// the real mock upstream.
type dpEnv struct {
	t      *testing.T
	url    string
	mock   *mockupstream.Server
	upURL  string
	rdb    *redis.Client
	prefix string
	logs   *testkit.Buffer
	cp     *dpFakeCP // the fake control plane, with the settlement records offered to it
}

const (
	dpKeyMain       = "tg-main-key"
	dpKeyRestricted = "tg-restricted-key"
	dpKeyDisabled   = "tg-disabled-key"
	dpKeyExpired    = "tg-expired-key"
	dpKeyRPM        = "tg-rpm-key"
	dpKeyPoor       = "tg-poor-key"
)

func dpHash(k string) []byte { h := sha256.Sum256([]byte(k)); return h[:] }

// dpCells returns the default routing cells of a channel type (controlplane/admin/defaults.go).
func dpCells(providerID int64, channel string) []*configv1.RoutingRule {
	var rows []*configv1.RoutingRule
	add := func(op, kind, impl, destOp, destKind string) {
		r := &configv1.RoutingRule{Id: providerID*100 + int64(len(rows)) + 1, ProviderId: providerID, Operation: op, Kind: kind,
			Implementation: impl, Enabled: true, SortOrder: int32(len(rows))}
		if destOp != "" {
			r.DestOperation = proto.String(destOp)
		}
		if destKind != "" {
			r.DestKind = proto.String(destKind)
		}
		rows = append(rows, r)
	}
	gen := func(kind, impl, destKind string) {
		add("generate_content", kind, impl, "", destKind)
		add("stream_generate_content", kind, impl, "", destKind)
	}
	for _, k := range []string{"alpha", "beta", "gamma"} {
		add("list_models", k, "local", "", "")
		add("get_model", k, "local", "", "")
	}
	switch channel {
	case "alpha":
		gen("alpha_chat_completions", "passthrough", "")
		gen("alpha_responses", "passthrough", "")
		for _, op := range []string{"create_embedding", "create_image", "edit_image", "count_tokens", "compact_content", "create_conversation"} {
			add(op, "alpha", "passthrough", "", "")
		}
		gen("beta_messages", "transform_to", "alpha_responses")
		gen("gamma_generate_content", "transform_to", "alpha_chat_completions")
	case "beta":
		gen("beta_messages", "passthrough", "")
		add("count_tokens", "beta", "passthrough", "", "")
		gen("alpha_chat_completions", "transform_to", "beta_messages")
		gen("alpha_responses", "transform_to", "beta_messages")
		gen("gamma_generate_content", "transform_to", "beta_messages")
	case "gamma":
		gen("gamma_generate_content", "passthrough", "")
		add("count_tokens", "gamma", "passthrough", "", "")
		add("create_embedding", "gamma", "passthrough", "", "")
	case "custom", "router":
		gen("alpha_chat_completions", "passthrough", "")
		add("create_embedding", "alpha", "passthrough", "", "")
		add("rerank", "alpha", "passthrough", "", "")
	}
	return rows
}

func dpSnapshot(base string) *snapshotv1.Snapshot {
	prov := func(id int64, name, ch, secret string) *configv1.Provider {
		return &configv1.Provider{Id: id, Name: name, ChannelType: ch, BaseUrl: base, Enabled: true,
			Credentials: []*configv1.Credential{{Id: id * 10, ProviderId: id, Secret: secret, Weight: 1, Enabled: true}}}
	}
	member := func(pid int64, model string, prio int32) *configv1.RouteMember {
		return &configv1.RouteMember{ProviderId: pid, UpstreamModelId: model, Priority: prio, Weight: 1, Enabled: true}
	}
	route := func(id int64, name string, members ...*configv1.RouteMember) *configv1.Route {
		return &configv1.Route{Id: id, Name: name, Strategy: "priority", Enabled: true, Members: members}
	}
	s := &snapshotv1.Snapshot{
		Version: 1,
		BuiltAt: timestamppb.New(time.Unix(1760000000, 0)),
		PriceRules: []*configv1.PriceRule{{Id: 1, MatchType: "contains", ModelMatch: "m-1", InputPrice: "1", OutputPrice: "2",
			CacheReadPrice: "0.1", CacheCreation_5MPrice: "1.25", CacheCreation_30MPrice: "1.5", CacheCreation_1HPrice: "2",
			ImageOutputPrice: "0", Enabled: true}},
		Providers: []*configv1.Provider{
			prov(1, "alpha1", "alpha", "sk-one"), prov(2, "alpha2", "alpha", "sk-two"), prov(3, "beta1", "beta", "sk-beta"),
			prov(4, "gamma1", "gamma", "sk-gamma"), prov(5, "router1", "router", "sk-router"),
		},
		Routes: []*configv1.Route{
			route(1, "chat", member(1, "m-1", 1)),
			route(2, "failover", member(1, "m-1", 1), member(2, "m-1-mini", 2)),
			route(3, "claude", member(3, "b-1", 1)),
			route(4, "gem", member(4, "g-1-flash", 1)),
			route(5, "rr", member(5, "rr-1", 1)),
			route(6, "img", member(1, "img-1", 1)),
			route(7, "emb", member(1, "emb-1", 1)),
		},
		ApiKeys: []*configv1.ApiKey{
			{Id: 1, UserId: 1, OrgId: 1, Name: "main", KeyHash: dpHash(dpKeyMain), Enabled: true},
			{Id: 2, UserId: 2, OrgId: 1, Name: "restricted", KeyHash: dpHash(dpKeyRestricted), Enabled: true, AllowedModels: []string{"chat-latest"}},
			{Id: 3, UserId: 3, OrgId: 1, Name: "disabled", KeyHash: dpHash(dpKeyDisabled), Enabled: false},
			{Id: 4, UserId: 4, OrgId: 1, Name: "expired", KeyHash: dpHash(dpKeyExpired), Enabled: true, ExpiresAt: timestamppb.New(time.Unix(1000, 0))},
			{Id: 5, UserId: 5, OrgId: 1, Name: "rpm", KeyHash: dpHash(dpKeyRPM), Enabled: true, RpmLimit: 1},
			{Id: 6, UserId: 6, OrgId: 6, Name: "poor", KeyHash: dpHash(dpKeyPoor), Enabled: true},
		},
		Quotas: []*configv1.Quota{{Scope: "org", ScopeId: 6, CostLimit: proto.String("0.000001"), CostUsed: "0.000001"}},
	}
	s.Routes[0].Aliases = []string{"chat-latest"}
	// Provider 6 streams alpha chat by buffering the upstream: a plain upstream answer relayed as a stream.
	s.Providers = append(s.Providers, prov(6, "alphabuf", "alpha", "sk-buf"))
	s.Routes = append(s.Routes, route(8, "buffered", member(6, "m-1", 1)))
	for _, p := range s.Providers {
		rows := dpCells(p.Id, p.ChannelType)
		if p.Id == 6 {
			for _, r := range rows {
				if r.Operation == "stream_generate_content" && r.Kind == "alpha_chat_completions" {
					r.Implementation, r.DestOperation, r.DestKind = "transform_to", proto.String("generate_content"), proto.String("alpha_chat_completions")
				}
			}
		}
		s.RoutingRules = append(s.RoutingRules, rows...)
	}
	return s
}

// dpStart runs the mock upstream, a fake control plane and a real data plane; everything stops with the test.
func dpStart(t *testing.T, tweak func(*dpconfig.Config)) *dpEnv {
	t.Helper()
	mock := mockupstream.New(mockupstream.Options{})
	e := dpStartWith(t, mock, dpSnapshot, tweak)
	e.mock = mock
	return e
}

// dpStartWith is dpStart with another upstream (served on loopback) and the snapshot snap builds for the
// upstream's base URL.
func dpStartWith(t *testing.T, upstream http.Handler, snap func(base string) *snapshotv1.Snapshot, tweak func(*dpconfig.Config)) *dpEnv {
	t.Helper()
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	cp := &dpFakeCP{snap: snap(up.URL)}
	snapshotv1.RegisterSnapshotServiceServer(gs, cp)
	settlementv1.RegisterSettlementServiceServer(gs, cp)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)

	prefix := redisPrefix(t, "test:dp:")
	logs := &testkit.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("data plane logs:\n%s", logs.String())
		}
	})
	d := startDataPlane(t, "dp-e2e", "dp-token", []string{lis.Addr().String()}, dpOptions{prefix: prefix, logs: logs,
		env: map[string]string{"TOLLGATE_LOG_LEVEL": "debug"},
		tweak: func(cfg *dpconfig.Config) {
			cfg.MaxBodyBytes = 1 << 20
			cfg.UpstreamResponseTimeout = 2 * time.Second
			// dpFakeCP refuses settlement records as unavailable: they stay in the outbox, where the tests
			// read them, and the forwarder's flush at shutdown gives up quickly.
			cfg.ShutdownTimeout = 500 * time.Millisecond
			if tweak != nil {
				tweak(cfg)
			}
		}})
	e := &dpEnv{t: t, url: "http://" + d.srv.Addr(), upURL: up.URL, rdb: redisClient(t), prefix: prefix, logs: logs, cp: cp}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(e.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("data plane not ready: %v\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return e
}

// do sends a client request to the data plane (see send) and fails the test on a transport error.
func (e *dpEnv) do(method, path, body string, hdr ...string) response {
	e.t.Helper()
	r := send(context.Background(), e.url, method, path, body, hdr...)
	if r.err != nil {
		e.t.Fatalf("%s %s: %v", method, path, r.err)
	}
	return r
}

// outbox returns the settlement records appended so far.
func (e *dpEnv) outbox() []map[string]any {
	e.t.Helper()
	msgs, err := e.rdb.XRange(context.Background(), settle.Streams{Prefix: e.prefix}.Outbox(""), "-", "+").Result()
	if err != nil {
		e.t.Fatalf("read outbox: %v", err)
	}
	var out []map[string]any
	for _, m := range msgs {
		rec, hold, err := settle.DecodeEntry(m.Values)
		if err != nil {
			e.t.Fatalf("decode outbox entry: %v", err)
		}
		out = append(out, map[string]any{"request_id": rec.GetRequestId(), "end_state": rec.GetEndState(),
			"provider_id": rec.GetProviderId(), "status": rec.GetHttpStatus(), "source": rec.GetSource(),
			"cost": rec.GetCost(), "input": rec.GetTokens().GetInput(), "output": rec.GetTokens().GetOutput(),
			"hold": hold.Micros, "upstream_model": rec.GetUpstreamModel(), "implementation": rec.GetImplementation()})
	}
	return out
}

// outboxAtLeast waits (up to 5 s) until the outbox holds at least n records and returns them. A response
// of declared length reaches the client before its record is appended (proxy.Handler.finish), so a test
// that has just read such a response waits for the record rather than expecting it already there.
func (e *dpEnv) outboxAtLeast(n int) []map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := e.outbox()
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recordsOf waits (up to 5 s) for the record of the response r and returns every record with its request
// id (one, if the data plane settled it exactly once).
func (e *dpEnv) recordsOf(r response) []map[string]any {
	e.t.Helper()
	id := r.header.Get("X-Request-Id")
	deadline := time.Now().Add(5 * time.Second)
	for {
		var mine []map[string]any
		for _, rec := range e.outbox() {
			if rec["request_id"] == id {
				mine = append(mine, rec)
			}
		}
		if len(mine) > 0 || time.Now().After(deadline) {
			return mine
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *dpEnv) lastMock() mockupstream.Request {
	e.t.Helper()
	recs := e.mock.Requests()
	if len(recs) == 0 {
		e.t.Fatal("the mock received no request")
	}
	return recs[len(recs)-1]
}

func wantStatus(t *testing.T, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
}

const dpChatBody = `{"model":"chat","messages":[{"role":"user","content":"hi"}],"x_unknown_field":{"keep":[1,2,"three"]}}`

func TestDataplanePassthrough(t *testing.T) {
	e := dpStart(t, nil)
	auth := []string{"Authorization", "Bearer " + dpKeyMain}

	t.Run("alpha chat", func(t *testing.T) {
		r := e.do("POST", "/v1/chat/completions", dpChatBody, auth...)
		wantStatus(t, r, 200)
		if !strings.Contains(r.body, `"chat.completion"`) || r.header.Get("X-Request-Id") == "" {
			t.Fatalf("body %s header %v", r.body, r.header)
		}
		m := e.lastMock()
		if m.Model != "m-1" || m.APIKey != "sk-one" || m.Path != "/v1/chat/completions" {
			t.Errorf("mock saw model %q key %q path %q, want m-1 sk-one /v1/chat/completions", m.Model, m.APIKey, m.Path)
		}
		if !strings.Contains(m.Body, `"x_unknown_field":{"keep":[1,2,"three"]}`) || !strings.Contains(m.Body, `"model":"m-1"`) {
			t.Errorf("upstream body %s: unknown field or renamed model missing", m.Body)
		}
	})
	t.Run("alpha chat stream", func(t *testing.T) {
		r := e.do("POST", "/v1/chat/completions", `{"model":"chat-latest","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, auth...)
		wantStatus(t, r, 200)
		if !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") || !strings.HasSuffix(strings.TrimSpace(r.body), "data: [DONE]") {
			t.Fatalf("stream %q (%s)", r.body, r.header.Get("Content-Type"))
		}
		if n := strings.Count(r.body, "data: "); n < 9 {
			t.Errorf("%d events, want >= 9", n)
		}
	})
	t.Run("alpha chat stream without usage is counted locally", func(t *testing.T) {
		// The gateway asks the upstream for usage; this one reports none all the same.
		r := e.do("POST", "/v1/chat/completions", `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi there"}]}`,
			append(append([]string(nil), auth...), "x-mock-usage", "none")...)
		wantStatus(t, r, 200)
		recs := e.outbox()
		if rec := recs[len(recs)-1]; rec["source"] != "local" || rec["output"].(int64) < 8 || rec["input"].(int64) < 1 {
			t.Errorf("record %v, want local usage with the 8 relayed words counted", rec)
		}
	})
	t.Run("alpha responses stream", func(t *testing.T) {
		r := e.do("POST", "/v1/responses", `{"model":"chat","stream":true,"input":"hi"}`, auth...)
		wantStatus(t, r, 200)
		if !strings.Contains(r.body, "event: response.completed") {
			t.Fatalf("stream %q", r.body)
		}
	})
	t.Run("beta messages", func(t *testing.T) {
		r := e.do("POST", "/v1/messages", `{"model":"claude","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
			"x-api-key", dpKeyMain, "anthropic-version", "2023-06-01")
		wantStatus(t, r, 200)
		if !strings.Contains(r.body, `"type":"message"`) {
			t.Fatalf("body %s", r.body)
		}
		m := e.lastMock()
		if m.Model != "b-1" || m.APIKey != "sk-beta" || m.Header.Get("Anthropic-Version") != "2023-06-01" {
			t.Errorf("mock saw model %q key %q version %q", m.Model, m.APIKey, m.Header.Get("Anthropic-Version"))
		}
	})
	t.Run("beta messages stream", func(t *testing.T) {
		r := e.do("POST", "/v1/messages", `{"model":"claude","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
			"x-api-key", dpKeyMain, "anthropic-version", "2023-06-01")
		wantStatus(t, r, 200)
		if !strings.Contains(r.body, "event: message_start") || !strings.Contains(r.body, "event: message_stop") {
			t.Fatalf("stream %q", r.body)
		}
	})
	t.Run("gamma generate", func(t *testing.T) {
		r := e.do("POST", "/v1beta/models/gem:generateContent?key="+dpKeyMain, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
		wantStatus(t, r, 200)
		if !strings.Contains(r.body, `"candidates"`) || r.header.Get("X-Gamma-Service-Tier") == "" {
			t.Fatalf("body %s headers %v", r.body, r.header)
		}
		m := e.lastMock()
		if m.Path != "/v1beta/models/g-1-flash:generateContent" || m.APIKey != "sk-gamma" || strings.Contains(m.Query, dpKeyMain) {
			t.Errorf("mock saw path %q key %q query %q", m.Path, m.APIKey, m.Query)
		}
	})
	t.Run("gamma stream sse", func(t *testing.T) {
		r := e.do("POST", "/v1beta/models/gem:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
			"x-goog-api-key", dpKeyMain)
		wantStatus(t, r, 200)
		if n := strings.Count(r.body, "data: "); n < 8 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("stream %q", r.body)
		}
		if m := e.lastMock(); m.Query != "alt=sse" {
			t.Errorf("mock query %q, want alt=sse", m.Query)
		}
	})
	t.Run("gamma stream json array", func(t *testing.T) {
		r := e.do("POST", "/v1beta/models/gem:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
			"x-goog-api-key", dpKeyMain)
		wantStatus(t, r, 200)
		var chunks []map[string]any
		if err := json.Unmarshal([]byte(r.body), &chunks); err != nil || len(chunks) < 8 {
			t.Fatalf("json array stream %q: %v", r.body, err)
		}
	})
	t.Run("router rerank", func(t *testing.T) {
		r := e.do("POST", "/v1/rerank", `{"model":"rr","query":"capital of France","documents":["Paris is the capital of France","Berlin"],"top_n":1}`, auth...)
		wantStatus(t, r, 200)
		if !strings.Contains(r.body, `"relevance_score"`) || e.lastMock().APIKey != "sk-router" {
			t.Fatalf("body %s", r.body)
		}
	})
	t.Run("image stream relayed unchanged", func(t *testing.T) {
		body := `{"model":"img","prompt":"a cat","stream":true,"partial_images":2}`
		r := e.do("POST", "/v1/images/generations", body, auth...)
		wantStatus(t, r, 200)
		direct, err := http.Post(e.mockURL()+"/v1/images/generations", "application/json", strings.NewReader(strings.Replace(body, `"img"`, `"img-1"`, 1)))
		if err != nil {
			t.Fatal(err)
		}
		db, _ := io.ReadAll(direct.Body)
		direct.Body.Close()
		if r.body != string(db) || !strings.Contains(r.body, "event: image_generation.completed") {
			t.Fatalf("relayed image stream differs from the upstream's:\n%s\n---\n%s", r.body, db)
		}
	})
	t.Run("embeddings", func(t *testing.T) {
		r := e.do("POST", "/v1/embeddings", `{"model":"emb","input":"hello"}`, auth...)
		wantStatus(t, r, 200)
	})
	t.Run("scoped provider", func(t *testing.T) {
		r := e.do("POST", "/v1/chat/completions", `{"model":"alpha2/m-1-mini","messages":[{"role":"user","content":"hi"}]}`, auth...)
		wantStatus(t, r, 200)
		if m := e.lastMock(); m.Model != "m-1-mini" || m.APIKey != "sk-two" {
			t.Errorf("mock saw %q %q", m.Model, m.APIKey)
		}
	})
	t.Run("transform beta client to alpha provider", func(t *testing.T) {
		r := e.do("POST", "/v1/messages", `{"model":"chat","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
			"x-api-key", dpKeyMain, "anthropic-version", "2023-06-01")
		wantStatus(t, r, 200)
		if !strings.Contains(r.body, `"type":"message"`) || e.lastMock().Path != "/v1/responses" {
			t.Fatalf("body %s, upstream path %s", r.body, e.lastMock().Path)
		}
	})
	t.Run("transform beta stream to alpha provider", func(t *testing.T) {
		r := e.do("POST", "/v1/messages", `{"model":"chat","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
			"x-api-key", dpKeyMain, "anthropic-version", "2023-06-01")
		wantStatus(t, r, 200)
		if !strings.Contains(r.body, "event: message_start") || !strings.Contains(r.body, "event: message_stop") {
			t.Fatalf("stream %q", r.body)
		}
		last := e.outbox()
		if rec := last[len(last)-1]; rec["implementation"] != "transform_to" || rec["source"] != "upstream" || rec["end_state"] != "completed" {
			t.Errorf("record %v", rec)
		}
	})
	t.Run("transform gamma stream to alpha provider", func(t *testing.T) {
		r := e.do("POST", "/v1beta/models/chat:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
			"x-goog-api-key", dpKeyMain)
		wantStatus(t, r, 200)
		if !strings.Contains(r.body, `"candidates"`) || e.lastMock().Path != "/v1/chat/completions" {
			t.Fatalf("stream %q", r.body)
		}
	})
	t.Run("stream synthesised from a buffered upstream", func(t *testing.T) {
		r := e.do("POST", "/v1/chat/completions", `{"model":"buffered","stream":true,"messages":[{"role":"user","content":"hi"}]}`, auth...)
		wantStatus(t, r, 200)
		m := e.lastMock()
		if m.Stream || m.APIKey != "sk-buf" || !strings.HasSuffix(strings.TrimSpace(r.body), "data: [DONE]") {
			t.Fatalf("upstream stream=%v key=%q; client got %q", m.Stream, m.APIKey, r.body)
		}
	})
	t.Run("one settlement record per dispatched request", func(t *testing.T) {
		r := e.do("POST", "/v1/chat/completions", dpChatBody, auth...)
		wantStatus(t, r, 200)
		recs := e.recordsOf(r)
		if len(recs) != 1 {
			t.Fatalf("%d records for request %s, want 1", len(recs), r.header.Get("X-Request-Id"))
		}
		last := recs[0]
		if last["end_state"] != "completed" || last["source"] != "upstream" ||
			last["cost"] == "0" || last["upstream_model"] != "m-1" {
			t.Errorf("record %v", last)
		}
	})
}

func (e *dpEnv) mockURL() string { return e.upURL }

func TestDataplaneLocalModels(t *testing.T) {
	e := dpStart(t, nil)
	tests := []struct {
		name, path string
		hdr        []string
		want       []string
		notWant    string
	}{
		{"alpha", "/v1/models", []string{"Authorization", "Bearer " + dpKeyMain}, []string{`"object":"list"`, `"id":"chat"`, `"id":"gem"`, `"id":"chat-latest"`}, ""},
		{"beta", "/v1/models", []string{"x-api-key", dpKeyMain, "anthropic-version", "2023-06-01"}, []string{`"type":"model"`, `"has_more":false`, `"id":"claude"`}, ""},
		{"gamma", "/v1beta/models", []string{"x-goog-api-key", dpKeyMain}, []string{`"models":[`, `"name":"models/gem"`}, ""},
		{"restricted key", "/v1/models", []string{"Authorization", "Bearer " + dpKeyRestricted}, []string{`"id":"chat"`, `"id":"chat-latest"`}, `"id":"gem"`},
		{"get alpha", "/v1/models/gem", []string{"Authorization", "Bearer " + dpKeyMain}, []string{`{"id":"gem","object":"model"`}, ""},
		{"get gamma", "/v1beta/models/gem", []string{"x-goog-api-key", dpKeyMain}, []string{`"name":"models/gem"`}, ""},
	}
	n := e.mock.Count()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("GET", tt.path, "", tt.hdr...)
			wantStatus(t, r, 200)
			for _, w := range tt.want {
				if !strings.Contains(r.body, w) {
					t.Errorf("body %s lacks %s", r.body, w)
				}
			}
			if tt.notWant != "" && strings.Contains(r.body, tt.notWant) {
				t.Errorf("body %s lists %s", r.body, tt.notWant)
			}
		})
	}
	if e.mock.Count() != n {
		t.Errorf("local answers reached the upstream")
	}
}

func TestDataplaneFailover(t *testing.T) {
	e := dpStart(t, nil)
	r := e.do("POST", "/v1/chat/completions", `{"model":"failover","messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer "+dpKeyMain, "x-mock-fail-first", "1", "x-mock-fail-key", "failover-"+randomHex(4))
	wantStatus(t, r, 200)
	recs := e.mock.Requests()
	if len(recs) != 2 || recs[0].Status != 500 || recs[0].APIKey != "sk-one" || recs[1].APIKey != "sk-two" || recs[1].Model != "m-1-mini" {
		t.Fatalf("upstream attempts: %+v", recs)
	}
	if !strings.Contains(r.body, `"chat.completion"`) || strings.Contains(r.body, "mock failure") {
		t.Fatalf("client saw %s", r.body)
	}
	if out := e.recordsOf(r); len(out) != 1 || out[0]["provider_id"] != int64(2) {
		t.Fatalf("records %v, want one for provider 2", out)
	}
}

func TestDataplaneClientDisconnectCancelsUpstream(t *testing.T) {
	e := dpStart(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+dpKeyMain)
	req.Header.Set("x-mock-chunks", "200")
	req.Header.Set("x-mock-chunk-delay-ms", "50")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q: %v", line, err)
	}
	if time.Since(first) > time.Second {
		t.Errorf("first event took %v: not flushed per event", time.Since(first))
	}
	cancel()
	resp.Body.Close()
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	rec, err := e.mock.Wait(wctx, func(r mockupstream.Request) bool { return r.Done })
	if err != nil {
		t.Fatalf("upstream request never ended: %v", err)
	}
	if !rec.Cancelled || rec.Completed {
		t.Errorf("upstream record %+v, want cancelled", rec)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := e.outbox()
		if len(out) == 1 {
			if out[0]["end_state"] != "client_dropped" {
				t.Errorf("record %v, want end_state client_dropped", out[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records, want 1", len(out))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDataplaneErrors(t *testing.T) {
	e := dpStart(t, func(c *dpconfig.Config) { c.UpstreamResponseTimeout = 500 * time.Millisecond })
	main := []string{"Authorization", "Bearer " + dpKeyMain}
	chat := `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		want                     string
	}{
		{"unknown path", "GET", "/v2/nothing", "", main, 404, `{"error":{"message":"no such endpoint: GET /v2/nothing","type":"not_found_error","param":null,"code":"not_found"}}`},
		{"missing key", "POST", "/v1/chat/completions", chat, nil, 401, `"code":"invalid_api_key"`},
		{"wrong key", "POST", "/v1/messages", chat, []string{"x-api-key", "nope", "anthropic-version", "2023-06-01"}, 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid API key"}}`},
		{"disabled key", "POST", "/v1/chat/completions", chat, []string{"Authorization", "Bearer " + dpKeyDisabled}, 401, "disabled or expired"},
		{"expired key", "POST", "/v1/chat/completions", chat, []string{"Authorization", "Bearer " + dpKeyExpired}, 401, "disabled or expired"},
		{"model not allowed", "POST", "/v1/chat/completions", `{"model":"gem","messages":[]}`, []string{"Authorization", "Bearer " + dpKeyRestricted}, 403, `"type":"permission_error"`},
		{"unknown model gamma", "POST", "/v1beta/models/nope:generateContent", `{}`, []string{"x-goog-api-key", dpKeyMain}, 404, `"status":"NOT_FOUND"`},
		{"malformed body", "POST", "/v1/chat/completions", `{"model":`, main, 400, `"type":"invalid_request_error"`},
		{"missing model", "POST", "/v1/chat/completions", `{"messages":[]}`, main, 400, `"param":"model"`},
		{"unsupported operation", "POST", "/v1/rerank", `{"model":"chat","query":"q","documents":["a"]}`, main, 400, `"code":"unsupported_operation"`},
		{"body too large", "POST", "/v1/chat/completions", `{"model":"chat","x":"` + strings.Repeat("a", 1<<20) + `"}`, main, 413, `"code":"request_too_large"`},
		{"quota exhausted", "POST", "/v1/chat/completions", chat, []string{"Authorization", "Bearer " + dpKeyPoor}, 402, `"code":"insufficient_quota"`},
		{"all candidates failed", "POST", "/v1/chat/completions", `{"model":"failover","messages":[]}`, append([]string{"x-mock-status", "503"}, main...), 502, `"code":"upstream_failed"`},
		{"upstream timeout", "POST", "/v1/messages", `{"model":"claude","max_tokens":5,"messages":[]}`, []string{"x-api-key", dpKeyMain, "anthropic-version", "2023-06-01", "x-mock-latency-ms", "3000"}, 504, `"type":"timeout_error"`},
		{"translator refuses a field", "POST", "/v1/chat/completions", `{"model":"claude","n":2,"messages":[{"role":"user","content":"hi"}]}`, main, 400, `"param":"n"`},
		{"upstream 4xx relayed", "POST", "/v1/messages", `{"model":"claude","messages":[]}`, []string{"x-api-key", dpKeyMain, "anthropic-version", "2023-06-01"}, 400, `"type":"invalid_request_error"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, tt.body, tt.hdr...)
			wantStatus(t, r, tt.status)
			if !strings.Contains(r.body, tt.want) {
				t.Errorf("body %s, want containing %s", r.body, tt.want)
			}
		})
	}
	t.Run("rate limited", func(t *testing.T) {
		rpm := []string{"Authorization", "Bearer " + dpKeyRPM}
		r := e.do("POST", "/v1/chat/completions", chat, rpm...)
		wantStatus(t, r, 200)
		r = e.do("POST", "/v1/chat/completions", chat, rpm...)
		wantStatus(t, r, 429)
		if r.header.Get("Retry-After") == "" || !strings.Contains(r.body, `"code":"rate_limit_exceeded"`) {
			t.Errorf("429 headers %v body %s", r.header, r.body)
		}
	})
	t.Run("records for every request that reached admission", func(t *testing.T) {
		// 502, 504, the translator's refusal, the relayed 400, the first rate-limited-key request, and the two
		// admission refusals (402 quota, 429 rate limit) recorded as rejected at cost 0. Requests refused
		// before a model was resolved (401, 403, 404, 413, malformed) have no row.
		want := map[string]bool{"502 upstream_error": true, "504 upstream_error": true, "400 rejected": true, "400 upstream_error": true,
			"200 completed": true, "402 rejected": true, "429 rejected": true}
		var states []string
		for _, rec := range e.outboxAtLeast(len(want)) {
			states = append(states, fmt.Sprint(rec["status"], " ", rec["end_state"]))
		}
		if len(states) != len(want) {
			t.Fatalf("records %v, want one each of %v", states, want)
		}
		for _, s := range states {
			if !want[s] {
				t.Errorf("unexpected record %q (all: %v)", s, states)
			}
		}
	})
}

func TestDataplaneKeepaliveWhileBuffering(t *testing.T) {
	e := dpStart(t, func(c *dpconfig.Config) { c.KeepaliveInterval = 50 * time.Millisecond })
	r := e.do("POST", "/v1/chat/completions", `{"model":"buffered","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer "+dpKeyMain, "x-mock-latency-ms", "400")
	wantStatus(t, r, 200)
	ka := strings.Index(r.body, ": keepalive")
	data := strings.Index(r.body, "data: ")
	if ka < 0 || data < 0 || ka > data || !strings.HasSuffix(strings.TrimSpace(r.body), "data: [DONE]") {
		t.Fatalf("stream %q: want keepalive comments before the synthesised events", r.body)
	}
	recs := e.outbox()
	if len(recs) != 1 || recs[0]["end_state"] != "completed" || recs[0]["implementation"] != "transform_to" {
		t.Errorf("records %v", recs)
	}
}
