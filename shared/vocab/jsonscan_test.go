package vocab

import (
	"testing"
)

func TestTopLevelField(t *testing.T) {
	tests := []struct {
		body, key, want string
		found, err      bool
	}{
		{`{"model":"m-1","x":1}`, "model", `"m-1"`, true, false},
		{` { "a" : {"model":"no"} , "model" : "yes" } `, "model", `"yes"`, true, false},
		{`{"a":"\"model\":","model":null}`, "model", `null`, true, false},
		{`{"a":[1,{"b":"]"}],"model":"z"}`, "model", `"z"`, true, false},
		{`{}`, "model", "", false, false},
		{`{"a":1}`, "model", "", false, false},
		{`[1]`, "model", "", false, true},
		{`{"a":`, "model", "", false, true},
		{`{"a" 1}`, "model", "", false, true},
		{``, "model", "", false, true},
	}
	for _, tt := range tests {
		s, e, found, err := TopLevelField([]byte(tt.body), tt.key)
		got := ""
		if found {
			got = tt.body[s:e]
		}
		if found != tt.found || (err != nil) != tt.err || got != tt.want {
			t.Errorf("TopLevelField(%q, %q) = %q, %v, %v, want %q, %v, err %v", tt.body, tt.key, got, found, err, tt.want, tt.found, tt.err)
		}
	}
}

func FuzzTopLevelField(f *testing.F) {
	f.Add(`{"model":"m-1","stream":true}`, "model")
	f.Add(`{"a":{"model":1},"model":[1,2]}`, "model")
	f.Add(`{"a":"\\\"","model":"x"}`, "model")
	f.Fuzz(func(t *testing.T, body, key string) {
		s, e, found, err := TopLevelField([]byte(body), key)
		if err != nil && found {
			t.Fatal("found with error")
		}
		if !found {
			return
		}
		if s < 0 || e > len(body) || s >= e {
			t.Fatalf("range [%d,%d) out of %d", s, e, len(body))
		}
	})
}
