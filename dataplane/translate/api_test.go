package translate

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/shared/testkit"
	"github.com/tollgate/tollgate/shared/vocab"
)

func TestNewUnsupported(t *testing.T) {
	bad := []Pair{
		{Op: vocab.OpGenerateContent, Kind: vocab.KindBetaMessages, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindBetaMessages},
		{Op: vocab.OpGenerateContent, Kind: vocab.KindBetaMessages, DestOp: vocab.OpStreamGenerateContent, DestKind: vocab.KindGammaGenerateContent},
		{Op: vocab.OpGenerateContent, Kind: vocab.KindBeta, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindGamma},
		{Op: vocab.OpCreateImage, Kind: vocab.KindAlpha, DestOp: vocab.OpCreateImage, DestKind: vocab.KindGamma},
		{Op: vocab.OpCreateEmbedding, Kind: vocab.KindBeta, DestOp: vocab.OpCreateEmbedding, DestKind: vocab.KindAlpha},
		{Op: vocab.OpCountTokens, Kind: vocab.KindAlpha, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindBeta},
	}
	for _, p := range bad {
		if _, err := New(p, canon.Options{}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("New(%v) = %v, want ErrUnsupported", p, err)
		}
	}
	n := 0
	for _, c := range allKinds {
		for _, d := range allKinds {
			for _, op := range []vocab.Operation{vocab.OpGenerateContent, vocab.OpStreamGenerateContent} {
				for _, dop := range []vocab.Operation{vocab.OpGenerateContent, vocab.OpStreamGenerateContent} {
					if _, err := New(Pair{Op: op, Kind: c, DestOp: dop, DestKind: d}, canon.Options{}); err == nil {
						n++
					}
				}
			}
		}
	}
	// 12 pairs x (generate, stream, stream->buffered) + 4 same-kind stream->buffered cells
	if n != 12*3+4 {
		t.Errorf("supported generation cells = %d, want %d", n, 12*3+4)
	}
}

func TestModeAndContentType(t *testing.T) {
	tests := []struct {
		p        Pair
		gammaSSE bool
		mode     Mode
		ct       string
	}{
		{Pair{vocab.OpGenerateContent, vocab.KindBetaMessages, vocab.OpGenerateContent, vocab.KindAlphaResponses}, false, ModeBuffered, "application/json"},
		{Pair{vocab.OpStreamGenerateContent, vocab.KindBetaMessages, vocab.OpStreamGenerateContent, vocab.KindAlphaResponses}, false, ModeStream, "text/event-stream"},
		{Pair{vocab.OpStreamGenerateContent, vocab.KindAlphaChatCompletions, vocab.OpGenerateContent, vocab.KindAlphaChatCompletions}, false, ModeSynthesize, "text/event-stream"},
		{Pair{vocab.OpStreamGenerateContent, vocab.KindGammaGenerateContent, vocab.OpStreamGenerateContent, vocab.KindAlphaChatCompletions}, false, ModeStream, "application/json"},
		{Pair{vocab.OpStreamGenerateContent, vocab.KindGammaGenerateContent, vocab.OpStreamGenerateContent, vocab.KindAlphaChatCompletions}, true, ModeStream, "text/event-stream"},
	}
	for _, tt := range tests {
		tr := newT(t, tt.p)
		if _, err := tr.Request(ClientRequest{Body: clientRequestFor(tt.p.Kind, tt.p.Op == vocab.OpStreamGenerateContent), Model: "m", Stream: tt.p.Op == vocab.OpStreamGenerateContent, GammaSSE: tt.gammaSSE}); err != nil {
			t.Fatal(err)
		}
		if tr.Mode() != tt.mode || tr.ContentType() != tt.ct {
			t.Errorf("%v: Mode, ContentType = %v, %q, want %v, %q", tt.p, tr.Mode(), tr.ContentType(), tt.mode, tt.ct)
		}
	}
}

func TestRequestErrorRendering(t *testing.T) {
	for _, k := range allKinds {
		dest := vocab.KindBetaMessages
		if k == dest {
			dest = vocab.KindAlphaChatCompletions
		}
		tr := newT(t, Pair{Op: vocab.OpGenerateContent, Kind: k, DestOp: vocab.OpGenerateContent, DestKind: dest})
		_, err := tr.Request(ClientRequest{Body: readFixture(t, "requests", string(k)+".refused.json"), Model: "m"})
		re := asRequestError(err)
		if re == nil || re.Status != http.StatusBadRequest || re.Field == "" {
			t.Fatalf("%s: Request(refused) = %v, want *RequestError with a field", k, err)
		}
		cr := tr.ErrorBody(err)
		if cr.Status != 400 || !bytes.Contains(cr.Body, []byte(re.Field)) {
			t.Errorf("%s: ErrorBody = %d %s", k, cr.Status, cr.Body)
		}
	}
}

func TestKeepaliveForms(t *testing.T) {
	tests := []struct {
		kind     vocab.Kind
		gammaSSE bool
		want     string
	}{
		{vocab.KindBetaMessages, false, "event: ping\ndata: {\"type\":\"ping\"}\n\n"},
		{vocab.KindAlphaChatCompletions, false, ": keepalive\n"},
		{vocab.KindAlphaResponses, false, ": keepalive\n"},
		{vocab.KindGammaGenerateContent, true, "\r\n\r\n"},
		{vocab.KindGammaGenerateContent, false, "[\n"},
	}
	for _, tt := range tests {
		for _, edge := range []bool{false, true} {
			opts := testOptions()
			opts.Edge = edge
			tr, err := New(Pair{Op: vocab.OpStreamGenerateContent, Kind: tt.kind, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindAlphaChatCompletions}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Request(ClientRequest{Body: clientRequestFor(tt.kind, true), Model: "m", Stream: true, GammaSSE: tt.gammaSSE}); err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := tr.Keepalive(&b); err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if edge || edgeBuild {
				want = ""
			}
			if b.String() != want {
				t.Errorf("%s sse=%v edge=%v: Keepalive wrote %q, want %q", tt.kind, tt.gammaSSE, edge, b.String(), want)
			}
		}
	}
}

// TestSynthesizeEdgeShape: the final wire shape is identical with and without live keepalives; the only
// difference is the keepalive bytes before the first event.
func TestSynthesizeEdgeShape(t *testing.T) {
	body := readFixture(t, "responses", "beta_messages.tools.json")
	for _, k := range allKinds {
		for _, gammaSSE := range []bool{true, false} {
			run := func(edge bool) (string, string) {
				opts := testOptions()
				opts.Edge = edge
				tr, err := New(Pair{Op: vocab.OpStreamGenerateContent, Kind: k, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindBetaMessages}, opts)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tr.Request(ClientRequest{Body: clientRequestFor(k, true), Model: "m", Stream: true, GammaSSE: gammaSSE}); err != nil {
					t.Fatal(err)
				}
				var ka, out bytes.Buffer
				for range 2 {
					_ = tr.Keepalive(&ka)
				}
				if err := tr.Synthesize(&out, 200, nil, body); err != nil {
					t.Fatal(err)
				}
				return ka.String(), out.String()
			}
			kaLive, live := run(false)
			_, edge := run(true)
			if k == vocab.KindGammaGenerateContent && !gammaSSE && !edgeBuild {
				// the array opener went out with the first keepalive
				if !strings.HasPrefix(kaLive, "[") || "["+live != edge {
					t.Errorf("gamma array: live %q + %q vs edge %q", kaLive, live, edge)
				}
				continue
			}
			if live != edge {
				t.Errorf("%s: edge stream differs from live stream:\n%q\n%q", k, live, edge)
			}
		}
	}
}

func TestRunKeepalive(t *testing.T) {
	tr := newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindBetaMessages, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindAlphaChatCompletions})
	if _, err := tr.Request(ClientRequest{Body: clientRequestFor(vocab.KindBetaMessages, true), Model: "m", Stream: true}); err != nil {
		t.Fatal(err)
	}
	var buf testkit.Buffer
	if edgeBuild {
		// edge builds send no live keepalives: RunKeepalive returns at once
		tr.RunKeepalive(context.Background(), time.Millisecond, &buf, nil)
		if buf.String() != "" {
			t.Fatalf("edge RunKeepalive wrote %q", buf.String())
		}
		return
	}
	flushes := 0
	var mu sync.Mutex
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		tr.RunKeepalive(ctx, 5*time.Millisecond, &buf, func() { mu.Lock(); flushes++; mu.Unlock() })
		close(done)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(buf.String(), "event: ping") < 3 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	<-done
	if n := strings.Count(buf.String(), "event: ping"); n < 3 {
		t.Fatalf("RunKeepalive wrote %d pings, want >= 3", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if flushes < 3 {
		t.Errorf("flushes = %d", flushes)
	}
}

// TestSynthesizeUpstreamError: a failed buffered upstream becomes the client's in-stream error.
func TestSynthesizeUpstreamError(t *testing.T) {
	for _, k := range allKinds {
		tr := newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: k, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindBetaMessages})
		if _, err := tr.Request(ClientRequest{Body: clientRequestFor(k, true), Model: "m", Stream: true, GammaSSE: true}); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := tr.Synthesize(&out, 529, nil, readFixture(t, "errors", "beta.529.json")); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "verloaded") {
			t.Errorf("%s: synthesised error stream %q lacks the upstream message", k, out.String())
		}
		checkClientStream(t, k, true, out.Bytes())
	}
}

// TestStreamFail: a broken upstream yields the client's in-stream error and nothing after it.
func TestStreamFail(t *testing.T) {
	for _, k := range allKinds {
		up := vocab.KindBetaMessages
		if k == up {
			up = vocab.KindAlphaChatCompletions
		}
		tr := newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: k, DestOp: vocab.OpStreamGenerateContent, DestKind: up})
		if _, err := tr.Request(ClientRequest{Body: clientRequestFor(k, true), Model: "m", Stream: true, GammaSSE: true}); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		s := tr.NewStream(&out)
		cut := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"b\",\"usage\":{\"input_tokens\":3}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
		if up == vocab.KindAlphaChatCompletions {
			cut = "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n"
		}
		err := s.Pump(&brokenReader{r: strings.NewReader(cut)}, false, nil)
		if err == nil {
			t.Fatalf("%s: Pump over a broken upstream returned nil", k)
		}
		if err := s.Finish(); err != nil {
			t.Fatal(err)
		}
		o := out.String()
		if !strings.Contains(o, "upstream stream interrupted") || strings.Contains(o, "[DONE]") || strings.Contains(o, "message_stop") {
			t.Errorf("%s: stream after failure = %q", k, o)
		}
		// A cut upstream is a bad gateway: gamma says UNAVAILABLE, as the gateway's own 502 does.
		if k == vocab.KindGammaGenerateContent && (!strings.Contains(o, `"status":"UNAVAILABLE"`) || !strings.Contains(o, `"code":502`)) {
			t.Errorf("gamma: stream after failure = %q, want code 502 status UNAVAILABLE", o)
		}
	}
}

type brokenReader struct{ r *strings.Reader }

func (b *brokenReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil {
		return n, errors.New("connection reset")
	}
	return n, nil
}

// TestIncludeUsage: alpha chat clients get the usage chunk only when they asked for it, while the upstream
// stream always includes usage.
func TestIncludeUsage(t *testing.T) {
	raw := readFixture(t, "streams", "beta_messages.tools.sse")
	for _, include := range []bool{true, false} {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`
		if include {
			body = `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`
		}
		tr := newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindAlphaChatCompletions, DestOp: vocab.OpStreamGenerateContent, DestKind: vocab.KindAlphaResponses})
		up, err := tr.Request(ClientRequest{Body: []byte(body), Model: "m", Stream: true})
		if err != nil {
			t.Fatal(err)
		}
		_ = up
		tr2 := newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindAlphaChatCompletions, DestOp: vocab.OpStreamGenerateContent, DestKind: vocab.KindBetaMessages})
		if _, err := tr2.Request(ClientRequest{Body: []byte(body), Model: "m", Stream: true}); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		s := tr2.NewStream(&out)
		if err := s.Pump(bytes.NewReader(raw), false, nil); err != nil {
			t.Fatal(err)
		}
		has := strings.Contains(out.String(), `"choices":[],"usage":{`)
		if has != include {
			t.Errorf("include_usage=%v: usage chunk present=%v", include, has)
		}
		if strings.Contains(out.String(), `"usage":null`) != include {
			t.Errorf("include_usage=%v: usage:null on chunks mismatch", include)
		}
		if u := s.Usage(); !u.Known || u.InputTotal != 89 || u.OutputTotal != 42 || u.CacheRead != 64 {
			t.Errorf("Usage() = %+v", u)
		}
	}
	// chat upstreams always get include_usage
	tr := newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindBetaMessages, DestOp: vocab.OpStreamGenerateContent, DestKind: vocab.KindAlphaChatCompletions})
	up, err := tr.Request(ClientRequest{Body: clientRequestFor(vocab.KindBetaMessages, true), Model: "m", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(up.Body, []byte(`"stream_options":{"include_usage":true}`)) {
		t.Errorf("alpha chat upstream stream lacks include_usage: %s", up.Body)
	}
}

// TestStreamTruncated: an upstream that closes cleanly before its finish reason is a cut, not a success.
func TestStreamTruncated(t *testing.T) {
	raw := readFixture(t, "streams", "beta_messages.tools.sse")
	cut := raw[:bytes.Index(raw, []byte("event: message_delta"))]
	for _, k := range []vocab.Kind{vocab.KindAlphaChatCompletions, vocab.KindAlphaResponses, vocab.KindGammaGenerateContent} {
		tr := newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: k, DestOp: vocab.OpStreamGenerateContent, DestKind: vocab.KindBetaMessages})
		if _, err := tr.Request(ClientRequest{Body: clientRequestFor(k, true), Model: "m", Stream: true, GammaSSE: true}); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		s := tr.NewStream(&out)
		if err := s.Pump(bytes.NewReader(cut), false, nil); err == nil {
			t.Errorf("%s: Pump(truncated) = nil, want an error", k)
		}
		if s.Complete() || !strings.Contains(out.String(), "upstream stream interrupted") || strings.Contains(out.String(), "[DONE]") {
			t.Errorf("%s: truncated stream relayed as %q", k, out.String())
		}
	}
}

// TestIdentityBuffered: same-kind buffered cells keep every field (known or not) and refuse only what the
// synthesised stream cannot show.
func TestIdentityBuffered(t *testing.T) {
	tr := newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindAlphaChatCompletions, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindAlphaChatCompletions})
	body := `{"model":"alias","messages":[{"role":"user","content":"hi"}],"logit_bias":{"50256":-100},"x_vendor_flag":{"a":1},"stream":true,"stream_options":{"include_usage":true}}`
	up, err := tr.Request(ClientRequest{Body: []byte(body), Model: "real-model", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"logit_bias":{"50256":-100}`, `"x_vendor_flag":{"a":1}`, `"model":"real-model"`} {
		if !bytes.Contains(up.Body, []byte(want)) {
			t.Errorf("identity request lost %s: %s", want, up.Body)
		}
	}
	if bytes.Contains(up.Body, []byte(`"stream"`)) {
		t.Errorf("identity request still streams: %s", up.Body)
	}
	tr = newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindAlphaChatCompletions, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindAlphaChatCompletions})
	if _, err := tr.Request(ClientRequest{Body: []byte(`{"model":"m","messages":[],"n":3,"stream":true}`), Model: "m", Stream: true}); asRequestError(err) == nil || asRequestError(err).Field != "n" {
		t.Errorf("identity n=3: %v, want refusal of n", err)
	}
}

func TestSynthesizeWhile(t *testing.T) {
	body := readFixture(t, "responses", "gamma_generate_content.tools.json")
	for _, fail := range []bool{false, true} {
		tr := newT(t, Pair{Op: vocab.OpStreamGenerateContent, Kind: vocab.KindBetaMessages, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindGammaGenerateContent})
		if _, err := tr.Request(ClientRequest{Body: clientRequestFor(vocab.KindBetaMessages, true), Model: "m", Stream: true}); err != nil {
			t.Fatal(err)
		}
		var buf testkit.Buffer
		err := tr.SynthesizeWhile(context.Background(), 2*time.Millisecond, &buf, nil, func(context.Context) (int, http.Header, []byte, error) {
			time.Sleep(30 * time.Millisecond)
			if fail {
				return 0, nil, nil, errors.New("dial tcp: refused")
			}
			return 200, nil, body, nil
		})
		out := buf.String()
		if fail {
			if err == nil || !strings.Contains(out, "event: error") {
				t.Errorf("failed fetch: err=%v out=%q", err, out)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !edgeBuild && !strings.HasPrefix(out, "event: ping") {
			t.Errorf("no keepalive before the stream: %q", out[:40])
		}
		if !strings.HasSuffix(out, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
			t.Errorf("stream does not end with message_stop: %q", out)
		}
	}
}
