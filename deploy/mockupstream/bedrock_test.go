package mockupstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/auth/bearer"
)

const (
	testAKID   = "AKIAMOCKMOCKMOCK0001"
	testSecret = "mock/secret+key/0123456789abcdefghijklmn"
	testToken  = "FwoGZXIvYXdzEMOCKSESSIONTOKEN"
	testRegion = "eu-west-3"
	claudeID   = "anthropic.claude-mock-v1:0"
)

func bedrockMock(t *testing.T, mod func(*CloudOptions)) *testBundle {
	t.Helper()
	o := CloudOptions{AWS: AWSCredentials{AccessKeyID: testAKID, SecretAccessKey: testSecret, SessionToken: testToken},
		AWSRegion: testRegion, BedrockAPIKeys: []string{"bedrock-api-key-1"}}
	if mod != nil {
		mod(&o)
	}
	return setup(t, Options{Clouds: o})
}

func bedrockMockTLS(t *testing.T) *testBundle {
	t.Helper()
	m := New(Options{Clouds: CloudOptions{BedrockAPIKeys: []string{"bedrock-api-key-1"}}})
	srv := httptest.NewTLSServer(m)
	t.Cleanup(srv.Close)
	return &testBundle{mock: m, srv: srv}
}

// bedrockClient is the AWS SDK's Bedrock runtime client pointed at the mock, signing with creds.
func bedrockClient(b *testBundle, creds aws.Credentials, region string) *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		BaseEndpoint:     aws.String(b.srv.URL),
		Region:           region,
		Credentials:      aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }),
		RetryMaxAttempts: 1,
		HTTPClient:       b.srv.Client(),
	})
}

func goodCreds() aws.Credentials {
	return aws.Credentials{AccessKeyID: testAKID, SecretAccessKey: testSecret, SessionToken: testToken}
}

const invokeBody = `{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":"hello"}]}`

func TestBedrockInvokeModelWithSDK(t *testing.T) {
	b := bedrockMock(t, nil)
	c := bedrockClient(b, goodCreds(), testRegion)
	out, err := c.InvokeModel(context.Background(), &bedrockruntime.InvokeModelInput{ModelId: aws.String(claudeID),
		Body: []byte(invokeBody), ContentType: aws.String("application/json")})
	if err != nil {
		t.Fatalf("InvokeModel: %v", err)
	}
	var msg struct {
		Type    string `json:"type"`
		Model   string `json:"model"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(out.Body, &msg); err != nil {
		t.Fatalf("decode %s: %v", out.Body, err)
	}
	if msg.Type != "message" || msg.Model != claudeID || len(msg.Content) != 1 || msg.Content[0].Text == "" {
		t.Fatalf("message = %s", out.Body)
	}
	bills := b.mock.Bills()
	if len(bills) != 1 {
		t.Fatalf("bills = %+v, want 1", bills)
	}
	bl := bills[0]
	if bl.Provider != ProviderBedrock || bl.Model != claudeID || bl.APIKey != testAKID || bl.Endpoint != EndpointMessages ||
		bl.Input != int64(msg.Usage.InputTokens) || bl.Output != int64(msg.Usage.OutputTokens) || bl.Output != 8 {
		t.Fatalf("bill %+v does not match usage %+v", bl, msg.Usage)
	}
	// The token-count headers agree with the body's usage.
	r := b.mock.Requests()
	if len(r) != 1 || r[0].Status != 200 {
		t.Fatalf("records %+v", r)
	}
}

func TestBedrockInvokeTokenCountHeaders(t *testing.T) {
	b := bedrockMock(t, nil)
	r := b.post(t, "/model/"+claudeID+"/invoke", invokeBody, "Authorization", "Bearer bedrock-api-key-1")
	m := decodeJSON(t, r.body)
	u := m["usage"].(map[string]any)
	if got, want := r.header.Get("X-Amzn-Bedrock-Input-Token-Count"), jsonNum(u["input_tokens"]); got != want {
		t.Fatalf("input count header %q, usage %q", got, want)
	}
	if got, want := r.header.Get("X-Amzn-Bedrock-Output-Token-Count"), jsonNum(u["output_tokens"]); got != want {
		t.Fatalf("output count header %q, usage %q", got, want)
	}
	if bl := b.mock.Bills(); len(bl) != 1 || bl[0].APIKey != "bedrock-api-key-1" {
		t.Fatalf("bills %+v", bl)
	}
}

func jsonNum(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestBedrockInvokeModelWithResponseStreamWithSDK(t *testing.T) {
	b := bedrockMock(t, nil)
	c := bedrockClient(b, goodCreds(), testRegion)
	out, err := c.InvokeModelWithResponseStream(context.Background(), &bedrockruntime.InvokeModelWithResponseStreamInput{
		ModelId: aws.String(claudeID), Body: []byte(invokeBody), ContentType: aws.String("application/json")})
	if err != nil {
		t.Fatalf("InvokeModelWithResponseStream: %v", err)
	}
	st := out.GetStream()
	defer func() { _ = st.Close() }()
	var types_ []string
	var text strings.Builder
	var metrics map[string]any
	for ev := range st.Events() {
		chunk, ok := ev.(*types.ResponseStreamMemberChunk)
		if !ok {
			t.Fatalf("event %T, want chunk", ev)
		}
		var e map[string]any
		if err := json.Unmarshal(chunk.Value.Bytes, &e); err != nil {
			t.Fatalf("chunk bytes %q: %v", chunk.Value.Bytes, err)
		}
		types_ = append(types_, e["type"].(string))
		if d, ok := e["delta"].(map[string]any); ok && d["type"] == "text_delta" {
			text.WriteString(d["text"].(string))
		}
		if m, ok := e["amazon-bedrock-invocationMetrics"].(map[string]any); ok {
			metrics = m
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	got := strings.Join(types_, ",")
	if !strings.HasPrefix(got, "message_start,content_block_start,ping,content_block_delta") ||
		!strings.HasSuffix(got, "content_block_stop,message_delta,message_stop") || text.Len() == 0 {
		t.Fatalf("events %s text %q", got, text.String())
	}
	bl := b.mock.Bills()
	if len(bl) != 1 || bl[0].Provider != ProviderBedrock || metrics == nil ||
		jsonNum(metrics["outputTokenCount"]) != jsonNum(bl[0].Output) || jsonNum(metrics["inputTokenCount"]) != jsonNum(bl[0].Input) {
		t.Fatalf("bills %+v, metrics %v", bl, metrics)
	}
}

func TestBedrockConverseWithSDK(t *testing.T) {
	b := bedrockMock(t, nil)
	c := bedrockClient(b, goodCreds(), testRegion)
	out, err := c.Converse(context.Background(), &bedrockruntime.ConverseInput{ModelId: aws.String("meta.llama-mock"),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{
			&types.ContentBlockMemberText{Value: "hello"}}}},
		InferenceConfig: &types.InferenceConfiguration{MaxTokens: aws.Int32(5)}},
		func(o *bedrockruntime.Options) {})
	if err != nil {
		t.Fatalf("Converse: %v", err)
	}
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok || len(msg.Value.Content) != 1 {
		t.Fatalf("output %#v", out.Output)
	}
	if txt, ok := msg.Value.Content[0].(*types.ContentBlockMemberText); !ok || txt.Value == "" {
		t.Fatalf("content %#v", msg.Value.Content[0])
	}
	if out.StopReason != types.StopReasonMaxTokens {
		t.Fatalf("stop %q, want max_tokens (cap 5 < 8 words)", out.StopReason)
	}
	u := out.Usage
	bl := b.mock.Bills()
	if len(bl) != 1 || bl[0].Endpoint != EndpointConverse || bl[0].Provider != ProviderBedrock ||
		int64(*u.InputTokens) != bl[0].Input || int64(*u.OutputTokens) != bl[0].Output || *u.OutputTokens != 5 ||
		*u.TotalTokens != *u.InputTokens+*u.OutputTokens {
		t.Fatalf("usage %+v, bills %+v", u, bl)
	}
}

func TestBedrockConverseCachedUsage(t *testing.T) {
	b := bedrockMock(t, nil)
	r := b.post(t, "/model/m/converse", `{"messages":[{"role":"user","content":[{"text":"hello there, a longer prompt"}]}]}`,
		"Authorization", "Bearer bedrock-api-key-1", "x-mock-usage", "cached")
	var out struct {
		Usage converseUsage `json:"usage"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	u := out.Usage
	bl := b.mock.Bills()[0]
	if u.CacheReadInputTokens == 0 || u.CacheWriteInputTokens == 0 || int64(u.CacheReadInputTokens) != bl.CacheRead ||
		int64(u.CacheWriteInputTokens) != bl.Cache5m || int64(u.InputTokens) != bl.Input ||
		u.TotalTokens != u.InputTokens+u.OutputTokens+u.CacheReadInputTokens+u.CacheWriteInputTokens {
		t.Fatalf("usage %+v bill %+v", u, bl)
	}
}

func TestBedrockConverseStreamWithSDK(t *testing.T) {
	b := bedrockMock(t, nil)
	c := bedrockClient(b, goodCreds(), testRegion)
	var tc types.ToolConfiguration
	tc.Tools = []types.Tool{&types.ToolMemberToolSpec{Value: types.ToolSpecification{Name: aws.String("weather"),
		InputSchema: &types.ToolInputSchemaMemberJson{Value: nil}}}}
	tc.ToolChoice = &types.ToolChoiceMemberAny{}
	out, err := c.ConverseStream(context.Background(), &bedrockruntime.ConverseStreamInput{ModelId: aws.String("meta.llama-mock"),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{
			&types.ContentBlockMemberText{Value: "weather?"}}}}, ToolConfig: &tc})
	if err != nil {
		t.Fatalf("ConverseStream: %v", err)
	}
	st := out.GetStream()
	defer func() { _ = st.Close() }()
	var seq []string
	var args strings.Builder
	var usage *types.TokenUsage
	var toolName string
	for ev := range st.Events() {
		switch e := ev.(type) {
		case *types.ConverseStreamOutputMemberMessageStart:
			seq = append(seq, "messageStart")
		case *types.ConverseStreamOutputMemberContentBlockStart:
			seq = append(seq, "contentBlockStart")
			if tu, ok := e.Value.Start.(*types.ContentBlockStartMemberToolUse); ok {
				toolName = aws.ToString(tu.Value.Name)
			}
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			seq = append(seq, "contentBlockDelta")
			if tu, ok := e.Value.Delta.(*types.ContentBlockDeltaMemberToolUse); ok {
				args.WriteString(aws.ToString(tu.Value.Input))
			}
		case *types.ConverseStreamOutputMemberContentBlockStop:
			seq = append(seq, "contentBlockStop")
		case *types.ConverseStreamOutputMemberMessageStop:
			seq = append(seq, "messageStop:"+string(e.Value.StopReason))
		case *types.ConverseStreamOutputMemberMetadata:
			seq = append(seq, "metadata")
			usage = e.Value.Usage
		default:
			t.Fatalf("unexpected event %#v", ev)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	got := strings.Join(seq, ",")
	if !strings.HasPrefix(got, "messageStart,contentBlockStart,contentBlockDelta") ||
		!strings.HasSuffix(got, "contentBlockStop,messageStop:tool_use,metadata") || toolName != "weather" || args.String() != "{}" {
		t.Fatalf("events %s tool %q args %q", got, toolName, args.String())
	}
	bl := b.mock.Bills()
	if usage == nil || len(bl) != 1 || int64(*usage.InputTokens) != bl[0].Input || int64(*usage.OutputTokens) != bl[0].Output {
		t.Fatalf("usage %+v bills %+v", usage, bl)
	}
}

// apiErrorCode is the Bedrock error code the SDK decoded.
func apiErrorCode(t *testing.T, err error) string {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is no API error", err)
	}
	return ae.ErrorCode()
}

func TestBedrockSigV4Refusals(t *testing.T) {
	past := time.Now().Add(-time.Minute)
	cases := []struct {
		name   string
		mod    func(*CloudOptions)
		creds  aws.Credentials
		region string
		code   string
		msg    string // in the error message, when set
	}{
		{"wrong secret", nil, aws.Credentials{AccessKeyID: testAKID, SecretAccessKey: "wrong", SessionToken: testToken}, testRegion, "InvalidSignatureException", "signature we calculated does not match"},
		{"unknown access key", nil, aws.Credentials{AccessKeyID: "AKIAOTHER", SecretAccessKey: testSecret, SessionToken: testToken}, testRegion, "UnrecognizedClientException", ""},
		{"missing session token", nil, aws.Credentials{AccessKeyID: testAKID, SecretAccessKey: testSecret}, testRegion, "UnrecognizedClientException", ""},
		{"wrong session token", nil, aws.Credentials{AccessKeyID: testAKID, SecretAccessKey: testSecret, SessionToken: "other"}, testRegion, "UnrecognizedClientException", ""},
		{"expired session", func(o *CloudOptions) { o.AWS.SessionExpires = past }, goodCreds(), testRegion, "ExpiredTokenException", ""},
		{"clock skew beyond 5 minutes", func(o *CloudOptions) { o.Now = func() time.Time { return time.Now().Add(6 * time.Minute) } }, goodCreds(), testRegion, "InvalidSignatureException", "Signature expired"},
		{"clock behind beyond 5 minutes", func(o *CloudOptions) { o.Now = func() time.Time { return time.Now().Add(-6 * time.Minute) } }, goodCreds(), testRegion, "InvalidSignatureException", ""},
		{"wrong region", nil, goodCreds(), "us-west-2", "InvalidSignatureException", "Credential should be scoped to a valid region"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := bedrockMock(t, tc.mod)
			c := bedrockClient(b, tc.creds, tc.region)
			_, err := c.InvokeModel(context.Background(), &bedrockruntime.InvokeModelInput{ModelId: aws.String(claudeID),
				Body: []byte(invokeBody), ContentType: aws.String("application/json")})
			if err == nil {
				t.Fatal("InvokeModel succeeded, want refusal")
			}
			if code := apiErrorCode(t, err); code != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("code %q (%v), want %q %q", code, err, tc.code, tc.msg)
			}
			var re interface{ HTTPStatusCode() int }
			if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusForbidden {
				t.Fatalf("status of %v, want 403", err)
			}
			if len(b.mock.Bills()) != 0 {
				t.Fatal("a refused call was billed")
			}
		})
	}
	t.Run("skew within 5 minutes accepted", func(t *testing.T) {
		b := bedrockMock(t, func(o *CloudOptions) { o.Now = func() time.Time { return time.Now().Add(4 * time.Minute) } })
		if _, err := bedrockClient(b, goodCreds(), testRegion).InvokeModel(context.Background(), &bedrockruntime.InvokeModelInput{
			ModelId: aws.String(claudeID), Body: []byte(invokeBody)}); err != nil {
			t.Fatalf("InvokeModel: %v", err)
		}
	})
}

// A signed request whose body, path or signed header is changed in transit is refused: the signature is
// recomputed over what arrived.
func TestBedrockSigV4TamperedRequest(t *testing.T) {
	b := bedrockMock(t, nil)
	tamper := func(mod func(*http.Request)) *http.Response {
		c := bedrockruntime.New(bedrockruntime.Options{BaseEndpoint: aws.String(b.srv.URL), Region: testRegion,
			Credentials:      aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return goodCreds(), nil }),
			RetryMaxAttempts: 1, HTTPClient: tamperClient{b.srv.Client(), mod}})
		_, err := c.InvokeModel(context.Background(), &bedrockruntime.InvokeModelInput{ModelId: aws.String(claudeID),
			Body: []byte(invokeBody), ContentType: aws.String("application/json")})
		if err == nil {
			t.Fatal("tampered request accepted")
		}
		if code := apiErrorCode(t, err); code != "InvalidSignatureException" {
			t.Fatalf("code %q, want InvalidSignatureException", code)
		}
		return nil
	}
	tamper(func(r *http.Request) { r.URL.Path = "/model/anthropic.other/invoke"; r.URL.RawPath = "" })
	tamper(func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") })
	tamper(func(r *http.Request) {
		body := strings.Replace(invokeBody, "hello", "HELLO", 1)
		r.Body = ioNopCloser(body)
	})
}

func TestBedrockAPIKeyAndMissingAuth(t *testing.T) {
	b := bedrockMockTLS(t) // the SDK sends a bearer token over HTTPS only
	c := bedrockruntime.New(bedrockruntime.Options{BaseEndpoint: aws.String(b.srv.URL), Region: testRegion,
		BearerAuthTokenProvider: bearer.StaticTokenProvider{Token: bearer.Token{Value: "bedrock-api-key-1"}},
		AuthSchemePreference:    []string{"httpBearerAuth"}, RetryMaxAttempts: 1, HTTPClient: b.srv.Client()})
	if _, err := c.InvokeModel(context.Background(), &bedrockruntime.InvokeModelInput{ModelId: aws.String(claudeID),
		Body: []byte(invokeBody)}); err != nil {
		t.Fatalf("InvokeModel with API key: %v", err)
	}
	r := b.call(t, http.MethodPost, "/model/"+claudeID+"/invoke", invokeBody, "Authorization", "Bearer wrong")
	if r.status != http.StatusForbidden || !strings.HasPrefix(r.header.Get("x-amzn-errortype"), "UnrecognizedClientException") ||
		decodeJSON(t, r.body)["message"] == nil {
		t.Fatalf("wrong API key: %d %v %s", r.status, r.header, r.body)
	}
	r = b.call(t, http.MethodPost, "/model/"+claudeID+"/invoke", invokeBody)
	if r.status != http.StatusForbidden || !strings.HasPrefix(r.header.Get("x-amzn-errortype"), "MissingAuthenticationTokenException") {
		t.Fatalf("no auth: %d %v %s", r.status, r.header, r.body)
	}
}

func TestBedrockBodyChecksAndThrottle(t *testing.T) {
	b := bedrockMock(t, nil)
	auth := []string{"Authorization", "Bearer bedrock-api-key-1"}
	for _, body := range []string{
		`{"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
		`{"anthropic_version":"2023-06-01","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
		`{"anthropic_version":"bedrock-2023-05-31","model":"b-1","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
	} {
		r := b.call(t, http.MethodPost, "/model/"+claudeID+"/invoke", body, auth...)
		if r.status != http.StatusBadRequest || !strings.HasPrefix(r.header.Get("x-amzn-errortype"), "ValidationException") {
			t.Fatalf("%s: %d %v %s", body, r.status, r.header, r.body)
		}
	}
	b.mock.SetCloudSwitches(CloudSwitches{Throttle: true})
	c := bedrockClient(b, goodCreds(), testRegion)
	_, err := c.Converse(context.Background(), &bedrockruntime.ConverseInput{ModelId: aws.String("m"),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "x"}}}}})
	var te *types.ThrottlingException
	if !errors.As(err, &te) {
		t.Fatalf("throttled Converse: %v, want ThrottlingException", err)
	}
	if len(b.mock.Bills()) != 0 {
		t.Fatal("throttled call billed")
	}
}

// A stream ended by an in-stream error carries an event-stream exception the SDK surfaces.
func TestBedrockStreamException(t *testing.T) {
	b := bedrockMockTLS(t)
	c := bedrockruntime.New(bedrockruntime.Options{BaseEndpoint: aws.String(b.srv.URL), Region: testRegion,
		BearerAuthTokenProvider: bearer.StaticTokenProvider{Token: bearer.Token{Value: "bedrock-api-key-1"}},
		AuthSchemePreference:    []string{"httpBearerAuth"}, RetryMaxAttempts: 1,
		HTTPClient: tamperClient{b.srv.Client(), func(r *http.Request) { r.Header.Set("x-mock-stream-error-after", "3") }}})
	out, err := c.ConverseStream(context.Background(), &bedrockruntime.ConverseStreamInput{ModelId: aws.String("m"),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "x"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	st := out.GetStream()
	n := 0
	for range st.Events() {
		n++
	}
	var me *types.ModelStreamErrorException
	if n != 3 || !errors.As(st.Err(), &me) {
		t.Fatalf("%d events, err %v; want 3 and ModelStreamErrorException", n, st.Err())
	}
}

// CountTokens counts the prompt an InvokeModel call with the same body is billed.
func TestBedrockCountTokensWithSDK(t *testing.T) {
	b := bedrockMock(t, nil)
	c := bedrockClient(b, goodCreds(), testRegion)
	out, err := c.CountTokens(context.Background(), &bedrockruntime.CountTokensInput{ModelId: aws.String(claudeID),
		Input: &types.CountTokensInputMemberInvokeModel{Value: types.InvokeModelTokensRequest{Body: []byte(invokeBody)}}})
	if err != nil {
		t.Fatalf("CountTokens: %v", err)
	}
	if len(b.mock.Bills()) != 0 {
		t.Fatal("count-tokens billed")
	}
	if _, err := c.InvokeModel(context.Background(), &bedrockruntime.InvokeModelInput{ModelId: aws.String(claudeID),
		Body: []byte(invokeBody)}); err != nil {
		t.Fatal(err)
	}
	bl := b.mock.Bills()[0]
	if got := int64(aws.ToInt32(out.InputTokens)); got != bl.Input+bl.CacheRead+bl.Cache5m {
		t.Fatalf("count %d, billed prompt %+v", got, bl)
	}
}

// An inference-profile ARN (slashes and colons, escaped in the path) is signed, verified and billed whole.
func TestBedrockARNModelID(t *testing.T) {
	b := bedrockMock(t, nil)
	arn := "arn:aws:bedrock:eu-west-3:123456789012:inference-profile/eu.anthropic.claude-mock-v1:0"
	if _, err := bedrockClient(b, goodCreds(), testRegion).InvokeModel(context.Background(), &bedrockruntime.InvokeModelInput{
		ModelId: aws.String(arn), Body: []byte(invokeBody)}); err != nil {
		t.Fatalf("InvokeModel: %v", err)
	}
	if bl := b.mock.Bills(); len(bl) != 1 || bl[0].Model != arn {
		t.Fatalf("bills %+v", bl)
	}
}

// Cut event streams are billed by the first-party rule: InvokeModel's stream by the usage its written
// message_start reported, a Converse stream (usage only in its last event) by the local prompt count.
func TestBedrockCutStreamsBilled(t *testing.T) {
	b := bedrockMock(t, nil)
	auth := []string{"Authorization", "Bearer bedrock-api-key-1", "x-mock-disconnect-after", "3"}
	for _, path := range []string{"/model/m/converse-stream", "/model/" + claudeID + "/invoke-with-response-stream"} {
		body := `{"messages":[{"role":"user","content":[{"text":"hello there friend"}]}]}`
		if strings.Contains(path, "invoke") {
			body = invokeBody
		}
		b.mock.Reset()
		if r := b.call(t, http.MethodPost, path, body, auth...); r.err == nil {
			t.Fatalf("%s: stream not cut", path)
		}
		if _, err := b.mock.Wait(t.Context(), func(r Request) bool { return r.Done }); err != nil {
			t.Fatal(err)
		}
		bl := b.mock.Bills()
		if len(bl) != 1 || bl[0].Provider != ProviderBedrock || bl[0].Input <= 0 {
			t.Fatalf("%s: bills %+v", path, bl)
		}
		if want := map[bool]int64{true: 1, false: 0}[strings.Contains(path, "invoke")]; bl[0].Output != want {
			t.Fatalf("%s: output %d, want %d", path, bl[0].Output, want)
		}
	}
}
