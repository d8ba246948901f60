package admission

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// admit.lua writes the marker's and the rate windows' TTLs as literals (an argument costs Redis more than
// a constant): they must be markerTTL's and rateWindowTTL's.
func TestScriptLiteralsMatchConstants(t *testing.T) {
	for _, lit := range []string{
		"call('SETEX', K[1], '" + strconv.Itoa(int(markerTTL/time.Second)) + "', 'h')",
		"call('EXPIRE', fresh[x], '" + strconv.Itoa(int(rateWindowTTL/time.Second)) + "')",
		"call('SET', K[#K], A[#A], 'EX', '" + strconv.Itoa(int(costMarkerTTL/time.Second)) + "')",
	} {
		if !strings.Contains(admitLua, lit) {
			t.Errorf("admit.lua does not contain %s", lit)
		}
	}
}
