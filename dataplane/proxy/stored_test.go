package proxy

import (
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/deploy/mockupstream"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// storedSetup serves two providers, each in front of its own mock upstream: provider 1 ("p", route
// "resp-a") and provider 2 ("q", route "resp-b"), both passing alpha responses and conversations
// through. A second key ("narrow-key") may use route resp-a only.
func storedSetup(t *testing.T) (b *testBundle, front *httptest.Server, mockA, mockB *mockupstream.Server) {
	t.Helper()
	mockB = mockupstream.New(mockupstream.Options{})
	upB := httptest.NewServer(mockB)
	t.Cleanup(upB.Close)
	b, front, mockA = setupMock(t, func(s *snapshotv1.Snapshot) {
		s.Providers = append(s.Providers, &configv1.Provider{Id: 2, Name: "q", ChannelType: "alpha", BaseUrl: upB.URL, Enabled: true,
			Credentials: []*configv1.Credential{{Id: 3, Secret: "s3", Weight: 1, Enabled: true}}})
		id := int64(100)
		for _, p := range []int64{1, 2} {
			for _, c := range [][2]string{{"generate_content", "alpha_responses"}, {"stream_generate_content", "alpha_responses"}, {"create_conversation", "alpha"}} {
				id++
				s.RoutingRules = append(s.RoutingRules, &configv1.RoutingRule{Id: id, ProviderId: p, Operation: c[0], Kind: c[1],
					Implementation: "passthrough", Enabled: true})
			}
		}
		s.Routes = append(s.Routes,
			&configv1.Route{Id: 2, Name: "resp-a", Enabled: true, Members: []*configv1.RouteMember{{ProviderId: 1, UpstreamModelId: "m-1", Priority: 1, Weight: 1, Enabled: true}}},
			&configv1.Route{Id: 3, Name: "resp-b", Enabled: true, Members: []*configv1.RouteMember{{ProviderId: 2, UpstreamModelId: "m-1", Priority: 1, Weight: 1, Enabled: true}}})
		kh := sha256.Sum256([]byte("narrow-key"))
		s.ApiKeys = append(s.ApiKeys, &configv1.ApiKey{Id: 7, UserId: 5, OrgId: 6, KeyHash: kh[:], Enabled: true, AllowedModels: []string{"resp-a"}})
	})
	return b, front, mockA, mockB
}

// do sends one request with key and returns the status and body.
func do(t *testing.T, front *httptest.Server, method, path, key, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, front.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func jsonID(t *testing.T, body, member string) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	switch x := v[member].(type) {
	case string:
		return x
	case map[string]any:
		s, _ := x["id"].(string)
		return s
	}
	return ""
}

// records waits for n settlement records and returns them.
func records(t *testing.T, b *testBundle, n int) []*settlementv1.SettlementRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for int(b.rec.done.Load()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d settlement records, want %d", b.rec.done.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	return append([]*settlementv1.SettlementRecord(nil), b.rec.recs...)
}

// paths lists the method and path of every request an upstream received.
func paths(m *mockupstream.Server) []string {
	var out []string
	for _, r := range m.Requests() {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// A response created through the gateway is retrieved, listed, cancelled and deleted at the provider that
// created it — by the upstream's own id — and every such request is recorded at cost 0.
func TestStoredResponseReachesItsProvider(t *testing.T) {
	b, front, mockA, mockB := storedSetup(t)
	status, body := do(t, front, "POST", "/v1/responses", "client-key", `{"model":"resp-b","input":"hello"}`)
	if status != 200 {
		t.Fatalf("create: %d %s", status, body)
	}
	gid := jsonID(t, body, "id")
	pid, up, ok := decodeID(gid)
	if !ok || pid != 2 || !strings.HasPrefix(gid, "resp_tg2.") || !strings.HasPrefix(up, "resp_") {
		t.Fatalf("created id %q (provider %d, upstream %q), want a gateway id naming provider 2", gid, pid, up)
	}
	for _, tt := range []struct {
		method, sub, wantPath string
		wantID                bool
	}{
		{"GET", "", "/v1/responses/" + up, true},
		{"GET", "/input_items", "/v1/responses/" + up + "/input_items", false},
		{"POST", "/cancel", "/v1/responses/" + up + "/cancel", true},
		{"DELETE", "", "/v1/responses/" + up, true},
	} {
		status, body := do(t, front, tt.method, "/v1/responses/"+gid+tt.sub, "client-key", "")
		if status != 200 {
			t.Fatalf("%s %s: %d %s", tt.method, tt.sub, status, body)
		}
		if got := jsonID(t, body, "id"); tt.wantID && got != gid {
			t.Fatalf("%s %s answered id %q, want the gateway id %q", tt.method, tt.sub, got, gid)
		}
		reqs := paths(mockB)
		if last := reqs[len(reqs)-1]; last != tt.method+" "+tt.wantPath {
			t.Fatalf("provider q received %q, want %q", last, tt.method+" "+tt.wantPath)
		}
	}
	if got := paths(mockA); len(got) != 0 {
		t.Fatalf("provider p received %v, want nothing", got)
	}
	status, _ = do(t, front, "GET", "/v1/responses/"+gid, "client-key", "")
	if status != 404 {
		t.Fatalf("GET after DELETE: %d, want the provider's 404", status)
	}
	// A response of declared length reaches the client before its record is appended: the records of
	// consecutive requests may come in any order, so they are counted, not indexed.
	billed := 0
	for _, r := range records(t, b, 6) {
		if r.GetProviderId() != 2 || r.GetOperation() != "generate_content" || r.GetApiKeyId() != 4 {
			t.Fatalf("record provider %d op %s key %d, want provider 2 generate_content key 4", r.GetProviderId(), r.GetOperation(), r.GetApiKeyId())
		}
		if r.GetCost() != "0" {
			billed++
		}
	}
	if billed != 1 {
		t.Fatalf("%d billed records, want 1 (the creation; stored-resource requests cost 0)", billed)
	}
}

// A streamed creation hands out gateway ids in its events, and previous_response_id with such an id is
// decoded for the upstream (which checks it exists) and pins the request to that provider.
func TestStoredResponseFromStreamAndPreviousID(t *testing.T) {
	_, front, _, mockB := storedSetup(t)
	status, body := do(t, front, "POST", "/v1/responses", "client-key", `{"model":"resp-b","input":"hi","stream":true}`)
	if status != 200 {
		t.Fatalf("stream: %d %s", status, body)
	}
	var gid string
	for _, line := range strings.Split(body, "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"response.created"`) {
			gid = jsonID(t, data, "response")
		}
	}
	if _, _, ok := decodeID(gid); !ok || !strings.HasPrefix(gid, "resp_tg2.") {
		t.Fatalf("response.created id %q, want a gateway id naming provider 2; stream:\n%s", gid, body)
	}
	if !strings.Contains(body, `"type":"response.completed"`) || strings.Count(body, "resp_tg2.") < 3 {
		t.Fatalf("stream lost events or ids:\n%s", body)
	}
	status, body = do(t, front, "POST", "/v1/responses", "client-key", `{"model":"resp-b","input":"more","previous_response_id":"`+gid+`"}`)
	if status != 200 {
		t.Fatalf("follow-up: %d %s", status, body)
	}
	if got := jsonID(t, body, "previous_response_id"); got != gid {
		t.Fatalf("follow-up previous_response_id %q, want %q", got, gid)
	}
	_, up, _ := decodeID(gid)
	last := mockB.Requests()[len(mockB.Requests())-1]
	if !strings.Contains(last.Body, `"previous_response_id":"`+up+`"`) {
		t.Fatalf("upstream body %s, want the upstream id %s", last.Body, up)
	}
	// A model routed elsewhere cannot carry it.
	status, body = do(t, front, "POST", "/v1/responses", "client-key", `{"model":"resp-a","input":"more","previous_response_id":"`+gid+`"}`)
	if status != 400 || !strings.Contains(body, "previous_response_id") {
		t.Fatalf("previous id at another provider: %d %s, want 400 naming previous_response_id", status, body)
	}
}

// An id is not a way around the key's permissions: a key that may not use provider q gets 404 for a q id,
// as for an id the gateway never handed out, and q is never called.
func TestStoredIDNotForgeable(t *testing.T) {
	b, front, _, mockB := storedSetup(t)
	status, body := do(t, front, "POST", "/v1/responses", "client-key", `{"model":"resp-b","input":"hello"}`)
	if status != 200 {
		t.Fatalf("create: %d %s", status, body)
	}
	gid := jsonID(t, body, "id")
	before := len(mockB.Requests())
	for _, tt := range []struct{ key, id string }{
		{"narrow-key", gid},
		{"client-key", "resp_notfromthegateway"},
		{"client-key", "resp_tg9.abc"}, // no provider 9
		{"client-key", "resp_tg02.abc"},
	} {
		status, body := do(t, front, "GET", "/v1/responses/"+tt.id, tt.key, "")
		if status != 404 || !strings.Contains(body, "not_found") {
			t.Fatalf("%s GET %s: %d %s, want 404 not_found", tt.key, tt.id, status, body)
		}
	}
	if n := len(mockB.Requests()); n != before {
		t.Fatalf("provider q received %d requests for refused ids", n-before)
	}
	if got := len(records(t, b, 1)); got != 1 {
		t.Fatalf("%d records, want 1 (refused ids never reach dispatch)", got)
	}
}

// A conversation created without a model goes to the default provider (first route the key may use, by
// name, whose provider passes conversations through); its id then routes its sub-resources there.
func TestConversationWithoutModel(t *testing.T) {
	b, front, mockA, mockB := storedSetup(t)
	status, body := do(t, front, "POST", "/v1/conversations", "narrow-key", `{"metadata":{"topic":"x"}}`)
	if status != 200 {
		t.Fatalf("create: %d %s", status, body)
	}
	gid := jsonID(t, body, "id")
	pid, up, ok := decodeID(gid)
	if !ok || pid != 1 {
		t.Fatalf("conversation id %q, want one naming provider 1 (route resp-a, the narrow key's)", gid)
	}
	status, body = do(t, front, "POST", "/v1/conversations/"+gid+"/items", "narrow-key", `{"items":[{"type":"message","role":"user","content":"hi"}]}`)
	if status != 200 || !strings.Contains(body, `"object":"list"`) {
		t.Fatalf("items: %d %s", status, body)
	}
	status, body = do(t, front, "DELETE", "/v1/conversations/"+gid, "narrow-key", "")
	if status != 200 || jsonID(t, body, "id") != gid {
		t.Fatalf("delete: %d %s", status, body)
	}
	want := []string{"POST /v1/conversations", "POST /v1/conversations/" + up + "/items", "DELETE /v1/conversations/" + up}
	if got := paths(mockA); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("provider p received %v, want %v", got, want)
	}
	if got := paths(mockB); len(got) != 0 {
		t.Fatalf("provider q received %v", got)
	}
	for _, r := range records(t, b, 3) {
		if r.GetOperation() != "create_conversation" || r.GetProviderId() != 1 || r.GetCost() != "0" || r.GetHttpStatus() != 200 {
			t.Fatalf("record op %s provider %d cost %s status %d", r.GetOperation(), r.GetProviderId(), r.GetCost(), r.GetHttpStatus())
		}
	}
}

// FuzzStoredIDs: every upstream id round-trips through its gateway id, and decoding any string is safe
// and only accepts what encoding produces.
func FuzzStoredIDs(f *testing.F) {
	for _, s := range []string{"resp_abc", "conv_123", "abc", "tg1.x", "tg1.a_b", "a_tg1.b", "", "_", "resp_tg2.resp_x"} {
		f.Add(s, int64(3))
	}
	f.Fuzz(func(t *testing.T, id string, provider int64) {
		if provider > 0 {
			gid := string(encodeID(nil, provider, []byte(id)))
			p, up, ok := decodeID(gid)
			if !ok || p != provider || up != id {
				t.Fatalf("decodeID(%q) = %d %q %v, want %d %q", gid, p, up, ok, provider, id)
			}
		}
		if p, up, ok := decodeID(id); ok {
			if again := string(encodeID(nil, p, []byte(up))); again != id {
				t.Fatalf("decodeID(%q) = %d %q, which encodes to %q", id, p, up, again)
			}
		}
	})
}

func TestDecodeIDRefusesNonCanonical(t *testing.T) {
	for _, gid := range []string{"resp_tg+3.x", "resp_tg03.x", "resp_tg0.x", "resp_tg.x", "resp_tg3x", "tg-1.x", "resp_x_tg3.y"} {
		if p, up, ok := decodeID(gid); ok {
			t.Errorf("decodeID(%q) = %d %q, want refused", gid, p, up)
		}
	}
}

// FuzzBodyIDs: rewriting the ids of a JSON body keeps it valid JSON, and decoding a request body restores
// what encoding changed (previous_response_id, conversation) and pins the provider they name.
func FuzzBodyIDs(f *testing.F) {
	f.Add(`{"model":"m","previous_response_id":"resp_1","conversation":{"id":"conv_2"}}`, int64(4))
	f.Add(`{"conversation":"conv_tg2.x","input":"hi"}`, int64(1))
	f.Add(`{"object":"response","id":"resp_a","previous_response_id":null}`, int64(7))
	f.Fuzz(func(t *testing.T, body string, provider int64) {
		if provider <= 0 || !json.Valid([]byte(body)) {
			return
		}
		enc, changed := encodeBodyIDs(nil, []byte(body), provider)
		if !changed {
			return
		}
		if !json.Valid(enc) {
			t.Fatalf("encoded %s into invalid JSON %s", body, enc)
		}
		if storedObject([]byte(body)) {
			return // its top-level id is an answer's, not restored from requests
		}
		dec, pin, err := decodeBodyIDs(enc)
		if err != nil || pin != provider || string(dec) != body {
			t.Fatalf("decodeBodyIDs(%s) = %s %d %v, want %s %d", enc, dec, pin, err, body, provider)
		}
	})
}

// A stored response retrieved as a stream (?stream=true) is relayed as a stream whose events carry the
// gateway's ids, and recorded at cost 0 (its tokens were billed when it was created).
func TestStoredResponseReplayedAsStream(t *testing.T) {
	b, front, _, mockB := storedSetup(t)
	status, body := do(t, front, "POST", "/v1/responses", "client-key", `{"model":"resp-b","input":"hello"}`)
	if status != 200 {
		t.Fatalf("create: %d %s", status, body)
	}
	gid := jsonID(t, body, "id")
	_, up, _ := decodeID(gid)
	status, body = do(t, front, "GET", "/v1/responses/"+gid+"?stream=true", "client-key", "")
	if status != 200 || !strings.Contains(body, "event: response.completed") {
		t.Fatalf("replay: %d %s", status, body)
	}
	if strings.Count(body, `"id":"`+gid+`"`) != 2 || strings.Contains(body, `"id":"`+up+`"`) {
		t.Fatalf("replayed events do not carry the gateway id %s:\n%s", gid, body)
	}
	if last := mockB.Requests()[len(mockB.Requests())-1]; last.Path != "/v1/responses/"+up || last.Query != "stream=true" {
		t.Fatalf("upstream received %s?%s", last.Path, last.Query)
	}
	replays := 0
	for _, r := range records(t, b, 2) {
		if r.GetEndState() != "completed" {
			t.Fatalf("record end %s, want completed", r.GetEndState())
		}
		if r.GetTokens().GetOutput() == 0 {
			replays++
			if r.GetCost() != "0" {
				t.Fatalf("replay recorded cost %s, want 0", r.GetCost())
			}
		}
	}
	if replays != 1 {
		t.Fatalf("%d records without tokens, want 1 (the replay)", replays)
	}
}

// A request pinned by previous_response_id to a provider that refuses unpriced models is refused as
// unpriced (403 model_unpriced) when the route's model has no price there — not as if the provider did
// not serve the route — and no upstream is called, although another member of the route would serve it.
func TestPinnedRequestToUnpricedDenyProvider(t *testing.T) {
	mockB := mockupstream.New(mockupstream.Options{})
	upB := httptest.NewServer(mockB)
	t.Cleanup(upB.Close)
	_, front, mockA := setupMock(t, func(s *snapshotv1.Snapshot) {
		s.Providers = append(s.Providers, &configv1.Provider{Id: 2, Name: "q", ChannelType: "alpha", BaseUrl: upB.URL, Enabled: true,
			UnpricedPolicy: "deny", Credentials: []*configv1.Credential{{Id: 3, Secret: "s3", Weight: 1, Enabled: true}}})
		id := int64(100)
		for _, p := range []int64{1, 2} {
			for _, c := range [][2]string{{"generate_content", "alpha_responses"}, {"stream_generate_content", "alpha_responses"}} {
				id++
				s.RoutingRules = append(s.RoutingRules, &configv1.RoutingRule{Id: id, ProviderId: p, Operation: c[0], Kind: c[1],
					Implementation: "passthrough", Enabled: true})
			}
		}
		s.Routes = append(s.Routes,
			&configv1.Route{Id: 3, Name: "resp-b", Enabled: true, Members: []*configv1.RouteMember{{ProviderId: 2, UpstreamModelId: "m-1", Priority: 1, Weight: 1, Enabled: true}}},
			&configv1.Route{Id: 4, Name: "resp-free", Enabled: true, Members: []*configv1.RouteMember{
				{ProviderId: 1, UpstreamModelId: "free-1", Priority: 1, Weight: 1, Enabled: true},
				{ProviderId: 2, UpstreamModelId: "free-1", Priority: 2, Weight: 1, Enabled: true}}})
	})
	status, body := do(t, front, "POST", "/v1/responses", "client-key", `{"model":"resp-b","input":"hello"}`)
	if status != 200 {
		t.Fatalf("create at q: %d %s", status, body)
	}
	gid := jsonID(t, body, "id")
	seenA, seenB := len(mockA.Requests()), len(mockB.Requests())
	status, body = do(t, front, "POST", "/v1/responses", "client-key", `{"model":"resp-free","input":"more","previous_response_id":"`+gid+`"}`)
	if status != http.StatusForbidden || !strings.Contains(body, `"code":"model_unpriced"`) {
		t.Fatalf("pinned to q, unpriced there: %d %s, want 403 model_unpriced", status, body)
	}
	if a, b := len(mockA.Requests()), len(mockB.Requests()); a != seenA || b != seenB {
		t.Fatalf("upstreams called: p %d, q %d new requests, want none", a-seenA, b-seenB)
	}
	// Unpinned, the route falls through to p (policy allow), which serves it.
	if status, body = do(t, front, "POST", "/v1/responses", "client-key", `{"model":"resp-free","input":"more"}`); status != 200 {
		t.Fatalf("unpinned: %d %s, want 200 from p", status, body)
	}
}
