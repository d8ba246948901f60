package translate

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/dialect/gamma"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// refFieldOf is FieldOf as it was before the table: the exact match first, else the first EqualFold match.
func refFieldOf(name string, names []string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	for i, n := range names {
		if strings.EqualFold(n, name) {
			return i
		}
	}
	return -1
}

// TestFieldOf: the table finds what the lists found, for every name of the request shapes' lists, their
// case variants, names sharing a slot, and names of none.
func TestFieldOf(t *testing.T) {
	lists := []*jsonkit.MemberNames{alpha.RespRequestNames, alpha.RespItemNames, alpha.RespContentNames, alpha.ChatRequestNames, alpha.ChatMessageNames,
		gamma.PartNames, gamma.CallNames, jsonkit.Fields("a", "A", "ab", "ba", "b_a", "B-A", "x", "xx", "xxx", "k", "K")}
	for _, f := range lists {
		var probes []string
		for _, n := range f.Names {
			probes = append(probes, n, strings.ToUpper(n), strings.ToLower(n), n+"x", "x"+n, n[:len(n)-1], "")
		}
		for _, p := range probes {
			if got, want := jsonkit.FieldOf(p, f), refFieldOf(p, f.Names); got != want {
				t.Fatalf("fieldOf(%q, %q) = %d, want %d", p, f.Names, got, want)
			}
		}
	}
}
