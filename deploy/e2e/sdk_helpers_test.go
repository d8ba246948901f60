package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	openai "github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/openai/openai-go/responses"
	"github.com/openai/openai-go/shared"
	"google.golang.org/genai"

	dpconfig "github.com/tollgate/tollgate/dataplane/config"
	"github.com/tollgate/tollgate/deploy/mockupstream"
)

// sdkKeepalive is the data plane's keepalive period in the SDK tests, and sdkLatency the mock's latency on
// buffered upstreams: several keepalives reach the client before the synthesised stream.
const (
	sdkKeepalive = 40 * time.Millisecond
	sdkLatency   = 320 // ms
)

// sdkStack is a real control plane (storetest Postgres), a real data plane (Redis under a unique prefix)
// and the mock upstream, configured through the admin REST API.
type sdkStack struct {
	*stack        // its database holds the usage rows
	url    string // the data plane's base URL
	key    string // the gateway API key
	rec    *sdkRecorder
}

// sdkRule is a routing rule as the admin API reads and writes it.
type sdkRule struct {
	ID             int64   `json:"id,omitempty"`
	Operation      string  `json:"operation"`
	Kind           string  `json:"kind"`
	Implementation string  `json:"implementation"`
	DestOperation  *string `json:"dest_operation,omitempty"`
	DestKind       *string `json:"dest_kind,omitempty"`
	SortOrder      int32   `json:"sort_order"`
	Enabled        *bool   `json:"enabled,omitempty"`
}

var sdkGenerationKinds = map[string]bool{"alpha_chat_completions": true, "alpha_responses": true,
	"beta_messages": true, "gamma_generate_content": true}

// sdkStart assembles the stack. Providers (default routing cells, seeded by the control plane): sdk-alpha,
// sdk-beta, sdk-gamma; and sdk-<channel>-buf whose stream_generate_content cells all buffer the upstream
// (transform_to generate_content, the same destination kind as the default cell, or the inbound kind for
// passthrough cells). One route per provider, named after it, and one key without limits.
func sdkStart(t *testing.T) *sdkStack {
	t.Helper()
	s := newStackWith(t, func(s *stack) {
		s.prefix = redisPrefix(t, "test:sdk:")
		s.dpEnv = map[string]string{"TOLLGATE_NODE_ID": "dp-sdk"}
		s.dpTweak = func(cfg *dpconfig.Config) {
			cfg.KeepaliveInterval = sdkKeepalive
			cfg.UpstreamResponseTimeout = 10 * time.Second
			cfg.ShutdownTimeout = 2 * time.Second
		}
	})
	c, p := s.c, s.controlPlane()

	models := map[string]string{"alpha": "m-1", "beta": "b-1", "gamma": "g-1-flash"}
	for _, ch := range []string{"alpha", "beta", "gamma"} {
		for _, buffered := range []bool{false, true} {
			name := "sdk-" + ch
			if buffered {
				name += "-buf"
			}
			var prov struct {
				ID int64 `json:"id"`
			}
			c.admin(t, p, "POST", "/admin/providers", map[string]any{"name": name, "channel_type": ch, "base_url": s.mockURL}, &prov, http.StatusCreated)
			c.admin(t, p, "POST", fmt.Sprintf("/admin/providers/%d/credentials", prov.ID), map[string]any{"secret": "sk-" + name}, nil, http.StatusCreated)
			if buffered {
				var rules struct {
					Items []sdkRule `json:"items"`
				}
				c.admin(t, p, "GET", fmt.Sprintf("/admin/providers/%d/routing-rules", prov.ID), nil, &rules, http.StatusOK)
				var changed []sdkRule
				for _, r := range rules.Items {
					if r.Operation != "stream_generate_content" || !sdkGenerationKinds[r.Kind] {
						continue
					}
					dest := r.Kind
					if r.Implementation == "transform_to" && r.DestKind != nil {
						dest = *r.DestKind
					}
					op := "generate_content"
					r.Implementation, r.DestOperation, r.DestKind = "transform_to", &op, &dest
					changed = append(changed, r)
				}
				if len(changed) != 4 {
					t.Fatalf("provider %s: %d stream_generate_content generation cells, want 4: %+v", name, len(changed), rules.Items)
				}
				c.admin(t, p, "PUT", fmt.Sprintf("/admin/providers/%d/routing-rules", prov.ID), map[string]any{"rules": changed}, nil, http.StatusOK)
			}
			c.admin(t, p, "POST", "/admin/routes", map[string]any{"name": name, "members": []map[string]any{
				{"provider_id": prov.ID, "upstream_model_id": models[ch], "priority": 1}}}, nil, http.StatusCreated)
		}
	}
	var org, user struct {
		ID int64 `json:"id"`
	}
	c.admin(t, p, "POST", "/admin/orgs", map[string]any{"name": "sdk-org"}, &org, http.StatusCreated)
	c.admin(t, p, "POST", "/admin/users", map[string]any{"org_id": org.ID, "name": "sdk-user"}, &user, http.StatusCreated)
	var key struct {
		Key string `json:"key"`
	}
	c.admin(t, p, "POST", "/admin/api-keys", map[string]any{"user_id": user.ID, "name": "sdk-key", "allowed_models": []string{}}, &key, http.StatusCreated)
	if key.Key == "" {
		t.Fatal("the admin API answered no key")
	}
	s.sync(t)
	return &sdkStack{stack: s, url: "http://" + s.dp.srv.Addr(), key: key.Key, rec: &sdkRecorder{bodies: map[string]*bytes.Buffer{}}}
}

// sdkCaseHeader tags every SDK request so that the mock's record and the raw client stream of one case
// can be found while cases run in parallel (the data plane forwards it upstream).
const sdkCaseHeader = "X-Sdk-Case"

// upstream returns the mock's last record of a case.
func (s *sdkStack) upstream(t *testing.T, caseID string) mockupstream.Request {
	t.Helper()
	recs := s.mock.Requests()
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Header.Get(sdkCaseHeader) == caseID {
			return recs[i]
		}
	}
	t.Fatalf("the mock received no request for case %s", caseID)
	return mockupstream.Request{}
}

// sdkRecorder is the SDKs' HTTP transport: it keeps a copy of every response body (what the client read,
// byte for byte) by case id, so the tests can see the keepalives the SDKs skipped.
type sdkRecorder struct {
	mu     sync.Mutex
	bodies map[string]*bytes.Buffer
}

func (r *sdkRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	id := req.Header.Get(sdkCaseHeader)
	if id == "" {
		return resp, nil
	}
	buf := &bytes.Buffer{}
	r.mu.Lock()
	r.bodies[id] = buf
	r.mu.Unlock()
	resp.Body = &sdkTeeBody{rc: resp.Body, r: r, buf: buf}
	return resp, nil
}

// raw returns the response body the client read for a case.
func (r *sdkRecorder) raw(caseID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.bodies[caseID]; b != nil {
		return b.String()
	}
	return ""
}

type sdkTeeBody struct {
	rc  io.ReadCloser
	r   *sdkRecorder
	buf *bytes.Buffer
}

func (b *sdkTeeBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.r.mu.Lock()
		b.buf.Write(p[:n])
		b.r.mu.Unlock()
	}
	return n, err
}

func (b *sdkTeeBody) Close() error { return b.rc.Close() }

func (s *sdkStack) httpClient() *http.Client {
	return &http.Client{Transport: s.rec, Timeout: 20 * time.Second}
}

// sdkCall is one tool call as an SDK parsed it.
type sdkCall struct {
	ID   string
	Name string
	Args map[string]any
	Raw  string // the arguments as the SDK received them (JSON text; "" for genai, which decodes them)
}

// sdkResult is what an SDK made of a response or stream, in common terms.
type sdkResult struct {
	Text   string
	Calls  []sdkCall
	Finish string
	// Usage as the client dialect reports it: prompt/input, completion/output/candidates, total.
	In, Out, Total int64
	HasUsage       bool
	Reasoning      int64  // reasoning tokens as the dialect details them
	Thinking       string // reasoning text the SDK exposes (beta thinking, gamma thoughts, responses summaries)
	// Raw is the SDK's own answer, to continue the conversation: openai.ChatCompletionMessage,
	// *responses.Response, anthropic.Message or *genai.Content.
	Raw any
}

func sdkParseArgs(raw string) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, fmt.Errorf("tool arguments %q are not a JSON object: %w", raw, err)
	}
	return m, nil
}

// sdkSchema is the declared tool's parameters: the mock answers {"city":"mock","days":1}.
func sdkSchema() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string", "description": "city name"},
		"days": map[string]any{"type": "integer"},
	}, "required": []string{"city"}}
}

const (
	sdkToolName   = "get_weather"
	sdkPrompt     = "What is the weather in Oslo?"
	sdkTextTokens = 8 // the mock's default answer: 8 words, one token each
)

// sdkToolTokens is the mock's output count of a tool call: ceil((len(name)+len(args))/4).
var sdkToolTokens = int64((len(sdkToolName) + len(`{"city":"mock","days":1}`) + 3) / 4)

// sdkWant is what a case must show; Finish is the client dialect's value.
type sdkWant struct {
	tool   bool
	noID   bool // the client dialect has optional call ids (gamma)
	finish string
	// out is the output count the client must see; in is read from the mock's record of the upstream body.
	out int64
}

// check asserts an SDK result against the mock's answer to the upstream request of the case.
func (s *sdkStack) check(t *testing.T, caseID string, got sdkResult, want sdkWant) {
	t.Helper()
	rec := s.upstream(t, caseID)
	prompt := int64(max((len(rec.Body)+3)/4, 1))
	if want.tool {
		if len(got.Calls) != 1 {
			t.Fatalf("tool calls = %+v, want one %s call (text %q)", got.Calls, sdkToolName, got.Text)
		}
		c := got.Calls[0]
		if c.Name != sdkToolName || c.Args["city"] != "mock" || c.Args["days"] != float64(1) || len(c.Args) != 2 {
			t.Errorf("tool call = %s(%v), want %s({city:mock, days:1})", c.Name, c.Args, sdkToolName)
		}
		if c.ID == "" && !want.noID {
			t.Errorf("tool call %s without id: the client cannot answer it", c.Name)
		}
		if got.Text != "" {
			t.Errorf("text %q next to a tool call", got.Text)
		}
	} else {
		if len(got.Calls) != 0 {
			t.Errorf("unexpected tool calls %+v", got.Calls)
		}
		if n := len(strings.Fields(got.Text)); n != sdkTextTokens || !strings.HasSuffix(got.Text, ".") {
			t.Errorf("text %q: %d words, want the mock's %d-word sentence", got.Text, n, sdkTextTokens)
		}
	}
	if got.Finish != want.finish {
		t.Errorf("finish = %q, want %q", got.Finish, want.finish)
	}
	if !got.HasUsage {
		t.Errorf("no usage reported")
	} else if got.In != prompt || got.Out != want.out || got.Total != prompt+want.out {
		t.Errorf("usage in/out/total = %d/%d/%d, want %d/%d/%d (upstream body %d bytes)", got.In, got.Out, got.Total,
			prompt, want.out, prompt+want.out, len(rec.Body))
	}
}

// sdkClient is one official SDK API.
type sdkClient string

const (
	sdkChat      sdkClient = "openai_chat"      // openai-go Chat.Completions
	sdkResponses sdkClient = "openai_responses" // openai-go Responses
	sdkMessages  sdkClient = "anthropic"        // anthropic-sdk-go Messages
	sdkGenai     sdkClient = "genai"            // genai Models.GenerateContent[Stream]
)

var (
	sdkClients  = []sdkClient{sdkChat, sdkResponses, sdkMessages, sdkGenai}
	sdkChannels = []string{"alpha", "beta", "gamma"}
)

// finish is the finish value the client dialect reports for a text answer and for a tool call.
func (c sdkClient) finish(tool bool) string {
	switch c {
	case sdkChat:
		if tool {
			return "tool_calls"
		}
		return "stop"
	case sdkResponses:
		return "completed" // the response status
	case sdkMessages:
		if tool {
			return "tool_use"
		}
		return "end_turn"
	}
	return "STOP"
}

// native is the channel whose default cell for the client is passthrough.
func (c sdkClient) native() string {
	switch c {
	case sdkChat, sdkResponses:
		return "alpha"
	case sdkMessages:
		return "beta"
	}
	return "gamma"
}

// sdkUpstreamPath is the path the mock must see for a client on a channel under the channel type's default
// routing cells (controlplane/admin/defaults.go).
func sdkUpstreamPath(c sdkClient, channel string, upstreamStreams bool) string {
	switch channel {
	case "alpha":
		if c == sdkResponses || c == sdkMessages {
			return "/v1/responses"
		}
		return "/v1/chat/completions"
	case "beta":
		return "/v1/messages"
	}
	if upstreamStreams {
		return "/v1beta/models/g-1-flash:streamGenerateContent"
	}
	return "/v1beta/models/g-1-flash:generateContent"
}

// sdkReq is one SDK call.
type sdkReq struct {
	client sdkClient
	route  string
	caseID string
	stream bool
	tool   bool              // declare the tool and ask the mock for a call (x-mock-tool-call: 1)
	tools  bool              // declare the tool only
	reason bool              // enable reasoning/thinking (the mock then adds 4 reasoning tokens)
	hdr    map[string]string // extra request headers (mock controls), set through the SDK's per-request option
	// history replaces the single user prompt: the conversation in the SDK's own param types
	// ([]openai.ChatCompletionMessageParamUnion, responses.ResponseInputParam, []anthropic.MessageParam,
	// []*genai.Content).
	history any
}

func (r sdkReq) declare() bool { return r.tool || r.tools }

func (r sdkReq) headers() map[string]string {
	h := map[string]string{sdkCaseHeader: r.caseID}
	if r.tool {
		h["x-mock-tool-call"] = "1"
	}
	for k, v := range r.hdr {
		h[k] = v
	}
	return h
}

// run drives the SDK and reports what it parsed.
func (s *sdkStack) run(ctx context.Context, r sdkReq) (sdkResult, error) {
	switch r.client {
	case sdkChat:
		return s.openaiChat(ctx, r)
	case sdkResponses:
		return s.openaiResponses(ctx, r)
	case sdkMessages:
		return s.anthropicMessages(ctx, r)
	}
	return s.genaiGenerate(ctx, r)
}

func (s *sdkStack) openaiClient() openai.Client {
	return openai.NewClient(ooption.WithBaseURL(s.url+"/v1/"), ooption.WithAPIKey(s.key), ooption.WithMaxRetries(0),
		ooption.WithHTTPClient(s.httpClient()))
}

func sdkOpenAIOpts(r sdkReq) []ooption.RequestOption {
	var opts []ooption.RequestOption
	for k, v := range r.headers() {
		opts = append(opts, ooption.WithHeader(k, v))
	}
	return opts
}

func (s *sdkStack) openaiChat(ctx context.Context, r sdkReq) (sdkResult, error) {
	c := s.openaiClient()
	params := openai.ChatCompletionNewParams{Model: r.route, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(sdkPrompt)}}
	if h, ok := r.history.([]openai.ChatCompletionMessageParamUnion); ok {
		params.Messages = h
	}
	if r.reason {
		params.ReasoningEffort = shared.ReasoningEffortLow
	}
	if r.declare() {
		params.Tools = []openai.ChatCompletionToolParam{{Function: shared.FunctionDefinitionParam{Name: sdkToolName,
			Description: openai.String("Weather forecast for a city"), Parameters: shared.FunctionParameters(sdkSchema())}}}
	}
	var res sdkResult
	addCalls := func(msg openai.ChatCompletionMessage) error {
		for _, tc := range msg.ToolCalls {
			args, err := sdkParseArgs(tc.Function.Arguments)
			if err != nil {
				return err
			}
			res.Calls = append(res.Calls, sdkCall{tc.ID, tc.Function.Name, args, tc.Function.Arguments})
		}
		res.Raw = msg
		return nil
	}
	if !r.stream {
		resp, err := c.Chat.Completions.New(ctx, params, sdkOpenAIOpts(r)...)
		if err != nil {
			return res, err
		}
		if len(resp.Choices) != 1 {
			return res, fmt.Errorf("%d choices, want 1", len(resp.Choices))
		}
		ch := resp.Choices[0]
		res.Text, res.Finish = ch.Message.Content, ch.FinishReason
		res.In, res.Out, res.Total, res.HasUsage = resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.TotalTokens, resp.JSON.Usage.Valid()
		res.Reasoning = resp.Usage.CompletionTokensDetails.ReasoningTokens
		return res, addCalls(ch.Message)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	st := c.Chat.Completions.NewStreaming(ctx, params, sdkOpenAIOpts(r)...)
	defer st.Close()
	acc := openai.ChatCompletionAccumulator{}
	usageChunks, chunks := 0, 0
	for st.Next() {
		chunk := st.Current()
		chunks++
		if usageChunks > 0 {
			return res, fmt.Errorf("chunk %d follows the usage chunk: %s", chunks, chunk.RawJSON())
		}
		if !acc.AddChunk(chunk) {
			return res, fmt.Errorf("chunk id %q does not continue completion %q", chunk.ID, acc.ID)
		}
		switch {
		case chunk.JSON.Usage.Valid():
			// include_usage: one usage chunk with no choices, last.
			usageChunks++
			if len(chunk.Choices) != 0 {
				return res, fmt.Errorf("usage chunk with choices: %s", chunk.RawJSON())
			}
			res.In, res.Out, res.Total, res.HasUsage = chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens, chunk.Usage.TotalTokens, true
			res.Reasoning = chunk.Usage.CompletionTokensDetails.ReasoningTokens
		case chunk.JSON.Usage.Raw() != "null":
			// With include_usage every other chunk carries "usage": null (docs/translation.md §6).
			return res, fmt.Errorf("chunk without \"usage\": null although include_usage was asked: %s", chunk.RawJSON())
		}
	}
	if err := st.Err(); err != nil {
		return res, err
	}
	if len(acc.Choices) != 1 {
		return res, fmt.Errorf("%d choices accumulated from %d chunks", len(acc.Choices), chunks)
	}
	res.Text, res.Finish = acc.Choices[0].Message.Content, acc.Choices[0].FinishReason
	if res.Finish == "" {
		return res, fmt.Errorf("%w: no finish_reason", errSDKIncomplete)
	}
	return res, addCalls(acc.Choices[0].Message)
}

func (s *sdkStack) openaiResponses(ctx context.Context, r sdkReq) (sdkResult, error) {
	c := s.openaiClient()
	params := responses.ResponseNewParams{Model: r.route, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(sdkPrompt)}}
	if h, ok := r.history.(responses.ResponseInputParam); ok {
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: h}
	}
	if r.reason {
		params.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffortLow}
	}
	if r.declare() {
		params.Tools = []responses.ToolUnionParam{responses.ToolParamOfFunction(sdkToolName, sdkSchema(), false)}
	}
	var res sdkResult
	fill := func(resp *responses.Response) error {
		res.Finish = string(resp.Status)
		res.In, res.Out, res.Total, res.HasUsage = resp.Usage.InputTokens, resp.Usage.OutputTokens, resp.Usage.TotalTokens, resp.JSON.Usage.Valid()
		res.Reasoning = resp.Usage.OutputTokensDetails.ReasoningTokens
		for _, it := range resp.Output {
			switch it.Type {
			case "reasoning":
				for _, sm := range it.Summary {
					res.Thinking += sm.Text
				}
			case "message":
				for _, ct := range it.Content {
					if ct.Type == "output_text" {
						res.Text += ct.Text
					}
				}
			case "function_call":
				args, err := sdkParseArgs(it.Arguments)
				if err != nil {
					return err
				}
				res.Calls = append(res.Calls, sdkCall{it.CallID, it.Name, args, it.Arguments})
			}
		}
		res.Raw = resp
		return nil
	}
	if !r.stream {
		resp, err := c.Responses.New(ctx, params, sdkOpenAIOpts(r)...)
		if err != nil {
			return res, err
		}
		return res, fill(resp)
	}
	st := c.Responses.NewStreaming(ctx, params, sdkOpenAIOpts(r)...)
	defer st.Close()
	var final *responses.Response
	text := ""
	args := map[string]string{}
	seq := int64(-1)
	for st.Next() {
		ev := st.Current()
		if final != nil {
			return res, fmt.Errorf("event %s after response.completed", ev.Type)
		}
		if ev.SequenceNumber != seq+1 {
			return res, fmt.Errorf("event %s: sequence_number %d after %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq = ev.SequenceNumber
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta.OfString
		case "response.output_text.done":
			if ev.Text != text {
				return res, fmt.Errorf("output_text.done %q != streamed deltas %q", ev.Text, text)
			}
		case "response.function_call_arguments.delta":
			args[ev.ItemID] += ev.Delta.OfString
		case "response.function_call_arguments.done":
			if ev.Arguments != args[ev.ItemID] {
				return res, fmt.Errorf("function_call_arguments.done %q != streamed deltas %q", ev.Arguments, args[ev.ItemID])
			}
		case "response.output_item.done":
			if it := ev.Item; it.Type == "function_call" && it.Arguments != args[it.ID] {
				return res, fmt.Errorf("output_item.done arguments %q != streamed deltas %q", it.Arguments, args[it.ID])
			}
		case "error":
			return res, fmt.Errorf("error event: %s %s", ev.Code, ev.Message)
		case "response.failed", "response.incomplete":
			return res, fmt.Errorf("terminal event %s", ev.Type)
		case "response.completed":
			resp := ev.Response
			final = &resp
		}
	}
	if err := st.Err(); err != nil {
		return res, err
	}
	if final == nil {
		return res, fmt.Errorf("%w: no response.completed event", errSDKIncomplete)
	}
	if err := fill(final); err != nil {
		return res, err
	}
	if text != res.Text {
		return res, fmt.Errorf("streamed text %q != completed text %q", text, res.Text)
	}
	for _, it := range final.Output {
		if it.Type == "function_call" && args[it.ID] != it.Arguments {
			return res, fmt.Errorf("streamed arguments of %s %q != completed %q", it.ID, args[it.ID], it.Arguments)
		}
	}
	return res, nil
}

func (s *sdkStack) anthropicMessages(ctx context.Context, r sdkReq) (sdkResult, error) {
	c := anthropic.NewClient(aoption.WithBaseURL(s.url), aoption.WithAPIKey(s.key), aoption.WithMaxRetries(0),
		aoption.WithHTTPClient(s.httpClient()))
	params := anthropic.MessageNewParams{Model: anthropic.Model(r.route), MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(sdkPrompt))}}
	if h, ok := r.history.([]anthropic.MessageParam); ok {
		params.Messages = h
	}
	if r.reason {
		params.MaxTokens, params.Thinking = 2048, anthropic.ThinkingConfigParamOfEnabled(1024)
	}
	if r.declare() {
		params.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: sdkToolName,
			Description: anthropic.String("Weather forecast for a city"),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: sdkSchema()["properties"], Required: []string{"city"}}}}}
	}
	var opts []aoption.RequestOption
	for k, v := range r.headers() {
		opts = append(opts, aoption.WithHeader(k, v))
	}
	var res sdkResult
	var msg anthropic.Message
	if !r.stream {
		resp, err := c.Messages.New(ctx, params, opts...)
		if err != nil {
			return res, err
		}
		msg = *resp
	} else {
		st := c.Messages.NewStreaming(ctx, params, opts...)
		defer st.Close()
		stopped := false
		for st.Next() {
			ev := st.Current()
			if stopped {
				return res, fmt.Errorf("event %s after message_stop", ev.Type)
			}
			if err := msg.Accumulate(ev); err != nil {
				return res, fmt.Errorf("accumulate %s: %w", ev.Type, err)
			}
			stopped = ev.Type == "message_stop"
		}
		if err := st.Err(); err != nil {
			return res, err
		}
		if !stopped {
			return res, fmt.Errorf("%w: no message_stop event", errSDKIncomplete)
		}
	}
	for _, b := range msg.Content {
		switch b.Type {
		case "thinking":
			res.Thinking += b.Thinking
		case "text":
			res.Text += b.Text
		case "tool_use":
			args, err := sdkParseArgs(string(b.Input))
			if err != nil {
				return res, err
			}
			res.Calls = append(res.Calls, sdkCall{b.ID, b.Name, args, string(b.Input)})
		}
	}
	res.Raw = msg
	res.Finish = string(msg.StopReason)
	res.In, res.Out = msg.Usage.InputTokens, msg.Usage.OutputTokens
	res.Total, res.HasUsage = res.In+res.Out, msg.Usage.OutputTokens > 0
	res.Reasoning = msg.Usage.OutputTokensDetails.ThinkingTokens
	return res, nil
}

func (s *sdkStack) genaiGenerate(ctx context.Context, r sdkReq) (sdkResult, error) {
	var res sdkResult
	c, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: s.key, Backend: genai.BackendGeminiAPI, HTTPClient: s.httpClient(),
		HTTPOptions: genai.HTTPOptions{BaseURL: s.url}})
	if err != nil {
		return res, err
	}
	h := http.Header{}
	for k, v := range r.headers() {
		h.Set(k, v)
	}
	cfg := &genai.GenerateContentConfig{HTTPOptions: &genai.HTTPOptions{Headers: h}}
	contents := genai.Text(sdkPrompt)
	if hist, ok := r.history.([]*genai.Content); ok {
		contents = hist
	}
	if r.reason {
		budget := int32(1024)
		cfg.ThinkingConfig = &genai.ThinkingConfig{IncludeThoughts: true, ThinkingBudget: &budget}
	}
	if r.declare() {
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: sdkToolName,
			Description: "Weather forecast for a city", ParametersJsonSchema: sdkSchema()}}}}
	}
	add := func(resp *genai.GenerateContentResponse) {
		if len(resp.Candidates) > 0 {
			cand := resp.Candidates[0]
			if cand.Content != nil {
				for _, p := range cand.Content.Parts {
					if p.Text != "" && !p.Thought {
						res.Text += p.Text
					}
					if p.Thought {
						res.Thinking += p.Text
					}
					if fc := p.FunctionCall; fc != nil {
						res.Calls = append(res.Calls, sdkCall{fc.ID, fc.Name, fc.Args, ""})
					}
				}
			}
			if cand.Content != nil {
				res.Raw = cand.Content
			}
			if cand.FinishReason != "" {
				res.Finish = string(cand.FinishReason)
			}
		}
		if u := resp.UsageMetadata; u != nil {
			// gamma's candidatesTokenCount excludes the thoughts: the output is their sum.
			res.In, res.Out, res.Total, res.HasUsage = int64(u.PromptTokenCount), int64(u.CandidatesTokenCount+u.ThoughtsTokenCount), int64(u.TotalTokenCount), true
			res.Reasoning = int64(u.ThoughtsTokenCount)
		}
	}
	if !r.stream {
		resp, err := c.Models.GenerateContent(ctx, r.route, contents, cfg)
		if err != nil {
			return res, err
		}
		add(resp)
		return res, nil
	}
	finished := false
	for resp, err := range c.Models.GenerateContentStream(ctx, r.route, contents, cfg) {
		if err != nil {
			return res, err
		}
		if finished {
			return res, errors.New("a chunk follows the one with finishReason")
		}
		add(resp)
		finished = res.Finish != ""
	}
	if !finished {
		return res, fmt.Errorf("%w: no chunk with finishReason", errSDKIncomplete)
	}
	return res, nil
}

// errSDKIncomplete marks a stream the SDK accepted as finished although its dialect's terminal event never
// came: the driver, not the SDK, noticed.
var errSDKIncomplete = errors.New("the SDK saw the stream end cleanly without its terminal event")

// sdkAPIStatus returns the HTTP status and the error type (alpha/beta error.type, gamma status) of an SDK's
// typed API error.
func sdkAPIStatus(err error) (int, string, bool) {
	var oe *openai.Error
	var ae *anthropic.Error
	var ge genai.APIError
	switch {
	case errors.As(err, &oe):
		return oe.StatusCode, oe.Type, true
	case errors.As(err, &ae):
		var body struct {
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(ae.RawJSON()), &body)
		return ae.StatusCode, body.Error.Type, true
	case errors.As(err, &ge):
		return ge.Code, ge.Status, true
	}
	return 0, "", false
}

// errorType is the client dialect's error type for the gateway's answers of status 502, 429 and 400
// (dataplane/httperr).
func (c sdkClient) errorType(status int) string {
	if status == 429 {
		switch c {
		case sdkChat, sdkResponses:
			return "rate_limit_exceeded"
		case sdkMessages:
			return "rate_limit_error"
		}
		return "RESOURCE_EXHAUSTED"
	}
	switch c {
	case sdkChat, sdkResponses:
		if status >= 500 {
			return "server_error"
		}
		return "invalid_request_error"
	case sdkMessages:
		if status >= 500 {
			return "api_error"
		}
		return "invalid_request_error"
	}
	if status == 502 {
		return "UNAVAILABLE"
	}
	return "INVALID_ARGUMENT"
}

func sdkCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sdkKeepaliveForm is one keepalive as docs/translation.md §7 gives it for the client's dialect.
func sdkKeepaliveForm(client sdkClient) string {
	switch client {
	case sdkChat, sdkResponses:
		return ": keepalive\n"
	case sdkMessages:
		return "event: ping\ndata: {\"type\":\"ping\"}\n\n"
	}
	return "\r\n\r\n"
}

// sdkKeepalives counts the keepalives a client received before the synthesised stream began, in the form
// docs/translation.md §7 gives for its dialect.
func sdkKeepalives(client sdkClient, raw string) (int, error) {
	switch client {
	case sdkChat, sdkResponses:
		i := strings.Index(raw, "data:")
		if i < 0 {
			return 0, errors.New("no data event")
		}
		pre := raw[:i]
		if i := strings.Index(pre, "event:"); i >= 0 { // responses events carry event: lines
			pre = pre[:i]
		}
		n := strings.Count(pre, ": keepalive\n")
		if strings.TrimSpace(strings.ReplaceAll(pre, ": keepalive\n", "")) != "" {
			return n, fmt.Errorf("unexpected bytes before the first event: %q", pre)
		}
		return n, nil
	case sdkMessages:
		i := strings.Index(raw, "event: message_start")
		if i < 0 {
			return 0, errors.New("no message_start event")
		}
		return strings.Count(raw[:i], "event: ping\ndata: {\"type\":\"ping\"}\n\n"), nil
	}
	i := strings.Index(raw, "data:")
	if i < 0 {
		return 0, errors.New("no data event")
	}
	pre := raw[:i]
	if strings.Trim(pre, "\r\n") != "" {
		return 0, fmt.Errorf("unexpected bytes before the first event: %q", pre)
	}
	return strings.Count(pre, "\r\n\r\n"), nil
}

// sdkToolResult is the tool output the round-trip cases send back.
const sdkToolResult = "sunny, 21 C"

// sdkHistory continues a conversation after the SDK's tool call: the prompt, the assistant turn exactly as
// the SDK returned it, and the tool result for the call, in the SDK's own param types.
func sdkHistory(client sdkClient, first sdkResult) (any, error) {
	if len(first.Calls) != 1 {
		return nil, fmt.Errorf("first turn: tool calls %+v, want one", first.Calls)
	}
	call := first.Calls[0]
	switch client {
	case sdkChat:
		msg, ok := first.Raw.(openai.ChatCompletionMessage)
		if !ok {
			return nil, fmt.Errorf("no chat message: %T", first.Raw)
		}
		return []openai.ChatCompletionMessageParamUnion{openai.UserMessage(sdkPrompt), msg.ToParam(),
			openai.ToolMessage(sdkToolResult, call.ID)}, nil
	case sdkResponses:
		return responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(sdkPrompt, responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(call.Raw, call.ID, call.Name),
			responses.ResponseInputItemParamOfFunctionCallOutput(call.ID, sdkToolResult),
		}, nil
	case sdkMessages:
		msg, ok := first.Raw.(anthropic.Message)
		if !ok {
			return nil, fmt.Errorf("no message: %T", first.Raw)
		}
		return []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(sdkPrompt)), msg.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(call.ID, sdkToolResult, false))}, nil
	}
	content, ok := first.Raw.(*genai.Content)
	if !ok {
		return nil, fmt.Errorf("no content: %T", first.Raw)
	}
	return []*genai.Content{genai.NewContentFromText(sdkPrompt, genai.RoleUser), content,
		genai.NewContentFromParts([]*genai.Part{{FunctionResponse: &genai.FunctionResponse{ID: call.ID, Name: call.Name,
			Response: map[string]any{"output": sdkToolResult}}}}, genai.RoleUser)}, nil
}

// sdkUpstreamToolPair checks that the upstream request carries the tool call and its result, paired (by id
// where the upstream dialect has ids, by name for gamma).
func sdkUpstreamToolPair(path, body string) error {
	var probe struct {
		Messages []struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
		Input    json.RawMessage `json:"input"`
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				FunctionCall *struct {
					ID   string `json:"id"`
					Name string `json:"name"`
				} `json:"functionCall"`
				FunctionResponse *struct {
					ID       string          `json:"id"`
					Name     string          `json:"name"`
					Response json.RawMessage `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal([]byte(body), &probe); err != nil {
		return err
	}
	callID, resultID, result := "", "", ""
	switch {
	case path == "/v1/chat/completions":
		for _, m := range probe.Messages {
			for _, tc := range m.ToolCalls {
				if tc.Function.Name == sdkToolName {
					callID = tc.ID
				}
			}
			if m.Role == "tool" {
				resultID, result = m.ToolCallID, string(m.Content)
			}
		}
	case path == "/v1/responses":
		var items []struct {
			Type   string          `json:"type"`
			CallID string          `json:"call_id"`
			Name   string          `json:"name"`
			Output json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(probe.Input, &items); err != nil {
			return fmt.Errorf("input: %w", err)
		}
		for _, it := range items {
			switch it.Type {
			case "function_call":
				if it.Name == sdkToolName {
					callID = it.CallID
				}
			case "function_call_output":
				resultID, result = it.CallID, string(it.Output)
			}
		}
	case path == "/v1/messages":
		for _, m := range probe.Messages {
			var blocks []struct {
				Type      string          `json:"type"`
				ID        string          `json:"id"`
				Name      string          `json:"name"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
			}
			_ = json.Unmarshal(m.Content, &blocks) // a string content has no blocks
			for _, b := range blocks {
				switch b.Type {
				case "tool_use":
					if b.Name == sdkToolName {
						callID = b.ID
					}
				case "tool_result":
					resultID, result = b.ToolUseID, string(b.Content)
				}
			}
		}
	default: // gamma: paired by name (and by id when the call has one)
		for _, c := range probe.Contents {
			for _, p := range c.Parts {
				if fc := p.FunctionCall; fc != nil && fc.Name == sdkToolName {
					callID = "name:" + fc.Name
					if fc.ID != "" {
						callID = fc.ID
					}
				}
				if fr := p.FunctionResponse; fr != nil {
					resultID, result = "name:"+fr.Name, string(fr.Response)
					if fr.ID != "" || !strings.HasPrefix(callID, "name:") {
						resultID = fr.ID
					}
				}
			}
		}
	}
	switch {
	case callID == "":
		return errors.New("no tool call (or a call without id) in the upstream history")
	case resultID != callID:
		return fmt.Errorf("tool result for %q, but the call is %q", resultID, callID)
	case !strings.Contains(result, sdkToolResult):
		return fmt.Errorf("tool result %s does not carry %q", result, sdkToolResult)
	}
	return nil
}

// sdkMockSignature matches the mock's opaque signatures: base64 of "sig_" and 16 hex digits.
var sdkMockSignature = regexp.MustCompile(`^sig_[0-9a-f]{16}$`)

// sdkUpstreamSignature returns the reasoning signature the upstream request replays: beta's thinking block
// signature, or gamma's thoughtSignature.
func sdkUpstreamSignature(path, body string) (string, error) {
	var probe struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				ThoughtSignature string `json:"thoughtSignature"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal([]byte(body), &probe); err != nil {
		return "", err
	}
	if path == "/v1/messages" {
		for _, m := range probe.Messages {
			var blocks []struct {
				Type      string `json:"type"`
				Signature string `json:"signature"`
			}
			_ = json.Unmarshal(m.Content, &blocks)
			for _, b := range blocks {
				if b.Type == "thinking" && m.Role == "assistant" {
					return b.Signature, nil
				}
			}
		}
		return "", errors.New("no thinking block in the assistant turn")
	}
	for _, c := range probe.Contents {
		for _, p := range c.Parts {
			if p.ThoughtSignature != "" && c.Role == "model" {
				return p.ThoughtSignature, nil
			}
		}
	}
	return "", errors.New("no thoughtSignature in the model turn")
}
