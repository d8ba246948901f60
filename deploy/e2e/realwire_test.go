package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	dpconfig "github.com/tollgate/tollgate/dataplane/config"
	"github.com/tollgate/tollgate/dataplane/settle"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/testkit"
	"github.com/tollgate/tollgate/shared/usage"
)

// rwInteraction is one line of ../shared/wire/realwire.jsonl.
type rwInteraction = testkit.Interaction

// rwUsage is the expected billed usage of the interaction, its tier aside (rwTier).
func rwUsage(x *rwInteraction) usage.Usage {
	u := x.Usage()
	u.ReportedTier = ""
	return u
}

// tier is the expected served tier, normalised like the settlement's (Vertex's trafficType names the
// tier with an ON_DEMAND prefix).
func rwTier(x *rwInteraction) string {
	if x.Expected.Tier == nil {
		return ""
	}
	t := strings.ToLower(*x.Expected.Tier)
	switch t {
	case "on_demand_flex":
		t = "flex"
	case "on_demand_priority":
		t = "priority"
	}
	return pricing.NormalizeTier(t)
}

// rwKinds are the generation kinds of the corpus, each served by a provider of its own (id = index + 1).
var rwKinds = []struct{ kind, channel string }{
	{"alpha_chat_completions", "alpha"}, {"alpha_responses", "alpha"}, {"beta_messages", "beta"}, {"gamma_generate_content", "gamma"},
}

func rwProviderOf(kind string) int64 {
	for i, k := range rwKinds {
		if k.kind == kind {
			return int64(i + 1)
		}
	}
	return 0
}

// rwPrices are distinct per category, so a token billed in the wrong category changes the cost.
var rwPrices = pricing.RuleInput{ID: 1, MatchType: "contains", ModelMatch: "rw-", InputPrice: "1", OutputPrice: "3",
	CacheReadPrice: "0.1", CacheCreation5mPrice: "1.25", CacheCreation30mPrice: "1.7", CacheCreation1hPrice: "2",
	ImageOutputPrice: "7", Enabled: true}

// rwSnapshot routes every interaction by its id (route name and upstream model) to the provider of its
// recorded dialect; each provider relays its own kind (passthrough) and translates the three others to it
// (transform_to), so one client request in any dialect reaches the recorded answer.
func rwSnapshot(corpus []*rwInteraction) func(base string) *snapshotv1.Snapshot {
	return func(base string) *snapshotv1.Snapshot {
		p := rwPrices
		s := &snapshotv1.Snapshot{
			Version: 1,
			BuiltAt: timestamppb.New(time.Unix(1760000000, 0)),
			PriceRules: []*configv1.PriceRule{{Id: p.ID, MatchType: p.MatchType, ModelMatch: p.ModelMatch, InputPrice: p.InputPrice,
				OutputPrice: p.OutputPrice, CacheReadPrice: p.CacheReadPrice, CacheCreation_5MPrice: p.CacheCreation5mPrice,
				CacheCreation_30MPrice: p.CacheCreation30mPrice, CacheCreation_1HPrice: p.CacheCreation1hPrice,
				ImageOutputPrice: p.ImageOutputPrice, Enabled: true}},
			ApiKeys: []*configv1.ApiKey{{Id: 1, UserId: 1, OrgId: 1, Name: "main", KeyHash: dpHash(dpKeyMain), Enabled: true}},
		}
		for i, k := range rwKinds {
			id := int64(i + 1)
			s.Providers = append(s.Providers, &configv1.Provider{Id: id, Name: "rw-" + k.kind, ChannelType: k.channel, BaseUrl: base,
				Enabled: true, Credentials: []*configv1.Credential{{Id: id * 10, ProviderId: id, Secret: "sk-" + k.kind, Weight: 1, Enabled: true}}})
			for _, client := range rwKinds {
				for _, op := range []string{"generate_content", "stream_generate_content"} {
					r := &configv1.RoutingRule{Id: int64(len(s.RoutingRules) + 1), ProviderId: id, Operation: op, Kind: client.kind,
						Implementation: "passthrough", Enabled: true}
					if client.kind != k.kind {
						r.Implementation, r.DestOperation, r.DestKind = "transform_to", proto.String(op), proto.String(k.kind)
					}
					s.RoutingRules = append(s.RoutingRules, r)
				}
			}
		}
		for i, x := range corpus {
			s.Routes = append(s.Routes, &configv1.Route{Id: int64(i + 1), Name: x.ID, Strategy: "priority", Enabled: true,
				Members: []*configv1.RouteMember{{ProviderId: rwProviderOf(x.Dialect), UpstreamModelId: x.ID, Priority: 1, Weight: 1, Enabled: true}}})
		}
		return s
	}
}

// rwReplay is the loopback upstream: it answers each request with the recorded answer of the interaction
// its model names (the gamma path's model, else the body's "model"), status, content type and body bytes
// verbatim.
type rwReplay struct {
	byID map[string]*rwInteraction
}

func (r *rwReplay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var model string
	if rest, ok := strings.CutPrefix(req.URL.Path, "/v1beta/models/"); ok {
		model, _, _ = strings.Cut(rest, ":")
	} else {
		var m struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(body, &m)
		model = m.Model
	}
	x := r.byID[model]
	if x == nil {
		http.Error(w, fmt.Sprintf("no recorded interaction %q (%s)", model, req.URL.Path), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", x.Headers["content-type"])
	w.WriteHeader(x.Status)
	_, _ = io.WriteString(w, x.ResponseBody)
}

// rwCase is one replayed request: an interaction asked for in a client dialect.
type rwCase struct {
	x      *rwInteraction
	client string // the client's kind; x.Dialect for passthrough
	status int
	body   []byte
	reqID  string
	err    error
}

func (c *rwCase) passthrough() bool { return c.client == c.x.Dialect }

// request builds the client request: the recorded request under the route's name for passthrough, a
// minimal request of the client's dialect for a translation.
func (c *rwCase) request(base string) (*http.Request, error) {
	x := c.x
	var path string
	var body []byte
	switch c.client {
	case "gamma_generate_content":
		path = "/v1beta/models/" + x.ID + ":generateContent"
		if x.Stream {
			path = "/v1beta/models/" + x.ID + ":streamGenerateContent?alt=sse"
		}
		body = []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
		if c.passthrough() {
			body = x.Request
		}
	default:
		var m map[string]json.RawMessage
		switch c.client {
		case "alpha_chat_completions":
			path = "/v1/chat/completions"
			m = map[string]json.RawMessage{"messages": json.RawMessage(`[{"role":"user","content":"hi"}]`)}
			if x.Stream {
				m["stream_options"] = json.RawMessage(`{"include_usage":true}`)
			}
		case "alpha_responses":
			path = "/v1/responses"
			m = map[string]json.RawMessage{"input": json.RawMessage(`"hi"`)}
		case "beta_messages":
			path = "/v1/messages"
			m = map[string]json.RawMessage{"max_tokens": json.RawMessage(`1024`),
				"messages": json.RawMessage(`[{"role":"user","content":"hi"}]`)}
		}
		if x.Stream {
			m["stream"] = json.RawMessage(`true`)
		}
		if c.passthrough() {
			m = nil
			if err := json.Unmarshal(x.Request, &m); err != nil {
				return nil, fmt.Errorf("recorded request: %w", err)
			}
		}
		m["model"], _ = json.Marshal(x.ID)
		var err error
		if body, err = json.Marshal(m); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequest("POST", base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+dpKeyMain)
	req.Header.Set("anthropic-version", "2023-06-01")
	return req, nil
}

func (c *rwCase) run(base string) {
	req, err := c.request(base)
	if err != nil {
		c.err = err
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.err = err
		return
	}
	defer resp.Body.Close()
	c.status, c.reqID = resp.StatusCode, resp.Header.Get("X-Request-Id")
	c.body, c.err = io.ReadAll(resp.Body)
}

// TestRealWireBilledExactly replays every recorded interaction of ../shared/wire/realwire.jsonl through a
// real data plane on loopback in front of an upstream that serves the recorded answers byte for byte:
// once in its own dialect (passthrough: the client gets the upstream's bytes) and once from each other
// client dialect (transform_to the recorded one). Every settlement record must bill exactly the
// interaction's expected token categories and served tier, at the cost the price rule gives them.
func TestRealWireBilledExactly(t *testing.T) {
	corpus := testkit.Corpus(t)
	if len(corpus) != 1170 {
		t.Fatalf("corpus has %d interactions, want the 1,170 its README describes", len(corpus))
	}
	replay := &rwReplay{byID: map[string]*rwInteraction{}}
	for _, x := range corpus {
		replay.byID[x.ID] = x
	}
	e := dpStartWith(t, replay, rwSnapshot(corpus), func(c *dpconfig.Config) {
		c.MaxBodyBytes = 16 << 20
		c.UpstreamResponseTimeout = 10 * time.Second
		c.LogLevel = "warn" // a line per request would bury the findings
	})

	var cases []*rwCase
	for _, x := range corpus {
		cases = append(cases, &rwCase{x: x, client: x.Dialect})
		for _, k := range rwKinds {
			if k.kind != x.Dialect {
				cases = append(cases, &rwCase{x: x, client: k.kind})
			}
		}
	}
	work := make(chan *rwCase)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				c.run(e.url)
			}
		}()
	}
	for _, c := range cases {
		work <- c
	}
	close(work)
	wg.Wait()

	recs := rwRecords(t, e, len(cases))
	rule, err := pricing.ParseRule(rwPrices)
	if err != nil {
		t.Fatal(err)
	}
	type cell struct {
		dialect, client string
		stream          bool
	}
	exact, total := map[cell]int{}, map[cell]int{}
	for _, c := range cases {
		k := cell{c.x.Dialect, c.client, c.x.Stream}
		total[k]++
		if msg := c.check(recs[c.reqID], rule); msg != "" {
			t.Errorf("%s from %s: %s", c.x.ID, c.client, msg)
			continue
		}
		exact[k]++
	}
	var keys []cell
	for k := range total {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.client == a.dialect || b.client == b.dialect {
			if (a.client == a.dialect) != (b.client == b.dialect) {
				return a.client == a.dialect
			}
		}
		return fmt.Sprint(a) < fmt.Sprint(b)
	})
	var pass, passTotal, tr, trTotal int
	for _, k := range keys {
		how := "passthrough"
		if k.client != k.dialect {
			how = "from " + k.client
			tr, trTotal = tr+exact[k], trTotal+total[k]
		} else {
			pass, passTotal = pass+exact[k], passTotal+total[k]
		}
		mode := "plain"
		if k.stream {
			mode = "stream"
		}
		t.Logf("%-24s %-6s %-30s %4d/%4d billed exactly", k.dialect, mode, how, exact[k], total[k])
	}
	t.Logf("passthrough: %d/%d billed exactly; transform_to: %d/%d billed exactly", pass, passTotal, tr, trTotal)
}

// rwStoredID is a stored-resource id as the gateway hands it out: the id of the response or conversation
// with the provider that holds it ("resp_abc" from provider 2 is "resp_tg2.abc").
var rwStoredID = regexp.MustCompile(`"(resp|conv)_tg2\.`)

// relayed is the passthrough answer with the gateway's one documented rewrite undone: an alpha response's
// and conversation's ids name the provider that stored them (docs/dataplane.md "Stored resources").
func (c *rwCase) relayed() string {
	if c.client != "alpha_responses" {
		return string(c.body)
	}
	return rwStoredID.ReplaceAllString(string(c.body), `"${1}_`)
}

// check compares the case's answer and settlement record with the interaction; "" when exact.
func (c *rwCase) check(rec *settlementv1.SettlementRecord, rule *pricing.Rule) string {
	x := c.x
	switch {
	case c.err != nil:
		return c.err.Error()
	case c.status != http.StatusOK:
		return fmt.Sprintf("status %d: %.300s", c.status, c.body)
	case c.passthrough() && c.relayed() != x.ResponseBody:
		return fmt.Sprintf("passthrough relayed %d bytes that differ from the upstream's %d", len(c.body), len(x.ResponseBody))
	case !c.passthrough() && !x.Stream && !json.Valid(c.body):
		return fmt.Sprintf("translated answer is not JSON: %.300s", c.body)
	case rec == nil:
		return "no settlement record for request " + c.reqID
	}
	want := rwUsage(x)
	tk := rec.GetTokens()
	got := usage.Usage{Input: tk.GetInput(), Output: tk.GetOutput(), CacheRead: tk.GetCacheRead(), CacheCreation5m: tk.GetCacheCreation_5M(),
		CacheCreation30m: tk.GetCacheCreation_30M(), CacheCreation1h: tk.GetCacheCreation_1H(), ImageOutput: tk.GetImageOutput()}
	if got != want {
		return fmt.Sprintf("billed %+v, want %+v (source %s, end %s)", got, want, rec.GetSource(), rec.GetEndState())
	}
	if rec.GetSource() != "upstream" || rec.GetEndState() != "completed" {
		return fmt.Sprintf("source %s end %s, want upstream completed", rec.GetSource(), rec.GetEndState())
	}
	if got, want := pricing.NormalizeTier(rec.GetReportedTier()), rwTier(x); got != want {
		return fmt.Sprintf("reported tier %q, want %q", got, want)
	}
	wantCost := pricing.FormatDecimal(rule.Quote(want, rwTier(x)).Cost)
	if rec.GetCost() != wantCost {
		return fmt.Sprintf("cost %s, want %s", rec.GetCost(), wantCost)
	}
	return ""
}

// rwRecords waits (up to 30 s) until the outbox holds n settlement records and returns them by request id.
func rwRecords(t *testing.T, e *dpEnv, n int) map[string]*settlementv1.SettlementRecord {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		msgs, err := e.rdb.XRange(t.Context(), settle.Streams{Prefix: e.prefix}.Outbox(""), "-", "+").Result()
		if err != nil {
			t.Fatalf("read outbox: %v", err)
		}
		// A record Redis did not take in time was spilled and delivered straight to the control plane: it is
		// among the records offered to the fake control plane, not in the outbox.
		out := e.cp.offeredRecords()
		inOutbox := make(map[string]bool, len(msgs))
		for _, m := range msgs {
			rec, _, err := settle.DecodeEntry(m.Values)
			if err != nil {
				t.Fatalf("decode outbox entry: %v", err)
			}
			if inOutbox[rec.GetRequestId()] {
				t.Errorf("request %s settled twice", rec.GetRequestId())
			}
			inOutbox[rec.GetRequestId()] = true
			out[rec.GetRequestId()] = rec
		}
		if len(out) >= n || time.Now().After(deadline) {
			if len(out) != n {
				t.Errorf("%d settlement records (%d in the outbox), want %d", len(out), len(msgs), n)
			}
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}
