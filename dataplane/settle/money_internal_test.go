package settle

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/shared/pricing"
)

// FuzzCostUsedMicros feeds arbitrary strings to costUsedMicros: it never panics, never accepts a
// negative amount, and what it accepts within the carried range reads back exactly (half up).
// (It replaced the forwarder's own DecimalToMicros after a differential fuzz found no input on which
// the two disagreed.)
func FuzzCostUsedMicros(f *testing.F) {
	for _, s := range []string{"0", "1", "0.0000005", "0.00000049", "12.3456785", "0.000123456789012345678901234567",
		"9223372036854.775807", "9223372036854.7758075", "9223372036854.775808", "99999999999999999999", "", "-1", "-0",
		"1.", ".5", "1e3", "NaN", "+1", " 1", "1_000", "0x10", "00000.5000005", "9007199254.740991", "9007199254.7409915"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := costUsedMicros(s)
		if err != nil {
			return
		}
		if got < 0 || strings.HasPrefix(s, "-") {
			t.Fatalf("costUsedMicros(%.60q) = %d: negative accepted", s, got)
		}
		if got > pricing.MaxExactMicros {
			return // saturated or beyond the carried range
		}
		d, err := pricing.ParseStoredDecimal(s)
		if err != nil {
			t.Fatalf("costUsedMicros accepted %.60q that pricing refuses: %v", s, err)
		}
		back, _ := pricing.ParseDecimal(pricing.FormatMicros(got))
		diff := d.Sub(d, back) // |s - got/1e6| <= 0.5 micro-dollars
		half, _ := pricing.ParseDecimal("0.0000005")
		if diff.CmpAbs(half) > 0 || (diff.CmpAbs(half) == 0 && diff.Sign() > 0) {
			t.Fatalf("costUsedMicros(%.60q) = %d: not the half-up rounding", s, got)
		}
	})
}
