package pricing

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/ericlagergren/decimal"
)

// maxLiteralExponent bounds the exponent of a number literal: anything beyond it could not pass
// ParseDecimal's digit limits anyway, and it keeps the rewritten text short.
const maxLiteralExponent = MaxIntegerDigits + MaxFractionDigits + 1

// ParseNumberLiteral parses the literal text of a number as a JSON or TOML file writes it and
// returns it exactly, through ParseDecimal: an optional sign ('-', or '+' as TOML allows), digits
// (TOML's '_' allowed between two digits), an optional fraction and an optional exponent
// ("2.5e-06" is exactly 0.0000025). The value must then fit ParseDecimal's limits. It never goes
// through a float. inf, nan, hex, octal and binary forms are rejected with ErrMalformedDecimal.
func ParseNumberLiteral(s string) (*decimal.Big, error) {
	plain, err := plainLiteral(s)
	if err != nil {
		return nil, err
	}
	return ParseDecimal(plain)
}

// plainLiteral rewrites a number literal as a plain decimal string (no exponent, no '+', no '_').
func plainLiteral(s string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%w: %q %s", ErrMalformedDecimal, truncate(s), why)
	}
	if len(s) == 0 {
		return bad("is empty")
	}
	if len(s) > 4*maxDecimalLen {
		return bad("is too long")
	}
	body, sign := s, ""
	switch body[0] {
	case '-':
		sign, body = "-", body[1:]
	case '+':
		body = body[1:]
	}
	mant, exp, hasExp := strings.Cut(strings.ToLower(body), "e")
	intPart, frac, hasDot := strings.Cut(mant, ".")
	var ok bool
	if intPart, ok = stripUnderscores(intPart); !ok {
		return bad("is not a decimal number literal")
	}
	if hasDot {
		if frac, ok = stripUnderscores(frac); !ok {
			return bad("is not a decimal number literal")
		}
	}
	e := 0
	if hasExp {
		digits := strings.TrimLeft(exp, "+-")
		if len(exp)-len(digits) > 1 {
			return bad("has a malformed exponent")
		}
		digits, ok = stripUnderscores(digits)
		if !ok {
			return bad("has a malformed exponent")
		}
		digits = strings.TrimLeft(digits, "0")
		if len(digits) > 4 {
			return bad("has an exponent out of range")
		}
		if digits != "" {
			e, _ = strconv.Atoi(digits) // at most 4 digits: cannot fail
		}
		if strings.HasPrefix(exp, "-") {
			e = -e
		}
		if e > maxLiteralExponent || e < -maxLiteralExponent {
			return bad("has an exponent out of range")
		}
	}
	// value = (intPart frac) × 10^(e - len(frac))
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return "0", nil
	}
	point := len(intPart+frac) - len(frac) + e // position of the decimal point within intPart+frac
	all := intPart + frac
	// Re-anchor on the trimmed digits.
	point -= len(all) - len(digits)
	var out string
	switch {
	case point <= 0:
		out = "0." + strings.Repeat("0", -point) + digits
	case point >= len(digits):
		out = digits + strings.Repeat("0", point-len(digits))
	default:
		out = digits[:point] + "." + digits[point:]
	}
	if i, f, dot := strings.Cut(out, "."); dot {
		f = strings.TrimRight(f, "0")
		out = i
		if f != "" {
			out += "." + f
		}
	}
	return sign + out, nil
}

// stripUnderscores removes TOML digit separators: each '_' must sit between two digits. The rest
// must be one or more digits.
func stripUnderscores(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	if !strings.Contains(s, "_") {
		return s, allDigits(s)
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			b.WriteByte(c)
		case c == '_' && i > 0 && i < len(s)-1 && isDigit(s[i-1]) && isDigit(s[i+1]):
		default:
			return "", false
		}
	}
	return b.String(), true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// maxStoredLen bounds ParseStoredDecimal's input.
const maxStoredLen = 1000

// ParseStoredDecimal parses a plain decimal as a database writes an exact amount (Postgres numeric
// text: '-'? digits, optional '.' and digits), without ParseDecimal's digit limits (a cost can have
// more fraction digits than a price), up to 1000 characters. The result is exact, with the
// unlimited-precision context, so sums of such values stay exact.
func ParseStoredDecimal(s string) (*decimal.Big, error) {
	if len(s) == 0 || len(s) > maxStoredLen {
		return nil, fmt.Errorf("%w: stored amount of %d characters", ErrMalformedDecimal, len(s))
	}
	body, neg := strings.CutPrefix(s, "-")
	intPart, frac, hasDot := strings.Cut(body, ".")
	if !allDigits(intPart) || (hasDot && !allDigits(frac)) {
		return nil, fmt.Errorf("%w: %q is not a plain decimal", ErrMalformedDecimal, truncate(s))
	}
	var m big.Int
	m.SetString(intPart+frac, 10) // only digits: cannot fail
	if neg {
		m.Neg(&m)
	}
	return newExact().SetBigMantScale(&m, len(frac)), nil
}
