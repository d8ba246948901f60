package pricing

import (
	"errors"
	"strings"
	"testing"

	"github.com/ericlagergren/decimal"
)

func TestParseDecimal(t *testing.T) {
	t.Parallel()
	valid := []struct{ in, want string }{
		{"0", "0"}, {"3", "3"}, {"0.30", "0.3"}, {"007.5", "7.5"}, {"-1.25", "-1.25"}, {"-0", "0"},
		{"123456789012345", "123456789012345"},
		{"0.000000000000000000000001", "0.000000000000000000000001"},
		{"123456789012345.123456789012345678901234", "123456789012345.123456789012345678901234"},
	}
	for _, tt := range valid {
		d, err := ParseDecimal(tt.in)
		if err != nil {
			t.Errorf("ParseDecimal(%q) = error %v", tt.in, err)
			continue
		}
		if got := FormatDecimal(d); got != tt.want {
			t.Errorf("FormatDecimal(ParseDecimal(%q)) = %q, want %q", tt.in, got, tt.want)
		}
	}
	invalid := []string{"", " 1", "1 ", "+1", "1e3", "1E-3", "NaN", "nan", "Inf", "-Infinity", "sNaN",
		".5", "5.", "1.2.3", "1_000", "0x10", "١", "--1", "-", "1,5",
		"1234567890123456",            // 16 integer digits
		"0.0000000000000000000000001", // 25 fraction digits
		strings.Repeat("9", 10000)}
	for _, in := range invalid {
		if d, err := ParseDecimal(in); err == nil || !errors.Is(err, ErrMalformedDecimal) {
			t.Errorf("ParseDecimal(%.20q) = %v, %v; want ErrMalformedDecimal", in, d, err)
		}
	}
}

func TestFormatDecimal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   *decimal.Big
		want string
	}{
		{nil, "0"},
		{decimal.New(5, -3), "5000"},
		{decimal.New(0, -3), "0"},
		{decimal.New(0, 6), "0"},
		{decimal.New(150, 2), "1.5"},
		{decimal.New(-5, 7), "-0.0000005"},
		{decimal.New(123, 0), "123"},
	}
	for _, tt := range tests {
		if got := FormatDecimal(tt.in); got != tt.want {
			t.Errorf("FormatDecimal(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestToMicros(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0", 0, false},
		{"1", 1_000_000, false},
		{"0.0000005", 1, false},  // exactly half: up
		{"0.00000049", 0, false}, // below half: down
		{"0.0000015", 2, false},  // half up, not to even
		{"0.0000025", 3, false},  // half up, not to even
		{"0.000000999999", 1, false},
		{"0.000000000000000000000001", 0, false},
		{"-0.0000005", -1, false}, // half away from zero
		{"-0.00000049", 0, false},
		{"9223372036854.775807", 9223372036854775807, false},
		{"9223372036854.7758075", 0, true}, // rounds to MaxInt64+1
		{"9223372036854.775808", 0, true},
		{"-9223372036854.775808", -9223372036854775808, false},
		{"123456789012345", 0, true},
	}
	for _, tt := range tests {
		d, err := ParseDecimal(tt.in)
		if err != nil {
			t.Fatalf("ParseDecimal(%q) = %v", tt.in, err)
		}
		got, err := ToMicros(d)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ToMicros(%s) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if tt.wantErr && !errors.Is(err, ErrMicrosOverflow) {
			t.Errorf("ToMicros(%s) error = %v, want ErrMicrosOverflow", tt.in, err)
		}
	}
	if got, err := ToMicros(decimal.New(5, -30)); err == nil {
		t.Errorf("ToMicros(5E+30) = %d, nil; want overflow", got)
	}
	if got, err := ToMicros(decimal.New(5, 100000)); err != nil || got != 0 {
		t.Errorf("ToMicros(5E-100000) = %d, %v; want 0", got, err)
	}
	if _, err := ToMicros(new(decimal.Big).SetNaN(false)); err == nil {
		t.Errorf("ToMicros(NaN) = nil error, want error")
	}
	if _, err := ToMicros(new(decimal.Big).SetInf(false)); err == nil {
		t.Errorf("ToMicros(Inf) = nil error, want error")
	}
}

func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"0", "1.5", "-2.25", "1e3", "NaN", "Inf", "0.000000000000000000000001",
		"123456789012345.123456789012345678901234", "", ".", "-", "9" + strings.Repeat("0", 40),
		"0.0000005", "-0.0000015", "999999999999.9999995", "0.000000000000000000500000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDecimal(s)
		if err != nil {
			return
		}
		if !d.IsFinite() {
			t.Fatalf("ParseDecimal(%q) = %v, not finite", s, d)
		}
		out := FormatDecimal(d)
		back, err := ParseDecimal(out)
		if err != nil {
			t.Fatalf("ParseDecimal(FormatDecimal(%q) = %q) = %v", s, out, err)
		}
		if back.Cmp(d) != 0 {
			t.Fatalf("round trip %q → %q changed the value", s, out)
		}
		got, err := ToMicros(d)
		if err != nil && !errors.Is(err, ErrMicrosOverflow) {
			t.Fatalf("ToMicros(%q) = %v", s, err)
		}
		if d.Sign() != 0 {
			// The small-mantissa fast path must agree with the big.Int path.
			want, werr := microsBig(d, microScale-d.Scale(), d.Precision())
			if got != want || (err == nil) != (werr == nil) {
				t.Fatalf("ToMicros(%q) = %d, %v; big path %d, %v", s, got, err, want, werr)
			}
		}
	})
}
