package settle

import (
	"strings"
	"testing"
)

// FuzzCostUsedMicros is the differential check of the one money parser against the forwarder's own:
// costUsedMicros (shared/pricing) must give DecimalToMicros's answer, value and refusal, for every
// cost_used string the forwarder can see (Postgres numeric text, up to pricing's 1000 characters).
func FuzzCostUsedMicros(f *testing.F) {
	for _, s := range []string{"0", "1", "0.0000005", "0.00000049", "12.3456785", "0.000123456789012345678901234567",
		"9223372036854.775807", "9223372036854.7758075", "9223372036854.775808", "99999999999999999999", "", "-1", "-0",
		"1.", ".5", "1e3", "NaN", "+1", " 1", "1_000", "0x10", "00000.5000005", "9007199254.740991", "9007199254.7409915",
		"123456789012345678901234567890.999999999999999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1000 {
			return
		}
		want, wantErr := DecimalToMicros(s)
		got, err := costUsedMicros(s)
		if (err != nil) != (wantErr != nil) || got != want {
			t.Fatalf("costUsedMicros(%.60q) = %d, %v; DecimalToMicros = %d, %v", s, got, err, want, wantErr)
		}
		if err == nil && strings.HasPrefix(s, "-") {
			t.Fatalf("negative %q accepted", s)
		}
	})
}
