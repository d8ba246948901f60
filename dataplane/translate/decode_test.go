package translate

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/shared/vocab"
)

// TestDecodeNamesLikeEncodingJSON: the request decoder matches member names as encoding/json does — letters
// folded (strings.EqualFold), '_' and '-' significant — so it reads what the gateway's own body reading and
// the rest of the data plane read. A looser match ("max-completion-tokens" for max_completion_tokens) would
// let a translated request carry a member no other reader saw.
func TestDecodeNamesLikeEncodingJSON(t *testing.T) {
	for _, c := range []struct {
		member string
		want   float64
	}{
		{`"max_completion_tokens":7`, 7},
		{`"Max_Completion_Tokens":7`, 7}, // encoding/json folds case
		{`"max-completion-tokens":7`, DefaultBetaMaxTokens},
		{`"maxcompletiontokens":7`, DefaultBetaMaxTokens},
	} {
		body := `{"model":"m",` + c.member + `,"messages":[{"role":"user","content":"hi"}]}`
		var std struct {
			MaxCompletionTokens *int `json:"max_completion_tokens"`
		}
		if err := json.Unmarshal([]byte(body), &std); err != nil {
			t.Fatal(err)
		}
		if (std.MaxCompletionTokens != nil) != (c.want == 7) {
			t.Fatalf("%s: the expectation disagrees with encoding/json (%v)", c.member, std.MaxCompletionTokens)
		}
		tr, err := New(Pair{Op: vocab.OpGenerateContent, Kind: vocab.KindAlphaChatCompletions, DestOp: vocab.OpGenerateContent,
			DestKind: vocab.KindBetaMessages}, canon.Options{})
		if err != nil {
			t.Fatal(err)
		}
		up, err := tr.Request(ClientRequest{Body: []byte(body), Model: "b"})
		if err != nil {
			t.Fatalf("%s: %v", c.member, err)
		}
		var got struct {
			MaxTokens float64 `json:"max_tokens"`
		}
		if err := json.Unmarshal(up.Body, &got); err != nil {
			t.Fatal(err)
		}
		if got.MaxTokens != c.want {
			t.Errorf("%s: upstream max_tokens %v, want %v", c.member, got.MaxTokens, c.want)
		}
	}
}

// TestDecodedStringsOwnTheirMemory: the canonical form points into the translator's own copy of the body,
// so a caller reusing its buffer after Request cannot change what is sent or answered later.
func TestDecodedStringsOwnTheirMemory(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hello there"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`)
	st := canon.NewState(canon.Options{}) // not lent, as ClientRequest without Lent
	st.Client, st.Upstream = vocab.KindAlphaChatCompletions, vocab.KindBetaMessages
	r, err := codecFor(vocab.KindAlphaChatCompletions).DecodeRequest(body, st)
	if err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = 'x'
	}
	if got := r.Messages[0].Parts[0].Text; got != "hello there" {
		t.Errorf("message text %q after the caller reused its buffer", got)
	}
	if got := r.Tools[0].Name; got != "get_weather" {
		t.Errorf("tool name %q after the caller reused its buffer", got)
	}
}

// TestRefusedFieldPaths: a refused or malformed member is named by its full path although the decoders
// only format it when they fail (canon.FieldPath).
func TestRefusedFieldPaths(t *testing.T) {
	for _, c := range []struct {
		kind vocab.Kind
		body string
		want string
	}{
		{vocab.KindBetaMessages, `{"model":"b","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"server_tool_use","id":"x"}]}]}`,
			"messages[1].content[1]"},
		{vocab.KindBetaMessages, `{"model":"b","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"bogus"}]}]}]}`,
			"messages[0].content[0].content[0]"},
		{vocab.KindAlphaChatCompletions, `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"input_audio"}]}]}`,
			"messages[1].content[0]"},
		{vocab.KindAlphaResponses, `{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"input_text","text":"b"},{"type":"input_audio"}]}]}`,
			"input[1].content[1]"},
		{vocab.KindAlphaResponses, `{"model":"m","input":[{"type":"web_search_call"}]}`, "input[0].type"},
		{vocab.KindGammaGenerateContent, `{"contents":[{"role":"user","parts":[{"text":"a"}]},{"role":"model","parts":[{"text":"b"},{"executableCode":{"code":"1"}}]}]}`,
			"contents[1].parts[1]"},
	} {
		dest := vocab.KindAlphaChatCompletions
		if c.kind == dest {
			dest = vocab.KindBetaMessages
		}
		tr, err := New(Pair{Op: vocab.OpGenerateContent, Kind: c.kind, DestOp: vocab.OpGenerateContent, DestKind: dest}, canon.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = tr.Request(ClientRequest{Body: []byte(c.body), Model: "up"})
		var re *canon.RequestError
		if !errors.As(err, &re) {
			t.Fatalf("%s: %v, want a RequestError", c.want, err)
		}
		if re.Field != c.want {
			t.Errorf("field %q (%s), want %q", re.Field, re.Message, c.want)
		}
	}
}

// TestStreamDecoderReuseKeepsNothing: the stream decoders decode every event into one reused struct, and
// the alpha chat and gamma decoders keep the array of choices/candidates; nothing of an event may show
// through in the next (a stale delta would repeat text, a stale finish reason end the turn twice).
func TestStreamDecoderReuseKeepsNothing(t *testing.T) {
	for _, c := range []struct {
		kind  vocab.Kind
		first string
		next  string
	}{
		{vocab.KindAlphaChatCompletions,
			`{"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"hi","reasoning_content":"r","refusal":"no"},"finish_reason":"stop"},{"index":1,"delta":{"content":"x"}}]}`,
			`{"id":"c1","model":"m","choices":[{"index":0,"delta":{}}]}`},
		{vocab.KindGammaGenerateContent,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"},{"text":"t","thought":true,"thoughtSignature":"s"}]},"finishReason":"STOP","index":0}],"responseId":"r"}`,
			`{"candidates":[{"index":0}],"responseId":"r"}`},
		{vocab.KindBetaMessages,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}}`},
		{vocab.KindAlphaResponses,
			`{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"hi"}`,
			`{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0}`},
	} {
		d := codecFor(c.kind).NewDecoder(&canon.State{})
		first, err := d.Decode("", []byte(c.first), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.kind, err)
		}
		if len(first) == 0 {
			t.Fatalf("%s: the first event decoded to nothing", c.kind)
		}
		next, err := d.Decode("", []byte(c.next), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.kind, err)
		}
		for _, ev := range next {
			if ev.Text != "" || ev.Type == canon.EvFinish || ev.Type == canon.EvSignature {
				t.Errorf("%s: the next event decoded to %+v, left over from the first", c.kind, ev)
			}
		}
	}
}
