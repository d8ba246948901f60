package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/dialect/beta"
	"github.com/tollgate/tollgate/dataplane/dialect/gamma"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/vocab"
)

// The reference for the hand-written request decoders (jsonkit.Reader, the dialects' read.go files): the
// go-json-experiment decoder as the request path configured it (jsonkit.Unmarshal), which filled
// the same structs before.

// readAll decodes b as exactly one value with read.
func readAll(b []byte, read func(d *jsonkit.Reader) error) error {
	d := jsonkit.Reader{B: b}
	return d.Done(read(&d))
}

// handCase compares one hand-written decoder with the reference on data.
type handCase struct {
	name string
	run  func(t *testing.T, data []byte)
}

// diffDecode decodes data into a T with the reference and with hand and fails unless both fail or both
// succeed with equal values. partial: the callers use the value also after an error (it must match then
// too).
func diffDecode[T any](t *testing.T, data []byte, hand func(*jsonkit.Reader, *T) error, partial bool) {
	t.Helper()
	var want, got T
	errWant := jsonkit.Unmarshal(data, &want)
	errGot := readAll(data, func(d *jsonkit.Reader) error { return hand(d, &got) })
	if (errWant == nil) != (errGot == nil) {
		t.Fatalf("%T %q: reference error %v, hand-written error %v", want, data, errWant, errGot)
	}
	if (errWant == nil || partial) && !reflect.DeepEqual(want, got) {
		t.Fatalf("%T %q:\nreference    %#v\nhand-written %#v", want, data, want, got)
	}
}

// refGammaResultIn is gamma.ResultIn as the reference read it.
type refGammaResultIn struct {
	Error  json.RawMessage `json:"error,case:strict"`
	Output json.RawMessage `json:"output,case:strict"`
	Other  jsontext.Value  `json:",unknown"`
}

var handCases = []handCase{
	{"respRequestIn", func(t *testing.T, b []byte) {
		diffDecode(t, b, func(d *jsonkit.Reader, v *alpha.RespRequestIn) error {
			err := v.Read(d)
			v.InputRead = alpha.RespInputRead{} // read in the same pass (compared by TestRequestDecodersAgree)
			return err
		}, false)
	}},
	{"respToolIn", func(t *testing.T, b []byte) {
		diffDecode(t, b, func(d *jsonkit.Reader, v *alpha.RespToolIn) error { return v.Read(d) }, false)
	}},
	{"respItems", func(t *testing.T, b []byte) { diffDecode(t, b, alpha.ReadRespItems, false) }},
	{"respItemsIn", func(t *testing.T, b []byte) {
		diffDecode(t, b, func(d *jsonkit.Reader, v *[]alpha.RespItem) error {
			var parts []alpha.RespContentPart
			err := alpha.ReadRespItemsIn(d, v, &parts)
			for i := range *v { // read in the same pass (compared by TestRequestDecodersAgree)
				it := &(*v)[i]
				it.ContentRead, it.OutputRead = alpha.RespValueRead{}, alpha.RespValueRead{}
				if it.Arguments != nil { // the same value, not in the item
					s := *it.Arguments
					it.Arguments = &s
				}
				it.Args = ""
			}
			return err
		}, false)
	}},
	{"respContent", func(t *testing.T, b []byte) { diffDecode(t, b, alpha.ReadRespContent, false) }},
	{"respSummary", func(t *testing.T, b []byte) {
		// the caller reads a summary of a valid request (or none: an absent member), and keeps a partly read one
		if len(b) > 0 && !jsontext.Value(b).IsValid() {
			return
		}
		diffDecode(t, b, alpha.ReadRespSummary, true)
	}},
	{"chatRequestIn", func(t *testing.T, b []byte) {
		diffDecode(t, b, func(d *jsonkit.Reader, v *alpha.ChatRequestIn) error {
			err := v.Read(d)
			v.Calls = nil               // the storage of the messages' tool calls
			for i := range v.Messages { // read in the same pass (compared by TestRequestDecodersAgree)
				v.Messages[i].Text, v.Messages[i].IsText = "", false
			}
			return err
		}, false)
	}},
	{"chatToolIn", func(t *testing.T, b []byte) {
		diffDecode(t, b, func(d *jsonkit.Reader, v *alpha.ChatToolIn) error { return v.Read(d) }, false)
	}},
	{"chatFormatIn", func(t *testing.T, b []byte) {
		diffDecode(t, b, func(d *jsonkit.Reader, v *alpha.ChatFormatIn) error { return v.Read(d) }, false)
	}},
	{"chatToolChoiceIn", func(t *testing.T, b []byte) {
		diffDecode(t, b, func(d *jsonkit.Reader, v *alpha.ChatToolChoiceIn) error { return v.Read(d) }, false)
	}},
	{"chatParts", func(t *testing.T, b []byte) { diffDecode(t, b, alpha.ReadChatParts, false) }},
	{"textParts", func(t *testing.T, b []byte) { diffDecode(t, b, canon.ReadTextParts, false) }},
	{"strings", func(t *testing.T, b []byte) { diffDecode(t, b, (*jsonkit.Reader).Strs, false) }},
	{"betaRequestIn", func(t *testing.T, b []byte) {
		diffDecode(t, b, func(d *jsonkit.Reader, v *beta.RequestIn) error {
			err := v.Read(d)
			// What the reference cannot read: the contents read in the same pass (compared with the
			// reference by TestRequestDecodersAgree, which converts them).
			v.Blocks = nil
			for i := range v.Messages {
				v.Messages[i].Pre = beta.Content{}
			}
			return err
		}, false)
	}},
	{"betaBlocks", func(t *testing.T, b []byte) { diffDecode(t, b, beta.ReadBlocks, false) }},
	{"betaToolIn", func(t *testing.T, b []byte) {
		diffDecode(t, b, func(d *jsonkit.Reader, v *beta.ToolIn) error { return v.Read(d) }, false)
	}},
	{"betaToolChoiceIn", func(t *testing.T, b []byte) {
		diffDecode(t, b, func(d *jsonkit.Reader, v *beta.ToolChoiceIn) error { return v.Read(d) }, false)
	}},
	{"gammaRequestIn", func(t *testing.T, b []byte) {
		diffDecode(t, b, func(d *jsonkit.Reader, v *gamma.RequestIn) error {
			err := v.Read(d)
			v.Parts = nil // read in the same pass (compared by TestRequestDecodersAgree)
			for i := range v.Contents {
				v.Contents[i].Pre = gamma.PartsRead{}
			}
			return err
		}, false)
	}},
	{"gammaPartsIn", func(t *testing.T, b []byte) {
		diffDecode(t, b, func(d *jsonkit.Reader, v *[]gamma.PartIn) error {
			err := gamma.ReadPartsIn(d, v)
			for i := range *v {
				(*v)[i].Fn = gamma.FnRead{} // read in the same pass (compared by TestRequestDecodersAgree)
			}
			return err
		}, false)
	}},
	{"gammaCall", func(t *testing.T, b []byte) {
		diffDecode(t, b, func(d *jsonkit.Reader, v *gamma.Call) error { return v.Read(d) }, false)
	}},
	{"gammaFuncResp", func(t *testing.T, b []byte) {
		diffDecode(t, b, func(d *jsonkit.Reader, v *gamma.FuncResp) error {
			err := v.Read(d)
			v.Result = gamma.ResultRead{} // read in the same pass (compared by TestRequestDecodersAgree)
			return err
		}, false)
	}},
	{"gammaTool", func(t *testing.T, b []byte) {
		// the caller reads a tool only after gamma.ReadToolKeys accepted it, and keeps a partly read one
		if readAll(b, func(d *jsonkit.Reader) error { _, _, err := gamma.ReadToolKeys(d); return err }) != nil {
			return
		}
		diffDecode(t, b, func(d *jsonkit.Reader, v *gamma.Tool) error { return v.Read(d) }, true)
	}},
	{"gammaToolKeys", func(t *testing.T, b []byte) {
		var probe map[string]json.RawMessage
		errWant := jsonkit.Unmarshal(b, &probe)
		var builtin string
		var found bool
		errGot := readAll(b, func(d *jsonkit.Reader) (err error) { builtin, found, err = gamma.ReadToolKeys(d); return err })
		if (errWant == nil) != (errGot == nil) {
			t.Fatalf("%q: reference error %v, hand-written error %v", b, errWant, errGot)
		}
		if errWant != nil {
			return
		}
		// the reference refused the first built-in member of its map's (random) order; any one is right
		want := false
		for k := range probe {
			want = want || k != "functionDeclarations" && k != "function_declarations"
		}
		if _, ok := probe[builtin]; found != want || found && (!ok || builtin == "functionDeclarations" || builtin == "function_declarations") {
			t.Fatalf("%q: built-in member %q (%v), reference members %v", b, builtin, found, probe)
		}
	}},
	{"gammaResultIn", func(t *testing.T, b []byte) {
		var want refGammaResultIn
		var got gamma.ResultIn
		errWant := jsonkit.Unmarshal(b, &want)
		errGot := readAll(b, got.Read)
		if (errWant == nil) != (errGot == nil) {
			t.Fatalf("%q: reference error %v, hand-written error %v", b, errWant, errGot)
		}
		if errWant == nil && (!reflect.DeepEqual(want.Error, got.Error) || !reflect.DeepEqual(want.Output, got.Output) || (len(want.Other) > 0) != got.Other) {
			t.Fatalf("%q:\nreference    %#v\nhand-written %#v", b, want, got)
		}
	}},
}

// handSeeds are the golden request bodies and every value inside them.
func handSeeds(t testing.TB) [][]byte {
	paths, _ := filepath.Glob(filepath.Join("testdata", "requests", "*.json"))
	var out [][]byte
	var walk func(v any)
	walk = func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
		switch x := v.(type) {
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		walk(v)
	}
	for _, k := range allKinds {
		out = append(out, benchRequest(k))
	}
	return out
}

// handEdgeCases are inputs where the rules of the reference are easy to miss.
var handEdgeCases = []string{
	// text the library re-encodes with escapes (diffRequest): <, >, &, U+2028, and an escaped quote
	`{"model":"m","messages":[{"role":"user","content":"a<b>&c \"d\""}],"contents":[{"role":"user","parts":[{"text":"a<b>&c "}]}],"input":"a<b>&c","max_tokens":5}`,
	``, ` `, `null`, ` null `, `nul`, `{}`, `[]`, `{} x`, `{}}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a" 1}`,
	`{"contents":null}`, `{"contents":[]}`, `{"contents":[null]}`, `{"contents":{}}`, `{"Contents":[{"ROLE":"model"}]}`,
	`{"contents":[{"role":"model","role":null}]}`, `{"contents":[{"role":"model","role":1}]}`,
	`{"service_tier":"a","SERVICE_TIER":"b","serviceTier":"c","ServiceTier":"d","servicetier":"e"}`,
	`{"generationConfig":{"topK":1},"generationConfig":{"topP":0.5}}`, `{"generationConfig":{"topK":1},"generationConfig":null}`,
	`{"generationConfig":{"topK":1.0}}`, `{"generationConfig":{"topK":1e2}}`, `{"generationConfig":{"topK":-0}}`,
	`{"generationConfig":{"topK":9223372036854775807}}`, `{"generationConfig":{"topK":9223372036854775808}}`,
	`{"generationConfig":{"topK":-9223372036854775808}}`, `{"generationConfig":{"topK":-9223372036854775809}}`,
	`{"generationConfig":{"topK":99999999999999999999999}}`, `{"generationConfig":{"topK":01}}`,
	`{"generationConfig":{"temperature":1e400}}`, `{"generationConfig":{"temperature":1e-400}}`, `{"generationConfig":{"temperature":-0.0}}`,
	`{"generationConfig":{"temperature":"1"}}`, `{"generationConfig":{"temperature":1.}}`, `{"generationConfig":{"temperature":.5}}`,
	`{"generationConfig":{"stopSequences":[]}}`, `{"generationConfig":{"stopSequences":["a",null]}}`, `{"generationConfig":{"stopSequences":"a"}}`,
	`{"generationConfig":{"responseLogprobs":null}}`, `{"generationConfig":{"thinkingConfig":{"includeThoughts":null}}}`,
	`{"cachedContent":"\u0061\ud83d\ude00"}`, `{"cachedContent":"\ud83d"}`, `{"cachedContent":"\ude00\ud83d"}`, `{"cachedContent":"\ud83d\u0041"}`,
	`{"cachedContent":"\x"}`, `{"cachedContent":"\u12"}`, "{\"cachedContent\":\"\x01\"}", "{\"cachedContent\":\"\xff\"}",
	"{\"cachedContent\":\"\xe2\x82\"}", "{\"cachedContent\":\"\xef\xbf\xbd\"}", `{"cachedContent":"\/"}`,
	`{"\u0063achedContent":"x"}`, `{"tools":[{"functionDeclarations":[{"name":"a","description":5},{"name":"b"}]}]}`,
	`{"functionDeclarations":[{"name":"a"}],"functionDeclarations":5}`, `{"functionDeclarations":[{"name":"a"}],"functionDeclarations":[5]}`,
	`{"functionDeclarations":[{"name":"a"}],"functionDeclarations":null}`, `{"function_declarations":[{"name":"a"}],"googleSearch":{}}`, `{"":1}`, `{"functionDeclarations":[],"":{}}`,
	`{"error":null}`, `{"output":1,"Output":2}`, `{"Error":1}`, `{"output":{"a":[1,{"b":null}]}}`, `5`, `"x"`,
	`[{"text":"a","text":null}]`, `[{"text":"a","thought":"yes"}]`, `[{"inlineData":null}]`, `[{"inlineData":{"mimeType":"a"},"inlineData":{"data":"b"}}]`,
	`[{"functionCall":{"name":"f","args":{"x":1}}}]`, `{"name":"f","args":null}`, `{"name":"f","Name":"g","NAME":null}`,
	`{"max_tokens":1,"MAX_TOKENS":null}`, `{"thinking":{"type":"enabled","budget_tokens":1.5}}`, `{"thinking":{"budget_tokens":null}}`,
	`{"output_config":{"format":{"type":"json_schema"},"format":{"schema":{}}}}`, `{"metadata":null}`, `{"stream":1}`,
	`[{"type":"thinking","thinking":null,"signature":"s"}]`, `[{"type":"image","source":{"type":"url"},"source":{"url":"u"}}]`,
	`[{"type":"tool_result","is_error":null,"content":[{"type":"text"}]}]`, `{"type":"tool","disable_parallel_tool_use":true}`,
	`{"Tools":[1],"tools":null}`, `{"TOOLS":[]}`, `{"stream_options":{"include_usage":true},"stream_options":{}}`,
	`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f"},"function":null}]}]}`,
	`{"messages":[{"refusal":null},{"refusal":"r","refusal":"s"}]}`, `{"type":"function","function":{"strict":null}}`,
	`{"type":"json_schema","json_schema":{"strict":true},"json_schema":null}`, `{"type":"function","function":{"name":"f"},"FUNCTION":{}}`,
	`[{"type":"image_url","image_url":{"url":"u"},"image_url":{"detail":"d"}}]`, `[{"type":"file","file":null}]`, `[null,{"text":null}]`,
	`{"reasoning":{"effort":"low"},"reasoning":{"summary":"auto"}}`, `{"text":{"format":null}}`, `{"text":{"format":{"type":"json_schema","strict":false}}}`,
	`{"type":"function","name":"f","Strict":true,"TYPE":null}`, `[{"type":"function_call","arguments":null},{"arguments":"{}"}]`,
	`[{"text":"a"},5,{"text":"b"}]`, `[{"text":"a"},{"text":5}]`, `[{"text":"a"}]`, `{"text":"a"}`, `[{"type":"input_image","image_url":{"url":"x"}}]`,
	`{"temp\u00dfrature":1}`, `{"ſervice_tier":"x"}`, `{"K":1}`,
	strings.Repeat(`[`, 10000) + strings.Repeat(`]`, 10000), strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001),
	`{"a":` + strings.Repeat(`{"a":`, 9999) + `1` + strings.Repeat(`}`, 10000),
}

// TestHandDecodersAgree runs every hand-written decoder on the seeds and the edge cases.
func TestHandDecodersAgree(t *testing.T) {
	inputs := handSeeds(t)
	for _, s := range handEdgeCases {
		inputs = append(inputs, []byte(s))
	}
	for _, c := range handCases {
		t.Run(c.name, func(t *testing.T) {
			for _, b := range inputs {
				c.run(t, b)
			}
		})
	}
}

// FuzzHandDecoders: every hand-written request decoder agrees with the reference on arbitrary input (both
// fail, or both succeed with equal values).
func FuzzHandDecoders(f *testing.F) {
	for _, b := range handSeeds(f) {
		for i := range handCases {
			f.Add(b, uint8(i))
		}
	}
	for _, s := range handEdgeCases {
		for i := range handCases {
			f.Add([]byte(s), uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		handCases[int(which)%len(handCases)].run(t, data)
	})
}

// requestDecoders are the four request decoders, each with the JSON library's reading of the same body into
// the dialect's request struct (jsonkit.Unmarshal: the options every dialect decodes with).
var requestDecoders = []struct {
	kind vocab.Kind
	lib  func(body []byte) error
}{
	{vocab.KindAlphaChatCompletions, func(b []byte) error { var in alpha.ChatRequestIn; return jsonkit.Unmarshal(b, &in) }},
	{vocab.KindAlphaResponses, func(b []byte) error { var in alpha.RespRequestIn; return jsonkit.Unmarshal(b, &in) }},
	{vocab.KindBetaMessages, func(b []byte) error { var in beta.RequestIn; return jsonkit.Unmarshal(b, &in) }},
	{vocab.KindGammaGenerateContent, func(b []byte) error { var in gamma.RequestIn; return jsonkit.Unmarshal(b, &in) }},
}

// reformat is the JSON library's re-encoding of body: the same tokens (duplicate names and member order
// kept) with other whitespace and escapes. ok is false when the library cannot read body.
func reformat(body []byte) (out []byte, ok bool) {
	var buf bytes.Buffer
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true))
	enc := jsontext.NewEncoder(&buf, jsontext.AllowDuplicateNames(true), jsontext.Multiline(true),
		jsontext.WithIndent("\t"), jsontext.EscapeForHTML(true), jsontext.EscapeForJS(true))
	for {
		tok, err := dec.ReadToken()
		if err == io.EOF {
			return buf.Bytes(), true
		}
		if err != nil || enc.WriteToken(tok) != nil {
			return nil, false
		}
	}
}

// compactRaw replaces, in place, every raw JSON value held by v (json.RawMessage) with its compact form, so
// canonical forms decoded from differently formatted bodies compare equal.
func compactRaw(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			compactRaw(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				compactRaw(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			if v.Len() > 0 {
				c := jsontext.Value(bytes.Clone(v.Bytes()))
				if c.Compact(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) == nil {
					v.SetBytes(c)
				}
			}
			return
		}
		for i := range v.Len() {
			compactRaw(v.Index(i))
		}
	}
}

// beta.DecodeRequest decodes body as a request of decoder i, also into reused storage as Translator.Request does
// (which must give the same result).
func decodeRequest(t *testing.T, body []byte, i int) (*canon.Request, error) {
	t.Helper()
	c := requestDecoders[i]
	state := func() *canon.State {
		st := canon.NewState(testOptions())
		st.Client, st.Upstream = c.kind, vocab.KindBetaMessages
		return st
	}
	got, errGot := codecFor(c.kind).DecodeRequest(body, state())
	pooled, errPooled := codecFor(c.kind).(canon.PooledDecoder).DecodeInto(body, state(), dirtyStore(c.kind))
	if (errPooled == nil) != (errGot == nil) || errGot == nil && !reflect.DeepEqual(pooled, got) {
		t.Fatalf("%s %q: decoded into reused storage: %v\n%+v\nwant %v\n%+v", c.kind, body, errPooled, pooled, errGot, got)
	}
	return got, errGot
}

// diffRequest checks request decoder i against the JSON library on body: the decoder refuses the body as
// malformed ("body") exactly when the library cannot read it into the dialect's request struct, and a body the
// library re-encodes with other whitespace and escapes decodes to the same canonical form or the same refusal.
// (Each wire struct the decoder fills is compared with the library's value by FuzzHandDecoders.)
func diffRequest(t *testing.T, body []byte, i int) {
	t.Helper()
	c := requestDecoders[i]
	errLib := c.lib(body)
	got, errGot := decodeRequest(t, body, i)
	var re *canon.RequestError
	if errGot != nil && !errors.As(errGot, &re) {
		t.Fatalf("%s %q: error %v, want a RequestError", c.kind, body, errGot)
	}
	if (errLib != nil) != (re != nil && re.Field == "body") {
		t.Fatalf("%s %q: the JSON library reads it with error %v; the decoder: %v", c.kind, body, errLib, errGot)
	}
	if errLib != nil {
		return
	}
	again, ok := reformat(body)
	if !ok {
		t.Fatalf("%s %q: the library read it into the struct but cannot re-encode it", c.kind, body)
	}
	got2, errGot2 := decodeRequest(t, again, i)
	var re2 *canon.RequestError
	if errGot2 != nil && !errors.As(errGot2, &re2) {
		t.Fatalf("%s %q: error %v, want a RequestError", c.kind, again, errGot2)
	}
	if (re == nil) != (re2 == nil) || re != nil && (re.Field != re2.Field || re.Status != re2.Status) {
		t.Fatalf("%s: %q refused as %v, re-encoded %q as %v", c.kind, body, errGot, again, errGot2)
	}
	if re != nil {
		return
	}
	compactRaw(reflect.ValueOf(got))
	compactRaw(reflect.ValueOf(got2))
	if !reflect.DeepEqual(got, got2) {
		t.Fatalf("%s: canonical forms differ:\n%q\n%+v\nre-encoded %q\n%+v", c.kind, body, got, again, got2)
	}
}

// TestRequestDecodersAgree: the four request decoders agree with the JSON library (diffRequest) on the golden
// requests, the benchmark's and the edge cases.
func TestRequestDecodersAgree(t *testing.T) {
	inputs := handSeeds(t)
	for _, s := range handEdgeCases {
		inputs = append(inputs, []byte(s))
	}
	for i := range requestDecoders {
		for _, b := range inputs {
			diffRequest(t, b, i)
		}
	}
}

// FuzzRequestDecodersAgree: on arbitrary bodies, the request decoders agree with the JSON library (diffRequest).
func FuzzRequestDecodersAgree(f *testing.F) {
	for _, b := range handSeeds(f) {
		for i := range requestDecoders {
			f.Add(b, uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, which uint8) {
		diffRequest(t, body, int(which)%len(requestDecoders))
	})
}
