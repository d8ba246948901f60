package jsonkit

import "testing"

func TestAppendWithMembers(t *testing.T) {
	m := []byte(`"cost":1.5,"tollgate":{"a":"b"}`)
	for _, tc := range []struct {
		obj  string
		path []string
		want string
		ok   bool
	}{
		{`{"usage":{"prompt_tokens":3}}`, []string{"usage"}, `{"usage":{"prompt_tokens":3,"cost":1.5,"tollgate":{"a":"b"}}}`, true},
		{`{"usage":{ }, "x":1}`, []string{"usage"}, `{"usage":{ "cost":1.5,"tollgate":{"a":"b"}}, "x":1}`, true},
		{`{"type":"response.completed","response":{"id":"r","usage":{"input_tokens":1}}}`, []string{"response", "usage"},
			`{"type":"response.completed","response":{"id":"r","usage":{"input_tokens":1,"cost":1.5,"tollgate":{"a":"b"}}}}`, true},
		{`{"a":1}`, nil, `{"a":1,"cost":1.5,"tollgate":{"a":"b"}}`, true},
		{`{"usage":null}`, []string{"usage"}, ``, false},
		{`{"usage":[1]}`, []string{"usage"}, ``, false},
		{`{"usage":{},"usage":{}}`, []string{"usage"}, ``, false},
		{`{}`, []string{"usage"}, ``, false},
	} {
		got, ok := AppendWithMembers(nil, []byte(tc.obj), m, tc.path...)
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("AppendWithMembers(%s, %v) = %s %v, want %s %v", tc.obj, tc.path, got, ok, tc.want, tc.ok)
		}
		if ok && !ValidJSON(got) {
			t.Errorf("%s is not valid JSON", got)
		}
	}
}

func TestSplitArrayElement(t *testing.T) {
	for _, tc := range []struct{ in, framing, elem string }{
		{`[{"a":1}`, `[`, `{"a":1}`}, {",\r\n{\"a\":2}", ",\r\n", `{"a":2}`}, {`]`, `]`, ``}, {"\r\n]", "\r\n]", ``},
	} {
		f, e := SplitArrayElement([]byte(tc.in))
		if string(f) != tc.framing || string(e) != tc.elem {
			t.Errorf("SplitArrayElement(%q) = %q %q", tc.in, f, e)
		}
	}
}

func TestAppendWithoutMember(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{`{"model":"m","usage":{"include":true},"stream":true}`, `{"model":"m","stream":true}`, true},
		{`{"model":"m", "usage" : {"include":true}}`, `{"model":"m"}`, true},
		{`{"usage":{"include":true},"model":"m"}`, `{"model":"m"}`, true},
		{`{ "usage":{"include":true} }`, `{ }`, true},
		{`{"model":"m"}`, ``, false},
		{`{"usage":1,"usage":2}`, ``, false},
		{`{"us\u0061ge":1}`, ``, false},
	} {
		got, ok := AppendWithoutMember(nil, []byte(tc.in), "usage")
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("AppendWithoutMember(%s) = %s %v, want %s %v", tc.in, got, ok, tc.want, tc.ok)
		}
		if ok && !ValidJSON(got) {
			t.Errorf("%s is not valid JSON", got)
		}
	}
}

// TestPatch: the named members go, the model value is replaced (or added last), every other byte stays, and
// a body that is not one valid object with distinct names is refused.
func TestPatch(t *testing.T) {
	for _, tc := range []struct {
		obj, model string
		del        []string
		want       string
	}{
		{`{"model":"a","stream":true,"x":{"k":[1, 2]}}`, "b", []string{"stream", "stream_options"}, `{"model":"b","x":{"k":[1, 2]}}`},
		{` {"stream":true, "model" : "a" } `, "b\n", []string{"stream"}, `{ "model" : "b\n" } `},
		{`{"x":1}`, "m", nil, `{"x":1,"model":"m"}`},
		{`{"max_tokens":5,"messages":[],"top_k":1}`, "", []string{"max_tokens", "top_k", "metadata"}, `{"messages":[]}`},
		{`{"model":"a"}`, "", []string{"model"}, `{}`},
	} {
		got, err := Patch([]byte(tc.obj), tc.model, tc.del...)
		if err != nil || string(got) != tc.want {
			t.Errorf("Patch(%s, %q, %v) = %s, %v; want %s", tc.obj, tc.model, tc.del, got, err, tc.want)
		}
	}
	for _, bad := range []string{`[]`, `{"a":1`, `{"a":1,"a":2}`, `{"model":"a"} x`, `{"Stream":true,"stream":true}`, `{"str\u0065am":true}`} {
		if got, err := Patch([]byte(bad), "m", "stream"); err == nil {
			t.Errorf("Patch(%s) = %s, want refused", bad, got)
		}
	}
}
