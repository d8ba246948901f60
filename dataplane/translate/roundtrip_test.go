package translate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/shared/vocab"
)

// decodeIR decodes a request of kind k into the canonical form.
func decodeIR(t *testing.T, k vocab.Kind, body []byte) *canon.Request {
	t.Helper()
	st := canon.NewState(testOptions())
	st.Client = k
	r, err := codecFor(k).DecodeRequest(body, st)
	if err != nil {
		t.Fatalf("decode %s: %v\n%s", k, err, body)
	}
	return r
}

// comparable view: the messages, tools and tool choice, which must survive a round trip.
type rtView struct {
	System []string
	Msgs   []canon.Message
	Tools  []string
	Choice *canon.ToolChoice
	Max    *int
}

func view(r *canon.Request, dropThinking bool) rtView {
	v := rtView{System: r.System, Choice: r.ToolChoice, Max: r.MaxTokens}
	for _, m := range mergeTurns(r.Messages) {
		var ps []canon.Part
		for _, p := range m.Parts {
			if p.Type == canon.PartThinking && dropThinking || p.Type == canon.PartThinking && p.Signature == "" {
				continue
			}
			x := p.Get()
			x.ItemID, x.Detail = "", ""
			p = p.WithExtra(x)
			if p.Type == canon.PartThinking {
				p.Text = "" // gamma needs only the signature replayed; thought text is not sent back
			}
			if p.Type == canon.PartToolResult {
				// text results compare by value
				p.ResultParts = []canon.Part{{Type: canon.PartText, Text: canon.TextOf(p.ResultParts)}}
			}
			if len(p.Args) > 0 {
				var a any
				_ = json.Unmarshal(p.Args, &a)
				p.Args, _ = json.Marshal(a)
			}
			ps = append(ps, p)
		}
		if len(ps) > 0 {
			v.Msgs = append(v.Msgs, canon.Message{Role: m.Role, Parts: ps})
		}
	}
	for _, tl := range r.Tools {
		var a any
		_ = json.Unmarshal(tl.Parameters, &a)
		b, _ := json.Marshal(a)
		v.Tools = append(v.Tools, tl.Name+":"+tl.Description+":"+string(b))
	}
	return v
}

// TestRoundTripRequest: client -> upstream -> (decoded as that client) keeps messages, tools, tool choice.
func TestRoundTripRequest(t *testing.T) {
	for _, a := range allKinds {
		body := readFixture(t, "requests", string(a)+".basic.json")
		orig := decodeIR(t, a, body)
		for _, b := range allKinds {
			if a == b {
				continue
			}
			t.Run(string(a)+"_via_"+string(b), func(t *testing.T) {
				ab := newT(t, Pair{Op: vocab.OpGenerateContent, Kind: a, DestOp: vocab.OpGenerateContent, DestKind: b})
				up, err := ab.Request(ClientRequest{Body: body, Model: "m"})
				if err != nil {
					t.Fatalf("%s -> %s refused the basic fixture: %v", a, b, err)
				}
				ba := newT(t, Pair{Op: vocab.OpGenerateContent, Kind: b, DestOp: vocab.OpGenerateContent, DestKind: a})
				back, err := ba.Request(ClientRequest{Body: up.Body, Model: "m"})
				if err != nil {
					t.Fatalf("%s -> %s: %v\n%s", b, a, err, up.Body)
				}
				got := decodeIR(t, a, back.Body)
				// the fixtures' thinking was minted by the client's own family: no other family can verify it,
				// so it is dropped on the way (TestSignatureRoundTrip covers carried signatures)
				wv, gv := view(orig, true), view(got, true)
				// gamma has no ids of its own when the client omitted them: compare structure without ids
				if a == vocab.KindGammaGenerateContent || b == vocab.KindGammaGenerateContent {
					stripIDs(&wv)
					stripIDs(&gv)
				}
				if !reflect.DeepEqual(wv.Msgs, gv.Msgs) {
					t.Errorf("messages changed:\n got  %+v\n want %+v", gv.Msgs, wv.Msgs)
				}
				if !reflect.DeepEqual(wv.Tools, gv.Tools) || !reflect.DeepEqual(wv.Choice, gv.Choice) || !reflect.DeepEqual(wv.System, gv.System) {
					t.Errorf("tools/choice/system changed:\n got  %+v %+v %q\n want %+v %+v %q", gv.Tools, gv.Choice, gv.System, wv.Tools, wv.Choice, wv.System)
				}
			})
		}
	}
}

func stripIDs(v *rtView) {
	for i := range v.Msgs {
		for j := range v.Msgs[i].Parts {
			v.Msgs[i].Parts[j].CallID = ""
		}
	}
}

// TestSignatureRoundTrip: a signature an upstream minted reaches a client of another family, comes back in
// that client's next request, and is replayed to the upstream in the upstream's own field.
func TestSignatureRoundTrip(t *testing.T) {
	cases := []struct {
		up   vocab.Kind
		fx   string
		want []string
	}{
		{vocab.KindBetaMessages, "text", []string{`"signature":"EqQBsig=="`, `"thinking":"User wants weather."`}},
		{vocab.KindBetaMessages, "tools", []string{`"signature":"EqQBsig2=="`}},
		{vocab.KindGammaGenerateContent, "text", []string{`"text":"4 C and cloudy.","thoughtSignature":"CiQBsig="`}},
		{vocab.KindGammaGenerateContent, "tools", []string{`"args":{"city":"Oslo"}},"thoughtSignature":"CiQBsig="`}},
		{vocab.KindAlphaResponses, "text", []string{`"encrypted_content":"gAAAAB-enc"`, `"id":"rs_1"`}},
	}
	for _, tc := range cases {
		for _, client := range []vocab.Kind{vocab.KindAlphaResponses, vocab.KindBetaMessages, vocab.KindGammaGenerateContent} {
			if client == tc.up {
				continue
			}
			t.Run(string(client)+"_from_"+string(tc.up)+"_"+tc.fx, func(t *testing.T) {
				tr := newT(t, Pair{Op: vocab.OpGenerateContent, Kind: client, DestOp: vocab.OpGenerateContent, DestKind: tc.up})
				if _, err := tr.Request(ClientRequest{Body: clientRequestFor(client, false), Model: "m"}); err != nil {
					t.Fatal(err)
				}
				out, err := tr.Response(readFixture(t, "responses", string(tc.up)+"."+tc.fx+".json"))
				if err != nil {
					t.Fatal(err)
				}
				next := nextTurn(t, client, out)
				tr2 := newT(t, Pair{Op: vocab.OpGenerateContent, Kind: client, DestOp: vocab.OpGenerateContent, DestKind: tc.up})
				up, err := tr2.Request(ClientRequest{Body: next, Model: "m"})
				if err != nil {
					t.Fatalf("next turn refused: %v\n%s", err, next)
				}
				for _, w := range tc.want {
					if !bytes.Contains(up.Body, []byte(w)) {
						t.Errorf("upstream request lacks %s:\n%s\n(client saw %s)", w, up.Body, out)
					}
				}
			})
		}
	}
}

// nextTurn builds the client's follow-up request replaying the assistant turn it received.
func nextTurn(t *testing.T, client vocab.Kind, resp []byte) []byte {
	t.Helper()
	var body any
	switch client {
	case vocab.KindBetaMessages:
		var r struct {
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(resp, &r)
		body = map[string]any{"model": "b", "max_tokens": 100, "messages": []any{
			map[string]any{"role": "user", "content": "hi"},
			map[string]any{"role": "assistant", "content": r.Content},
			map[string]any{"role": "user", "content": "more"}}}
	case vocab.KindGammaGenerateContent:
		var r struct {
			Candidates []struct {
				Content json.RawMessage `json:"content"`
			} `json:"candidates"`
		}
		_ = json.Unmarshal(resp, &r)
		body = map[string]any{"contents": []any{
			map[string]any{"role": "user", "parts": []any{map[string]any{"text": "hi"}}},
			r.Candidates[0].Content,
			map[string]any{"role": "user", "parts": []any{map[string]any{"text": "more"}}}}}
	case vocab.KindAlphaResponses:
		var r struct {
			Output []json.RawMessage `json:"output"`
		}
		_ = json.Unmarshal(resp, &r)
		input := []any{map[string]any{"role": "user", "content": "hi"}}
		for _, o := range r.Output {
			input = append(input, o)
		}
		input = append(input, map[string]any{"role": "user", "content": "more"})
		body = map[string]any{"model": "m", "input": input}
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mergeTurns merges consecutive messages of the same role, as the beta and gamma encoders write them
// (alternating turns), so round trips through those dialects compare equal.
func mergeTurns(msgs []canon.Message) []canon.Message {
	out := make([]canon.Message, 0, len(msgs))
	for _, m := range msgs {
		if len(m.Parts) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == m.Role {
			out[n-1].Parts = append(out[n-1].Parts, m.Parts...)
			continue
		}
		out = append(out, canon.Message{Role: m.Role, Parts: append([]canon.Part(nil), m.Parts...)})
	}
	return out
}
