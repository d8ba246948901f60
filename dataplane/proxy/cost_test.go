package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// costCells serves every dialect from provider 1 by passthrough and, from provider 2 (route "chat-t"), by
// transform_to into another dialect; the price rule has distinct rates per category, so a cost computed
// from the wrong usage or tier differs from the record's.
func costCells(s *snapshotv1.Snapshot) {
	pr := s.PriceRules[0]
	pr.InputPrice, pr.OutputPrice, pr.CacheReadPrice, pr.CacheCreation_5MPrice = "3.1", "15.7", "0.31", "3.9"
	pr.Version = 5
	s.Providers = append(s.Providers, &configv1.Provider{Id: 2, Name: "t", ChannelType: "alpha", BaseUrl: s.Providers[0].BaseUrl, Enabled: true,
		Credentials: []*configv1.Credential{{Id: 3, Secret: "s3", Weight: 1, Enabled: true}}})
	s.Routes = append(s.Routes, &configv1.Route{Id: 2, Name: "chat-t", Enabled: true,
		Members: []*configv1.RouteMember{{ProviderId: 2, UpstreamModelId: "m-1", Priority: 1, Weight: 1, Enabled: true}}})
	// provider 3 (route "chat-b"): streams synthesised from a buffered upstream (stream → generate_content).
	s.Providers = append(s.Providers, &configv1.Provider{Id: 3, Name: "b", ChannelType: "alpha", BaseUrl: s.Providers[0].BaseUrl, Enabled: true,
		Credentials: []*configv1.Credential{{Id: 4, Secret: "s4", Weight: 1, Enabled: true}}})
	s.Routes = append(s.Routes, &configv1.Route{Id: 3, Name: "chat-b", Enabled: true,
		Members: []*configv1.RouteMember{{ProviderId: 3, UpstreamModelId: "m-1", Priority: 1, Weight: 1, Enabled: true}}})
	id := int64(100)
	for _, op := range []string{"generate_content", "stream_generate_content"} {
		for _, c := range []struct{ kind, dest string }{
			{"alpha_chat_completions", "beta_messages"}, {"alpha_responses", "alpha_chat_completions"},
			{"beta_messages", "gamma_generate_content"}, {"gamma_generate_content", "alpha_chat_completions"},
		} {
			dop, dest := op, c.dest
			id += 2
			if c.kind != "alpha_chat_completions" {
				s.RoutingRules = append(s.RoutingRules, &configv1.RoutingRule{Id: id, ProviderId: 1, Operation: op, Kind: c.kind,
					Implementation: "passthrough", Enabled: true})
			}
			s.RoutingRules = append(s.RoutingRules, &configv1.RoutingRule{Id: id + 1, ProviderId: 2, Operation: op, Kind: c.kind,
				Implementation: "transform_to", DestOperation: &dop, DestKind: &dest, Enabled: true})
			buf := "generate_content"
			s.RoutingRules = append(s.RoutingRules, &configv1.RoutingRule{Id: id + 1000, ProviderId: 3, Operation: op, Kind: c.kind,
				Implementation: "transform_to", DestOperation: &buf, DestKind: &dest, Enabled: true})
		}
	}
}

// costRequest is one request of each dialect, plain or streamed, for a model.
func costRequest(dialect string, stream bool, model string) (path, body string) {
	st := ""
	if stream {
		st = `"stream":true,`
	}
	switch dialect {
	case "alpha_chat":
		return "/v1/chat/completions", `{"model":"` + model + `",` + st + `"messages":[{"role":"user","content":"what does it cost?"}]}`
	case "alpha_responses":
		return "/v1/responses", `{"model":"` + model + `",` + st + `"input":"what does it cost?"}`
	case "beta":
		return "/v1/messages", `{"model":"` + model + `",` + st + `"max_tokens":300,"messages":[{"role":"user","content":"what does it cost?"}]}`
	}
	if stream && dialect == "gamma_array" {
		return "/v1beta/models/" + model + ":streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"what does it cost?"}]}]}`
	}
	if stream {
		return "/v1beta/models/" + model + ":streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"what does it cost?"}]}]}`
	}
	return "/v1beta/models/" + model + ":generateContent", `{"contents":[{"role":"user","parts":[{"text":"what does it cost?"}]}]}`
}

// checkCostFields asserts the five cost fields (headers or trailers) are the record's.
func checkCostFields(t *testing.T, where string, h http.Header, r *settlementv1.SettlementRecord) {
	t.Helper()
	tier := r.GetReportedTier()
	if tier == "" {
		tier = r.GetRequestedTier()
	}
	want := map[string]string{hdrCost: r.GetCost(), hdrRule: itoa64(r.GetPriceRuleId()), hdrRuleVersion: itoa64(r.GetPriceRuleVersion()),
		hdrTier: tier, hdrSource: r.GetSource()}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s %s = %q, want the record's %q", where, k, got, v)
		}
	}
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

// Every answer of every dialect, plain and streamed, passthrough and transform_to, tells the cost its record
// is priced at: plain answers in headers, streams that asked in trailers; the value is the record's exactly.
func TestCostHeadersEqualRecord(t *testing.T) {
	for _, cell := range []struct{ name, model string }{{"passthrough", "chat"}, {"transform_to", "chat-t"}, {"synthesised", "chat-b"}} {
		for _, dialect := range []string{"alpha_chat", "alpha_responses", "beta", "gamma", "gamma_array"} {
			for _, stream := range []bool{false, true} {
				if dialect == "gamma_array" && !stream {
					continue
				}
				name := cell.name + "/" + dialect + "/plain"
				if stream {
					name = cell.name + "/" + dialect + "/stream"
				}
				t.Run(name, func(t *testing.T) {
					b, front, _ := setupMock(t, costCells)
					path, body := costRequest(dialect, stream, cell.model)
					hdr := map[string]string{"x-mock-usage": "cached", "x-mock-chunks": "4"}
					if stream {
						hdr[hdrIncludeCost] = "true"
					}
					if dialect == "beta" {
						hdr["anthropic-version"] = "2023-06-01"
					}
					resp := postTo(t, front, path, body, hdr)
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != 200 {
						t.Fatalf("client got %d %.300s (%v)", resp.StatusCode, got, err)
					}
					r := oneRecord(t, b)
					if r.GetCost() == "0" || r.GetPriceRuleId() != 9 || r.GetPriceRuleVersion() != 5 {
						t.Fatalf("record cost %s rule %d v%d: the test needs a priced record", r.GetCost(), r.GetPriceRuleId(), r.GetPriceRuleVersion())
					}
					if !stream {
						checkCostFields(t, "header", resp.Header, r)
						if resp.Header.Get("Trailer") != "" || len(resp.Trailer) != 0 {
							t.Errorf("a whole plain answer declares trailers %v", resp.Trailer)
						}
						return
					}
					if resp.Header.Get(hdrCost) != "" {
						t.Errorf("a stream's headers carry a cost before its usage is known: %q", resp.Header.Get(hdrCost))
					}
					checkCostFields(t, "trailer", resp.Trailer, r)
					// The final usage event carries the same amount, as a number and in the tollgate object.
					members := `"cost":` + r.GetCost() + `,"tollgate":{"cost":"` + r.GetCost() + `","price_rule_id":9,"price_rule_version":5,`
					if n := strings.Count(string(got), members); n != 1 {
						t.Fatalf("the stream carries the cost members %d times, want once in its final usage event:\n%s", n, got)
					}
					if !strings.Contains(string(got), `"request_id":"`+r.GetRequestId()+`"}`) {
						t.Errorf("the tollgate object does not name the request id")
					}
					checkFinalEvent(t, dialect, string(got), members)
				})
			}
		}
	}
}

// A stream whose client did not ask carries no cost (no trailers, no headers); a key whose costs are not
// disclosed gets no cost fields on any answer, nor stream trailers when it asks.
func TestCostNotToldUnlessAskedAndDisclosed(t *testing.T) {
	b, front, _ := setupMock(t, costCells)
	path, body := costRequest("beta", true, "chat")
	resp := postTo(t, front, path, body, map[string]string{"anthropic-version": "2023-06-01"})
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Trailer") != "" || len(resp.Trailer) != 0 || resp.Header.Get(hdrCost) != "" {
		t.Errorf("a stream that did not ask carries cost fields: header %v trailer %v", resp.Header, resp.Trailer)
	}
	_ = oneRecord(t, b)

	off := func(s *snapshotv1.Snapshot) { s.GatewaySettings = &configv1.GatewaySettings{CostDisclosure: false} }
	for _, stream := range []bool{false, true} {
		b, front, _ := setupMock(t, costCells, off)
		path, body := costRequest("alpha_chat", stream, "chat")
		resp := postTo(t, front, path, body, map[string]string{hdrIncludeCost: "1"})
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		for k := range resp.Header {
			if strings.HasPrefix(k, "X-Tollgate-") {
				t.Errorf("stream=%v: cost disclosure off, header %s present", stream, k)
			}
		}
		if len(resp.Trailer) != 0 {
			t.Errorf("stream=%v: cost disclosure off, trailers %v", stream, resp.Trailer)
		}
		if r := oneRecord(t, b); r.GetCost() == "0" {
			t.Error("record not priced")
		}
	}
}

// A refusal after dispatch (the upstream's 400, every candidate failing) has a record too: its answer tells
// cost 0, source none, as the record says.
func TestCostHeadersOnRefusals(t *testing.T) {
	for name, mock := range map[string]string{"upstream 400": "400", "all failed": "503"} {
		t.Run(name, func(t *testing.T) {
			b, front, _ := setupMock(t, costCells)
			path, body := costRequest("alpha_chat", false, "chat")
			resp := postTo(t, front, path, body, map[string]string{"x-mock-status": mock})
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			r := oneRecord(t, b)
			checkCostFields(t, "header", resp.Header, r)
			if resp.Header.Get(hdrCost) != "0" || resp.Header.Get(hdrSource) != "none" {
				t.Errorf("refusal cost %q source %q, want 0 none", resp.Header.Get(hdrCost), resp.Header.Get(hdrSource))
			}
		})
	}
}

// A plain answer beyond the hold bound has its headers sent before its usage is known: the cost comes as
// trailers, the record's.
func TestCostTrailersBeyondHoldBound(t *testing.T) {
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"chat.completion","choices":[{"message":{"content":"`+strings.Repeat("x", 200)+`"}}],`)
		w.(http.Flusher).Flush()
		time.Sleep(50 * time.Millisecond) // the first part is read alone, beyond the bound
		_, _ = io.WriteString(w, `"usage":{"prompt_tokens":12,"completion_tokens":7}}`)
	}, costCells)
	b.h.o.HoldAnswerBytes = 64
	front := httptest.NewServer(b.h)
	t.Cleanup(front.Close)
	path, body := costRequest("alpha_chat", false, "chat")
	resp := postTo(t, front, path, body, nil)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(got), `"usage"`) {
		t.Fatalf("client got %d %.200s", resp.StatusCode, got)
	}
	if resp.Header.Get(hdrCost) != "" {
		t.Fatalf("headers carry a cost before the usage is known")
	}
	r := oneRecord(t, b)
	if r.GetCost() == "0" {
		t.Fatal("record not priced")
	}
	checkCostFields(t, "trailer", resp.Trailer, r)
}

// checkFinalEvent asserts the cost members sit in the dialect's final usage event (docs/cost.md's table).
func checkFinalEvent(t *testing.T, dialect, stream, members string) {
	t.Helper()
	at := strings.Index(stream, members)
	// the event (SSE) or element (array) holding the members
	start := strings.LastIndex(stream[:at], "data: ")
	if dialect == "gamma_array" {
		start = max(strings.LastIndex(stream[:at], "\n{"), 0)
	}
	end := strings.Index(stream[at:], "\n\n")
	if end < 0 || dialect == "gamma_array" {
		end = len(stream) - at
	}
	ev := stream[start : at+end]
	var want string
	switch dialect {
	case "alpha_chat":
		want = `"choices":[]`
	case "alpha_responses":
		want = `"type":"response.completed"`
	case "beta":
		want = `"type":"message_delta"`
	default:
		want = `"finishReason"`
	}
	if !strings.Contains(ev, want) {
		t.Fatalf("the cost members are not in the final usage event (%s):\n%s", want, ev)
	}
	for _, key := range []string{`"usage":{`, `"usageMetadata":{`} {
		if i := strings.Index(ev, key); i >= 0 && i < strings.Index(ev, members) {
			return
		}
	}
	t.Fatalf("the cost members are not inside the usage object:\n%s", ev)
}

// A stream whose client did not ask for its cost is the upstream's bytes, exactly (cost disclosure on).
// (alpha responses streams have their stored ids rewritten whether or not; alpha chat's gateway-requested
// usage chunk is left out: both as before.)
func TestStreamNotAskedIsByteIdentical(t *testing.T) {
	for _, dialect := range []string{"beta", "gamma", "gamma_array"} {
		t.Run(dialect, func(t *testing.T) {
			_, front, mock := setupMock(t, costCells)
			path, body := costRequest(dialect, true, "chat")
			hdr := map[string]string{"anthropic-version": "2023-06-01", "x-mock-usage": "cached", "x-mock-chunks": "5"}
			resp := postTo(t, front, path, body, hdr)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			upPath, upBody := costRequest(dialect, true, "m-1")
			srv := httptest.NewServer(mock)
			defer srv.Close()
			direct := postTo(t, srv, upPath, upBody, hdr)
			want, _ := io.ReadAll(direct.Body)
			direct.Body.Close()
			if string(got) != string(want) || len(got) == 0 {
				t.Fatalf("the client's stream differs from the upstream's:\ngot  %q\nwant %q", got, want)
			}
		})
	}
}

// OpenRouter's "usage": {"include": true} asks an alpha chat stream for its usage chunk and, when costs are
// shown, its cost there; the member never reaches the upstream. With disclosure off the chunk comes without.
func TestUsageIncludeAlphaChat(t *testing.T) {
	body := `{"model":"MODEL","stream":true,"usage":{"include":true},"messages":[{"role":"user","content":"what does it cost?"}]}`
	for _, tc := range []struct {
		name, model string
		disclose    bool
	}{{"passthrough", "chat", true}, {"transform_to", "chat-t", true}, {"passthrough off", "chat", false}} {
		t.Run(tc.name, func(t *testing.T) {
			mutate := []func(*snapshotv1.Snapshot){costCells}
			if !tc.disclose {
				mutate = append(mutate, func(s *snapshotv1.Snapshot) { s.GatewaySettings = &configv1.GatewaySettings{CostDisclosure: false} })
			}
			b, front, mock := setupMock(t, mutate...)
			resp := postTo(t, front, "/v1/chat/completions", strings.Replace(body, "MODEL", tc.model, 1), nil)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			r := oneRecord(t, b)
			if !strings.Contains(string(got), `"choices":[],`) {
				t.Fatalf("no usage chunk:\n%s", got)
			}
			hasCost := strings.Contains(string(got), `"cost":`+r.GetCost()+`,"tollgate":{`)
			if hasCost != tc.disclose {
				t.Fatalf("cost members present=%v, want %v:\n%s", hasCost, tc.disclose, got)
			}
			if sent := mock.Requests()[0].Body; strings.Contains(sent, `"include":true`) || strings.Contains(sent, `"usage"`) {
				t.Fatalf("the usage member reached the upstream: %s", sent)
			}
		})
	}
}

// An upstream's own X-Tollgate-* cost headers never reach the client: only the gateway says what is charged.
func TestUpstreamCostHeadersDropped(t *testing.T) {
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(hdrCost, "999")
		w.Header().Set(hdrSource, "forged")
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n")
	})
	rec := b.post(t, `{"model":"chat","stream":true}`)
	if rec.Header().Get(hdrCost) != "" || rec.Header().Get(hdrSource) != "" {
		t.Fatalf("the upstream's cost headers reached the client: %v", rec.Header())
	}
}
