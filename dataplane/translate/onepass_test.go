package translate

import (
	"errors"
	"testing"

	"github.com/tollgate/tollgate/shared/vocab"
)

// TestOnePassKeepsErrorOrder: contents are read in the body's one pass, but an error inside a content is
// reported where the decoder reported it when it read the content in a second pass: after the body's
// syntax errors and the refusals of the members and messages before it, before those after it. Each body
// also agrees with the reference decoder (diffRequest).
func TestOnePassKeepsErrorOrder(t *testing.T) {
	cases := []struct {
		kind  vocab.Kind
		body  string
		field string // "" when the request is translated
	}{
		{vocab.KindBetaMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`, "messages[0].content"},
		{vocab.KindBetaMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"bad","content":"x"},{"role":"user","content":5}]}`, "messages[0].role"},
		{vocab.KindBetaMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":5},{"role":"bad","content":"x"}]}`, "messages[0].content"},
		{vocab.KindBetaMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":5}]}],"tools":[}`, "body"},
		{vocab.KindBetaMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":5}]}],"mcp_servers":[{}]}`, "mcp_servers"},
		{vocab.KindBetaMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":5}],"content":"ok"}]}`, ""},
		{vocab.KindBetaMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"ok","content":{"a":1}}]}`, "messages[0].content"},
		{vocab.KindGammaGenerateContent, `{"contents":[{"role":"user","parts":[{"text":"a"}]},{"role":"user","parts":{"x":1}}]}`, "contents[1].parts"},
		{vocab.KindGammaGenerateContent, `{"contents":[{"role":"user","parts":{"x":1}}],"cachedContent":"c"}`, "cachedContent"},
		{vocab.KindGammaGenerateContent, `{"contents":[{"role":"user","parts":[{"text":5}]}]}`, "contents[0].parts[0].text"},
		{vocab.KindGammaGenerateContent, `{"contents":[{"role":"user","parts":[{"thought":"x"}]}],"x":[1,]}`, "body"},
		{vocab.KindAlphaResponses, `{"model":"m","input":[{"type":5}],"previous_response_id":"r"}`, "previous_response_id"},
		{vocab.KindAlphaResponses, `{"model":"m","input":[{"type":5}]}`, "input"},
		{vocab.KindAlphaResponses, `{"model":"m","input":5}`, "input"},
		{vocab.KindAlphaResponses, `{"model":"m","input":"hi \u00e9"}`, ""},
		{vocab.KindAlphaResponses, `{"model":"m","input":[{"type":5}],"input":"ok"}`, ""},
		{vocab.KindAlphaChatCompletions, `{"model":"m","messages":[{"role":"user","content":"a\nb"},{"role":"system","content":["x"]}]}`, "messages[1].content"},
		{vocab.KindAlphaChatCompletions, `{"model":"m","messages":[{"role":"user","content":"a","content":null}]}`, ""},
	}
	for _, c := range cases {
		i := 0
		for i < len(requestDecoders) && requestDecoders[i].kind != c.kind {
			i++
		}
		diffRequest(t, []byte(c.body), i)
		st := newReqState(testOptions())
		st.client, st.upstream = c.kind, vocab.KindBetaMessages
		_, err := codecFor(c.kind).decodeRequest([]byte(c.body), st)
		var re *RequestError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v, want it translated", c.body, err)
		case c.field != "" && (!errors.As(err, &re) || re.Field != c.field):
			t.Errorf("%s: %v, want a refusal of %s", c.body, err, c.field)
		}
	}
}
