package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"io"
	"testing"

	"github.com/tollgate/tollgate/dataplane/sse"
	"github.com/tollgate/tollgate/shared/vocab"
)

// checkClientStream verifies the framing of a client stream: every event decodes, every payload is JSON
// (except alpha chat's [DONE]), and the dialect's terminal event is last.
func checkClientStream(t *testing.T, client vocab.Kind, gammaSSE bool, out []byte) {
	t.Helper()
	if client == vocab.KindGammaGenerateContent && !gammaSSE {
		d := jsonkit.NewJSONArrayDecoder(bytes.NewReader(out))
		n := 0
		for {
			el, err := d.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("JSON array stream: %v\n%s", err, out)
			}
			if !json.Valid(el) {
				t.Fatalf("element %d is not JSON: %s", n, el)
			}
			n++
		}
		if n == 0 {
			t.Fatal("empty JSON array stream")
		}
		return
	}
	d := sse.NewDecoder(bytes.NewReader(out))
	var last sse.Event
	n := 0
	for {
		ev, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SSE: %v", err)
		}
		n++
		if string(ev.Data) != "[DONE]" && !json.Valid(ev.Data) {
			t.Fatalf("event %d data is not JSON: %s", n, ev.Data)
		}
		if client == vocab.KindBetaMessages || client == vocab.KindAlphaResponses {
			var typ struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(ev.Data, &typ)
			if typ.Type != ev.Name {
				t.Fatalf("event name %q but data.type %q", ev.Name, typ.Type)
			}
		}
		last = ev
		last.Data = append([]byte(nil), ev.Data...)
	}
	if n == 0 {
		t.Fatal("empty stream")
	}
	isErr := bytes.Contains(last.Data, []byte(`"error"`)) || last.Name == "error" || last.Name == "response.failed"
	if isErr {
		return
	}
	switch client {
	case vocab.KindAlphaChatCompletions:
		if string(last.Data) != "[DONE]" {
			t.Errorf("last event %s, want [DONE]", last.Data)
		}
	case vocab.KindBetaMessages:
		if last.Name != "message_stop" {
			t.Errorf("last event %q, want message_stop", last.Name)
		}
	case vocab.KindAlphaResponses:
		if last.Name != "response.completed" && last.Name != "response.incomplete" {
			t.Errorf("last event %q, want response.completed", last.Name)
		}
	}
}
