package pricing

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestBoundsCheckCost(t *testing.T) {
	b := Bounds{MaxRequestTokens: 1000, MaxRequestCostMicros: 5_000_000} // $5
	for _, tt := range []struct {
		cost string
		want error // nil, ErrOutOfBounds or ErrMalformedDecimal
	}{
		{"0", nil}, {"5", nil}, {"4.9999999999999999999999999999999999", nil}, {"5.0000004", nil}, {"0005", nil},
		{"5.0000005", ErrOutOfBounds}, {"6", ErrOutOfBounds},
		{"99999999999999999999999999999999999999", ErrOutOfBounds}, // the 38-digit cost Settle used to accept
		{"112500000000000", ErrOutOfBounds},
		{"-1", ErrMalformedDecimal}, {"NaN", ErrMalformedDecimal}, {"1e3", ErrMalformedDecimal}, {"", ErrMalformedDecimal},
		{"1.", ErrMalformedDecimal}, {".5", ErrMalformedDecimal}, {"+1", ErrMalformedDecimal}, {" 1", ErrMalformedDecimal},
		{"Infinity", ErrMalformedDecimal}, {strings.Repeat("0", 101), ErrMalformedDecimal},
	} {
		err := b.CheckCost(tt.cost)
		if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("CheckCost(%q) = %v, want %v", tt.cost, err, tt.want)
		}
	}
}

func TestBoundsCheckTokens(t *testing.T) {
	b := Bounds{MaxRequestTokens: 1000, MaxRequestCostMicros: 1}
	for _, tt := range []struct {
		counts []int64
		ok     bool
	}{
		{[]int64{0, 0}, true}, {[]int64{500, 500}, true}, {[]int64{500, 501}, false}, {[]int64{-1}, false},
		{[]int64{math.MaxInt64, math.MaxInt64}, false}, {[]int64{1 << 62, 1 << 62, 1 << 62}, false},
	} {
		if err := b.CheckTokens(tt.counts...); (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrOutOfBounds)) {
			t.Errorf("CheckTokens(%v) = %v, want ok=%v", tt.counts, err, tt.ok)
		}
	}
	if (Bounds{}).OrDefault() != DefaultBounds || DefaultBounds.Validate() != nil {
		t.Error("zero bounds must mean DefaultBounds, which must be valid")
	}
	for _, bad := range []Bounds{{0, 1}, {1, 0}, {1, MaxExactMicros + 1}, {-1, 1}} {
		if bad.Validate() == nil {
			t.Errorf("Validate(%+v) = nil, want an error", bad)
		}
	}
}

// FuzzCheckCost: the cost parser never panics, and whatever it accepts is a plain decimal whose value
// is within the bound (cross-checked with ParseDecimal on the part it can read).
func FuzzCheckCost(f *testing.F) {
	for _, s := range []string{"0", "5", "5.0000005", "1e3", "-1", "NaN", "99999999999999999999999999999999999999",
		"0.000000000000000000000000000001", "", ".", "1.", "00000000000000000000001"} {
		f.Add(s)
	}
	b := Bounds{MaxRequestTokens: 1, MaxRequestCostMicros: 5_000_000}
	f.Fuzz(func(t *testing.T, s string) {
		err := b.CheckCost(s)
		if err != nil {
			if !errors.Is(err, ErrOutOfBounds) && !errors.Is(err, ErrMalformedDecimal) {
				t.Fatalf("CheckCost(%q) = %v: neither out of bounds nor malformed", s, err)
			}
			return
		}
		ip, fp, _ := strings.Cut(s, ".")
		if len(fp) > MaxFractionDigits {
			fp = fp[:MaxFractionDigits]
		}
		ip = strings.TrimLeft(ip, "0")
		if ip == "" {
			ip = "0"
		}
		text := ip
		if fp != "" {
			text += "." + fp
		}
		d, err := ParseDecimal(text)
		if err != nil {
			t.Fatalf("CheckCost accepted %q but ParseDecimal(%q) = %v", s, text, err)
		}
		if m, err := ToMicros(d); err != nil || m > b.MaxRequestCostMicros+1 {
			t.Fatalf("CheckCost accepted %q = %d micros (%v), over the bound", s, m, err)
		}
	})
}
