package pricing

import (
	"errors"
	"strings"
	"testing"
)

func TestParseNumberLiteral(t *testing.T) {
	for in, want := range map[string]string{
		"0.075": "0.075", "2.5e-06": "0.0000025", "2.5E-6": "0.0000025", "1e3": "1000", "1.5e+2": "150",
		"15": "15", "1_000.5": "1000.5", "+3": "3", "-0.0": "0", "0": "0", "007.50": "7.5", "1.25e1": "12.5",
		"125e-3": "0.125", "0.3": "0.3", "37.50": "37.5", "0e5": "0", "1E0": "1",
	} {
		d, err := ParseNumberLiteral(in)
		if err != nil {
			t.Errorf("ParseNumberLiteral(%q): %v", in, err)
			continue
		}
		if got := FormatDecimal(d); got != want {
			t.Errorf("ParseNumberLiteral(%q) = %s, want %s", in, got, want)
		}
	}
	for _, in := range []string{"", "inf", "nan", "+inf", "0x10", "0o7", "0b1", "1__0", "_1", "1_", "1._5", ".5", "5.",
		"1e", "1e+-3", "1e99999", "1e-99999", "1e40", "1e-40", "--1", "1.2.3", " 1", "1 ", "1e3.5", "١"} {
		if d, err := ParseNumberLiteral(in); err == nil {
			t.Errorf("ParseNumberLiteral(%q) = %s, want an error", in, FormatDecimal(d))
		} else if !errors.Is(err, ErrMalformedDecimal) {
			t.Errorf("ParseNumberLiteral(%q): error %v is not ErrMalformedDecimal", in, err)
		}
	}
}

// FuzzParseNumberLiteral checks that every accepted literal is exact: the plain decimal it yields
// parses back with ParseDecimal to the same value, and plain decimals keep their value.
func FuzzParseNumberLiteral(f *testing.F) {
	for _, s := range []string{"0.075", "2.5e-06", "1_000", "+1E+3", "1e-24", "999999999999999.999999999999999999999999", "nan", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseNumberLiteral(s)
		if err != nil {
			return
		}
		back, err := ParseDecimal(FormatDecimal(d))
		if err != nil {
			t.Fatalf("ParseNumberLiteral(%q) = %s, which ParseDecimal refuses: %v", s, FormatDecimal(d), err)
		}
		if back.Cmp(d) != 0 {
			t.Fatalf("ParseNumberLiteral(%q) = %s, round trip %s", s, FormatDecimal(d), FormatDecimal(back))
		}
		if p, err := ParseDecimal(s); err == nil && p.Cmp(d) != 0 {
			t.Fatalf("plain %q: ParseDecimal %s, ParseNumberLiteral %s", s, FormatDecimal(p), FormatDecimal(d))
		}
	})
}

func TestParseStoredDecimal(t *testing.T) {
	long := "0." + strings.Repeat("0", 40) + "1"
	for in, want := range map[string]string{"0": "0", "12.50": "12.5", long: long, "-3.000000000000000000000000000001": "-3.000000000000000000000000000001"} {
		d, err := ParseStoredDecimal(in)
		if err != nil || FormatDecimal(d) != want {
			t.Errorf("ParseStoredDecimal(%q) = %v, %v; want %s", in, d, err, want)
		}
	}
	// Sums of stored amounts stay exact.
	a, _ := ParseStoredDecimal(long)
	sum, _ := ParseDecimal("1")
	sum.Add(sum, a)
	if got := FormatDecimal(sum); got != "1."+strings.Repeat("0", 40)+"1" {
		t.Errorf("sum %s", got)
	}
	for _, in := range []string{"", "1e3", "NaN", "+1", ".5", "1.", "1 ", strings.Repeat("9", 1001)} {
		if _, err := ParseStoredDecimal(in); err == nil {
			t.Errorf("ParseStoredDecimal(%q) accepted", in)
		}
	}
}

// FuzzParseStoredDecimal: accepted text round-trips exactly, and agrees with ParseDecimal wherever
// that accepts it.
func FuzzParseStoredDecimal(f *testing.F) {
	for _, s := range []string{"0", "-1.5", "0.000000000000000000000000000001", "1e3", "", "12345678901234567890.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseStoredDecimal(s)
		if err != nil {
			return
		}
		back, err := ParseStoredDecimal(FormatDecimal(d))
		if err != nil || back.Cmp(d) != 0 {
			t.Fatalf("%q → %s → %v, %v", s, FormatDecimal(d), back, err)
		}
		if p, err := ParseDecimal(s); err == nil && p.Cmp(d) != 0 {
			t.Fatalf("%q: ParseDecimal %s, ParseStoredDecimal %s", s, FormatDecimal(p), FormatDecimal(d))
		}
	})
}
