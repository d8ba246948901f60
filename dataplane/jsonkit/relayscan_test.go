package jsonkit

import (
	"strings"
	"testing"
)

func TestWalkMembersAndElements(t *testing.T) {
	var got []string
	obj := ` {"a" : 1, "b\"c":{"x":[1,"}"]}, "d":"v"} `
	closing, err := walkMembers([]byte(obj), func(k, v []byte) bool {
		got = append(got, string(k)+"="+string(v))
		return true
	})
	if want := `a=1|b\"c={"x":[1,"}"]}|d="v"`; err != nil || closing != len(obj)-2 || strings.Join(got, "|") != want {
		t.Errorf("walkMembers = %q, %d, %v; want %q, %d", got, closing, err, want, len(obj)-2)
	}
	got = got[:0]
	err = walkElements([]byte(`[ 1 , {"a":[2]}, "x]", null ]`), func(e []byte) bool {
		got = append(got, string(e))
		return len(got) < 3
	})
	if want := `1|{"a":[2]}|"x]"`; err != nil || strings.Join(got, "|") != want {
		t.Errorf("walkElements = %q, %v; want %q (stopping after three)", got, err, want)
	}
	for _, bad := range []string{`{"a" 1}`, `{"a":1,}`, `{"a":1`, `[1`, `{`, `x`, `[1 2]`} {
		_, merr := walkMembers([]byte(bad), func(_, _ []byte) bool { return true })
		if merr == nil && walkElements([]byte(bad), func([]byte) bool { return true }) == nil {
			t.Errorf("%s: no structure error", bad)
		}
	}
	if _, err := walkMembers([]byte(`{}`), func(_, _ []byte) bool { t.Error("called"); return true }); err != nil {
		t.Error(err)
	}
	if err := walkElements([]byte(`[]`), func([]byte) bool { t.Error("called"); return true }); err != nil {
		t.Error(err)
	}
}
