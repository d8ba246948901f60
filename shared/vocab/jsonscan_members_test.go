package vocab

import (
	"strings"
	"testing"
)

func TestMembersAndElements(t *testing.T) {
	var got []string
	err := Members([]byte(` {"a" : 1, "b\"c":{"x":[1,"}"]}, "d":"v"} `), func(k, v []byte) bool {
		got = append(got, string(k)+"="+string(v))
		return true
	})
	if want := `a=1|b\"c={"x":[1,"}"]}|d="v"`; err != nil || strings.Join(got, "|") != want {
		t.Errorf("Members = %q, %v; want %q", got, err, want)
	}
	got = got[:0]
	err = Elements([]byte(`[ 1 , {"a":[2]}, "x]", null ]`), func(e []byte) bool {
		got = append(got, string(e))
		return len(got) < 3
	})
	if want := `1|{"a":[2]}|"x]"`; err != nil || strings.Join(got, "|") != want {
		t.Errorf("Elements = %q, %v; want %q (stopping after three)", got, err, want)
	}
	for _, bad := range []string{`{"a" 1}`, `{"a":1,}`, `{"a":1`, `[1`, `{`, `x`} {
		if Members([]byte(bad), func(_, _ []byte) bool { return true }) == nil && Elements([]byte(bad), func([]byte) bool { return true }) == nil {
			t.Errorf("%s: no structure error", bad)
		}
	}
	if err := Members([]byte(`{}`), func(_, _ []byte) bool { t.Error("called"); return true }); err != nil {
		t.Error(err)
	}
	if err := Elements([]byte(`[]`), func([]byte) bool { t.Error("called"); return true }); err != nil {
		t.Error(err)
	}
}

func BenchmarkMembers(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello"}}]}`)
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		_ = Members(body, func(_, _ []byte) bool { n++; return true })
		if n != 5 {
			b.Fatal(n)
		}
	}
}
