package translate

import (
	"errors"
	"testing"

	"github.com/tollgate/tollgate/dataplane/canon"
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
		st := canon.NewState(testOptions())
		st.Client, st.Upstream = c.kind, vocab.KindBetaMessages
		_, err := codecFor(c.kind).DecodeRequest([]byte(c.body), st)
		var re *canon.RequestError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v, want it translated", c.body, err)
		case c.field != "" && (!errors.As(err, &re) || re.Field != c.field):
			t.Errorf("%s: %v, want a refusal of %s", c.body, err, c.field)
		}
	}
}

// TestGammaFunctionPartsKeepErrors: a part's functionCall and functionResponse are read in the body's one
// pass, but their errors are the ones (and come where) the second read of the raw value gave: the offset
// counts from the value's start, a later syntax error or an earlier refusal still wins, and the last of
// duplicate members counts. The messages are those of the code that read them twice.
func TestGammaFunctionPartsKeepErrors(t *testing.T) {
	const pre = "translate generate_content/gamma_generate_content -> generate_content/beta_messages request: field "
	cases := []struct{ body, err string }{
		{`{"contents":[{"role":"model","parts":[{"functionCall":5}]}]}`,
			"contents[0].parts[0].functionCall: cannot read JSON number as object at offset 0"},
		{`{"contents":[{"role":"model","parts":[{"functionCall": {"name":"a","args":{"x":1}, "id": [1]}}]}]}`,
			"contents[0].parts[0].functionCall: cannot read JSON array as string at offset 34"},
		{`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"a"},"functionCall":{"name":true}}]}]}`,
			"contents[0].parts[0].functionCall: cannot read JSON boolean as string at offset 8"},
		{`{"contents":[{"role":"model","parts":[{"functionCall":{"name":true}}]}],"cachedContent":5}`,
			"body: invalid generateContent request: cannot read JSON number as string at offset 88"},
		{`{"contents":[{"parts":[{"text":5}]},{"role":"model","parts":[{"functionCall":{"name":true}}]}]}`,
			"contents[0].parts[0].text: not a JSON string"},
		{`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"a","args":{"x":1}}}]},{"role":"user","parts":[{"functionResponse":{"name":"a","response":7,"id":{}}}]}]}`,
			"contents[1].parts[0].functionResponse: cannot read JSON object as string at offset 30"},
		{`{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"b","response":{"output":1}},"functionCall":{"name":1}}]}]}`,
			"contents[0].parts[0].functionCall: cannot read JSON number as string at offset 8"},
		{`{"contents":[{"role":"user","parts":[{"functionCall":{"name":true},"functionCall":{"name":"c"}}]}]}`, ""},
		{`{"contents":[{"role":"model","parts":[{"functionCall":{"name":true},"functionCall":null}]}]}`, ""},
	}
	for _, c := range cases {
		tr, err := New(Pair{Op: vocab.OpGenerateContent, Kind: vocab.KindGammaGenerateContent, DestOp: vocab.OpGenerateContent, DestKind: vocab.KindBetaMessages}, canon.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = tr.Request(ClientRequest{Body: []byte(c.body), Model: "up"})
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v, want it translated", c.body, err)
		case c.err != "" && (err == nil || err.Error() != pre+c.err):
			t.Errorf("%s:\n got %v\nwant %s", c.body, err, pre+c.err)
		}
	}
}
