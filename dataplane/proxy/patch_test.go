package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/tollgate/tollgate/dataplane/sse"
	"github.com/tollgate/tollgate/shared/vocab"
)

func TestPatchModel(t *testing.T) {
	tests := []struct{ body, model, want string }{
		{`{"model":"chat","x":1}`, "m-1", `{"model":"m-1","x":1}`},
		{` {"a":{"model":"inner"}, "model" : "chat" ,"z":[{"u":true}]}`, "up/model", ` {"a":{"model":"inner"}, "model" : "up/model" ,"z":[{"u":true}]}`},
		{`{"model":"c"}`, "q\"uote\\\n", `{"model":"q\"uote\\\n"}`},
		{`{"model":"c"}`, "ünï", `{"model":"ünï"}`},
	}
	for _, tt := range tests {
		req, err := jsonkit.ParseRequest([]byte(tt.body))
		if err != nil {
			t.Fatalf("ParseRequest(%s) = %v", tt.body, err)
		}
		m, err := bodyModel([]byte(tt.body), req)
		if err != nil {
			t.Fatalf("bodyModel(%s) = %v", tt.body, err)
		}
		if m == "" {
			t.Fatalf("bodyModel(%s) empty", tt.body)
		}
		if got := string(req.AppendForwarded(nil, []byte(tt.body), tt.model, true, false)); got != tt.want {
			t.Errorf("AppendForwarded(%s, %q) = %s, want %s", tt.body, tt.model, got, tt.want)
		}
	}
	for _, bad := range []string{`[]`, `{"model":1}`, `{"model":"a\u0062"}`, `{"model":""}`, `{"x":1}`} {
		req, err := jsonkit.ParseRequest([]byte(bad))
		if err == nil {
			_, err = bodyModel([]byte(bad), req)
		}
		if err == nil {
			t.Errorf("bodyModel(%s) accepted", bad)
		}
	}
}

// FuzzPatchModel checks that renaming the model of any JSON object leaves every other member equal and
// the model set to the new name.
func FuzzPatchModel(f *testing.F) {
	f.Add(`{"model":"chat","messages":[{"role":"user","content":"hi"}],"unknown":{"k":[1,2.5e3,null]}}`, "m-1")
	f.Add(`{"a":"}","model":"x","b":"\\\""}`, "y\"z")
	f.Add(` { "model" : "a" } `, "\x00\u2028")
	f.Fuzz(func(t *testing.T, body, model string) {
		var before map[string]any
		if json.Unmarshal([]byte(body), &before) != nil {
			return
		}
		req, err := jsonkit.ParseRequest([]byte(body))
		if err != nil {
			return
		}
		cur, err := bodyModel([]byte(body), req)
		if err != nil {
			return
		}
		if before["model"] != cur {
			t.Fatalf("gateway reads model %q, encoding/json %q", cur, before["model"])
		}
		out := req.AppendForwarded(nil, []byte(body), model, true, false)
		var after map[string]any
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("patched body %q is not JSON: %v", out, err)
		}
		wantModel, _ := json.Marshal(model)
		var wm string
		_ = json.Unmarshal(wantModel, &wm)
		if after["model"] != wm {
			t.Fatalf("model = %q, want %q", after["model"], wm)
		}
		delete(before, "model")
		delete(after, "model")
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("other members changed: %v -> %v", before, after)
		}
	})
}

func TestMultipartModel(t *testing.T) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("prompt", "a cat")
	_ = mw.WriteField("model", "img")
	fw, _ := mw.CreateFormFile("image", "x.png")
	_, _ = fw.Write([]byte{0x89, 'P', 'N', 'G'})
	_ = mw.Close()
	ct := mw.FormDataContentType()
	f, err := multipartFields(ct, b.Bytes())
	if err != nil || f.model != "img" || f.stream {
		t.Fatalf("multipartFields = %+v, %v", f, err)
	}
	out, err := patchMultipartModel(ct, b.Bytes(), "img-1")
	if err != nil {
		t.Fatal(err)
	}
	if f, err := multipartFields(ct, out); err != nil || f.model != "img-1" {
		t.Fatalf("after patch model = %+v, %v", f, err)
	}
	if !bytes.Contains(out, []byte{0x89, 'P', 'N', 'G'}) || !bytes.Contains(out, []byte("a cat")) {
		t.Error("other parts lost")
	}
}

// chunked returns a body that yields s in reads of at most n bytes.
func chunked(s string, n int) io.ReadCloser {
	return io.NopCloser(iotest.HalfReader(&splitReader{s: s, n: n}))
}

type splitReader struct {
	s string
	n int
}

func (r *splitReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.s)
	r.s = r.s[k:]
	return k, nil
}

// TestPassthroughStreamSplits: the passthrough responder relays SSE and JSON-array streams byte for byte
// however the upstream's reads split them, and reads their usage from the same decoding; with the usage
// chunk only the gateway asked for, that chunk is left out with what preceded it since the previous event (a
// comment; the LF of the previous event's CRLF blank line, read with the next line).
func TestPassthroughStreamSplits(t *testing.T) {
	chunk := "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"total_tokens\":10}}\n\n"
	stream := "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\r\n\r\n: comment\n" + chunk + "data: [DONE]\n\n"
	arr := "[{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a]}\"}]}}],\"usageMetadata\":{\"promptTokenCount\":4,\"candidatesTokenCount\":1}}\r\n," +
		"{\"candidates\":[{\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":4,\"candidatesTokenCount\":5,\"totalTokenCount\":9}}]"
	tests := []struct {
		name, ct, body, want string
		kind                 vocab.Kind
		drop                 bool
		in, out              int64
	}{
		{"sse", "text/event-stream", stream, stream, vocab.KindAlphaChatCompletions, false, 7, 3},
		{"sse drop usage", "text/event-stream", stream, strings.Replace(stream, "\n: comment\n"+chunk, "", 1), vocab.KindAlphaChatCompletions, true, 7, 3},
		{"json array", "application/json", arr, arr, vocab.KindGammaGenerateContent, false, 4, 5},
	}
	for _, tt := range tests {
		for _, split := range []int{1, 3, 7, 1 << 20} {
			p := &passthroughResponder{now: time.Now, class: Class{Op: vocab.OpStreamGenerateContent, Kind: tt.kind, Stream: true},
				billable: true, collect: true, dropUsage: tt.drop}
			rec := httptest.NewRecorder()
			resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {tt.ct}}, Body: chunked(tt.body, split)}
			res := p.Respond(context.Background(), rec, resp)
			if rec.Body.String() != tt.want {
				t.Errorf("%s split %d: client got %q, want %q", tt.name, split, rec.Body.String(), tt.want)
			}
			if !res.UsageFound || res.Usage.Input != tt.in || res.Usage.Output != tt.out || res.End != vocab.EndCompleted {
				t.Errorf("%s split %d: usage %+v found %v end %s", tt.name, split, res.Usage, res.UsageFound, res.End)
			}
		}
	}
}

// FuzzPassthroughStream: whatever an upstream streams, the client gets it byte for byte (SSE and JSON array,
// any split), and the usage chunk filter only ever leaves out whole usage chunks.
func FuzzPassthroughStream(f *testing.F) {
	f.Add("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\n\ndata: [DONE]\n\n", 3, false)
	f.Add("[{\"a\":1},\r\n{\"b\":\"]\"}]", 2, true)
	f.Add(": c\r\rdata: x\r", 1, false)
	f.Fuzz(func(t *testing.T, body string, split int, array bool) {
		if split <= 0 {
			split = 1
		}
		ct, kind := "text/event-stream", vocab.KindAlphaChatCompletions
		if array {
			ct, kind = "application/json", vocab.KindGammaGenerateContent
		}
		p := &passthroughResponder{now: time.Now, class: Class{Op: vocab.OpStreamGenerateContent, Kind: kind, Stream: true}, billable: true}
		rec := httptest.NewRecorder()
		p.Respond(context.Background(), rec, &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Body: chunked(body, split)})
		if rec.Body.String() != body {
			t.Fatalf("client got %q, want %q", rec.Body.String(), body)
		}
		if array {
			return
		}
		p = &passthroughResponder{now: time.Now, class: Class{Op: vocab.OpStreamGenerateContent, Kind: kind, Stream: true}, billable: true, dropUsage: true}
		rec = httptest.NewRecorder()
		p.Respond(context.Background(), rec, &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Body: chunked(body, split)})
		d := sse.NewDecoder(strings.NewReader(body))
		var kept []string
		for {
			ev, err := d.Next()
			if err != nil {
				break
			}
			var rel jsonkit.Relay
			if alpha.ReadChatRelay(ev.Data, &rel); !rel.UsageChunk {
				kept = append(kept, string(ev.Data))
			}
		}
		d = sse.NewDecoder(strings.NewReader(rec.Body.String()))
		var got []string
		for {
			ev, err := d.Next()
			if err != nil {
				break
			}
			got = append(got, string(ev.Data))
		}
		if !slices.Equal(got, kept) {
			t.Fatalf("events relayed %q, want %q", got, kept)
		}
	})
}

func TestStripKeyParam(t *testing.T) {
	tests := map[string]string{"": "", "alt=sse": "alt=sse", "key=abc": "", "alt=sse&key=abc": "alt=sse", "key=a&alt=sse&x=1": "alt=sse&x=1", "monkey=1": "monkey=1"}
	for in, want := range tests {
		if got := stripKeyParam(in); got != want {
			t.Errorf("stripKeyParam(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRenamePathModel(t *testing.T) {
	tests := []struct {
		path  string
		class Class
		model string
		want  string
	}{
		{"/v1beta/models/gem:streamGenerateContent", Class{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindGammaGenerateContent}, "g-1-flash", "/v1beta/models/g-1-flash:streamGenerateContent"},
		{"/v1beta/models/gem:countTokens", Class{Op: vocab.OpCountTokens, Kind: vocab.KindGamma}, "tunedModels/x y", "/v1beta/models/tunedModels/x%20y:countTokens"},
		{"/v1beta/models/gem", Class{Op: vocab.OpGetModel, Kind: vocab.KindGamma}, "g-1", "/v1beta/models/g-1"},
		{"/v1/models/chat", Class{Op: vocab.OpGetModel, Kind: vocab.KindAlpha}, "m-1", "/v1/models/m-1"},
	}
	for _, tt := range tests {
		if got := renamePathModel(tt.path, tt.class, tt.model); got != tt.want {
			t.Errorf("renamePathModel(%q, %q) = %q, want %q", tt.path, tt.model, got, tt.want)
		}
	}
}

// TestMultipartFieldsRefuseAmbiguity: a repeated decision field (form decoders disagree on which value
// wins), an over-long model (once truncated) and a non-boolean stream are refused; a "stream" text inside
// a file part is not a field.
func TestMultipartFieldsRefuseAmbiguity(t *testing.T) {
	form := func(build func(mw *multipart.Writer)) (string, []byte) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		build(mw)
		_ = mw.Close()
		return mw.FormDataContentType(), b.Bytes()
	}
	for name, build := range map[string]func(mw *multipart.Writer){
		"model twice":  func(mw *multipart.Writer) { _ = mw.WriteField("model", "a"); _ = mw.WriteField("model", "b") },
		"stream twice": func(mw *multipart.Writer) { _ = mw.WriteField("stream", "false"); _ = mw.WriteField("stream", "true") },
		"long model":   func(mw *multipart.Writer) { _ = mw.WriteField("model", strings.Repeat("m", maxFormField+1)) },
		"stream yes":   func(mw *multipart.Writer) { _ = mw.WriteField("stream", "yes") },
	} {
		ct, body := form(build)
		if f, err := multipartFields(ct, body); err == nil {
			t.Errorf("%s: accepted as %+v", name, f)
		}
	}
	ct, body := form(func(mw *multipart.Writer) {
		_ = mw.WriteField("model", "img")
		fw, _ := mw.CreateFormFile("image", "x.png")
		_, _ = fw.Write([]byte("name=\"stream\"\r\n\r\ntrue\r\n"))
	})
	if f, err := multipartFields(ct, body); err != nil || f.stream || f.model != "img" {
		t.Errorf("file content read as a field: %+v, %v", f, err)
	}
}

// TestPassthroughOversizedEvent: an event beyond the decoders' bound stops the observation, not the relay:
// the client still gets the upstream's bytes exactly (byte for byte, event by event, JSON array), and the
// stream ends completed.
func TestPassthroughOversizedEvent(t *testing.T) {
	big := strings.Repeat("x", sse.DefaultMaxEventSize+10)
	sseBody := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"" + big + "\"}}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n"
	arrBody := "[{\"candidates\":[]},\r\n{\"text\":\"" + big + "\"},\r\n{\"candidates\":[{\"finishReason\":\"STOP\"}]}]"
	for _, tt := range []struct {
		name, ct, body string
		kind           vocab.Kind
		drop           bool
	}{
		{"sse", "text/event-stream", sseBody, vocab.KindAlphaChatCompletions, false},
		{"sse event by event", "text/event-stream", sseBody, vocab.KindAlphaChatCompletions, true},
		{"json array", "application/json", arrBody, vocab.KindGammaGenerateContent, false},
	} {
		p := &passthroughResponder{now: time.Now, class: Class{Op: vocab.OpStreamGenerateContent, Kind: tt.kind, Stream: true},
			billable: true, dropUsage: tt.drop}
		rec := httptest.NewRecorder()
		res := p.Respond(context.Background(), rec, &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {tt.ct}},
			Body: chunked(tt.body, 64<<10)})
		if rec.Body.String() != tt.body {
			t.Errorf("%s: client got %d bytes, want the upstream's %d exactly", tt.name, rec.Body.Len(), len(tt.body))
		}
		if res.End != vocab.EndCompleted {
			t.Errorf("%s: end %s, want completed", tt.name, res.End)
		}
	}
}
