package pricing

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/ericlagergren/decimal"
)

// Limits of accepted decimal input. They bound every intermediate: a price has at most
// MaxIntegerDigits+MaxFractionDigits significant digits, so rates, products with int64 token
// counts and sums stay small (well under 200 digits) and exact.
const (
	MaxIntegerDigits  = 15 // up to 999,999,999,999,999 dollars per million tokens
	MaxFractionDigits = 24
	maxDecimalLen     = 1 + MaxIntegerDigits + 1 + MaxFractionDigits
)

// ErrMalformedDecimal is returned (wrapped) by ParseDecimal for any input that is not a plain
// decimal number.
var ErrMalformedDecimal = errors.New("malformed decimal")

// ErrMicrosOverflow is returned (wrapped) by ToMicros when the amount does not fit int64
// micro-dollars.
var ErrMicrosOverflow = errors.New("micro-dollar amount overflows int64")

// exact is the context of every money operation: unlimited precision, so additions and
// multiplications never round; half-up (away from zero) where rounding is asked for.
var exact = decimal.Context{
	Precision:     decimal.UnlimitedPrecision,
	RoundingMode:  decimal.ToNearestAway,
	OperatingMode: decimal.GDA,
	Traps:         ^(decimal.Inexact | decimal.Rounded | decimal.Subnormal),
	MaxScale:      decimal.MaxScale,
	MinScale:      decimal.MinScale,
}

func newExact() *decimal.Big { return decimal.WithContext(exact) }

// ParseDecimal parses a plain decimal string: an optional '-', 1 to MaxIntegerDigits digits,
// optionally '.' and 1 to MaxFractionDigits digits. Exponents, NaN, Infinity, '+', spaces,
// underscores, hex and longer inputs are rejected with ErrMalformedDecimal. The result is exact
// and carries the unlimited-precision context.
func ParseDecimal(s string) (*decimal.Big, error) {
	if len(s) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrMalformedDecimal)
	}
	if len(s) > maxDecimalLen {
		return nil, fmt.Errorf("%w: longer than %d characters", ErrMalformedDecimal, maxDecimalLen)
	}
	body := s
	neg := false
	if body[0] == '-' {
		neg = true
		body = body[1:]
	}
	intPart, frac, hasDot := strings.Cut(body, ".")
	if !allDigits(intPart) || (hasDot && !allDigits(frac)) {
		return nil, fmt.Errorf("%w: %q is not a plain decimal (digits, optional '.' and digits)", ErrMalformedDecimal, s)
	}
	if len(intPart) > MaxIntegerDigits {
		return nil, fmt.Errorf("%w: %q has more than %d integer digits", ErrMalformedDecimal, s, MaxIntegerDigits)
	}
	if len(frac) > MaxFractionDigits {
		return nil, fmt.Errorf("%w: %q has more than %d fraction digits", ErrMalformedDecimal, s, MaxFractionDigits)
	}
	var m big.Int
	if _, ok := m.SetString(intPart+frac, 10); !ok {
		return nil, fmt.Errorf("%w: %q", ErrMalformedDecimal, s)
	}
	if neg {
		m.Neg(&m)
	}
	return newExact().SetBigMantScale(&m, len(frac)), nil
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// maxFormatScale bounds the scale FormatDecimal expands; beyond it the library's own notation
// is used (never reached by values this package produces).
const maxFormatScale = 10000

// FormatDecimal formats x as a plain decimal string without exponent and without trailing
// fractional zeros ("1.50" → "1.5", "5E+3" → "5000", 0 → "0"). nil formats as "0".
func FormatDecimal(x *decimal.Big) string {
	if x == nil {
		return "0"
	}
	if !x.IsFinite() {
		return x.String()
	}
	scale := x.Scale()
	if scale > maxFormatScale || scale < -maxFormatScale {
		return x.String()
	}
	m := mantissa(x)
	neg := m.Sign() < 0
	digits := new(big.Int).Abs(m).String()
	if scale <= 0 {
		if digits != "0" {
			digits += strings.Repeat("0", -scale)
		}
	} else {
		if len(digits) <= scale {
			digits = strings.Repeat("0", scale-len(digits)+1) + digits
		}
		ip, fp := digits[:len(digits)-scale], strings.TrimRight(digits[len(digits)-scale:], "0")
		digits = ip
		if fp != "" {
			digits += "." + fp
		}
	}
	if neg && digits != "0" {
		return "-" + digits
	}
	return digits
}

// mantissa returns the unscaled value of a finite x (x = mantissa × 10^-scale).
func mantissa(x *decimal.Big) *big.Int {
	return new(decimal.Big).Copy(x).SetScale(0).Int(new(big.Int))
}

// pow10 holds 10^0 … 10^18.
var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// microsSmall is ToMicros without big.Int for mantissas below 10^18 (the common case).
func microsSmall(x *decimal.Big, shift, prec int) (int64, bool) {
	if prec > 18 || shift > 18 || shift < -36 {
		return 0, false
	}
	var m decimal.Big
	m.Copy(x)
	m.SetScale(0)
	v, ok := m.Int64()
	if !ok {
		return 0, false
	}
	switch {
	case shift >= 0:
		if prec+shift > 18 {
			return 0, false
		}
		return v * pow10[shift], true
	case -shift > 18:
		return 0, true // |v| < 10^18 ≤ 0.1 × 10^-shift
	}
	d := pow10[-shift]
	q, r := v/d, v%d
	if r < 0 {
		r = -r
	}
	if 2*r >= d {
		if v < 0 {
			q--
		} else {
			q++
		}
	}
	return q, true
}

var (
	bigTen     = big.NewInt(10)
	bigMaxI64  = big.NewInt(math.MaxInt64)
	bigMinI64  = big.NewInt(math.MinInt64)
	microScale = 6
)

// ToMicros converts dollars to integer micro-dollars, rounding half up (half away from zero for
// negative amounts). It fails for NaN/Inf and when the result does not fit int64
// (ErrMicrosOverflow). nil converts to 0.
func ToMicros(x *decimal.Big) (int64, error) {
	if x == nil {
		return 0, nil
	}
	if !x.IsFinite() {
		return 0, fmt.Errorf("convert %s to micro-dollars: not a finite number", x)
	}
	if x.Sign() == 0 {
		return 0, nil
	}
	// micros = mantissa × 10^(6-scale)
	shift := microScale - x.Scale()
	prec := x.Precision()
	if v, ok := microsSmall(x, shift, prec); ok {
		return v, nil
	}
	return microsBig(x, shift, prec)
}

// microsBig is ToMicros with big.Int arithmetic, for any finite non-zero x.
func microsBig(x *decimal.Big, shift, prec int) (int64, error) {
	if shift > 0 && prec+shift > 20 {
		return 0, fmt.Errorf("convert %s to micro-dollars: %w", FormatDecimal(x), ErrMicrosOverflow)
	}
	if shift < 0 && -shift > prec {
		return 0, nil // |x × 10^6| < 0.1: rounds to 0
	}
	m := mantissa(x)
	neg := m.Sign() < 0
	m.Abs(m)
	switch {
	case shift > 0:
		m.Mul(m, new(big.Int).Exp(bigTen, big.NewInt(int64(shift)), nil))
	case shift < 0:
		div := new(big.Int).Exp(bigTen, big.NewInt(int64(-shift)), nil)
		var r big.Int
		m.QuoRem(m, div, &r)
		if r.Lsh(&r, 1).Cmp(div) >= 0 {
			m.Add(m, big.NewInt(1))
		}
	}
	if neg {
		m.Neg(m)
	}
	if m.Cmp(bigMaxI64) > 0 || m.Cmp(bigMinI64) < 0 {
		return 0, fmt.Errorf("convert %s to micro-dollars: %w", FormatDecimal(x), ErrMicrosOverflow)
	}
	return m.Int64(), nil
}

// MaxExactMicros is the largest micro-dollar amount Tollgate carries: 2^53−1 (≈ 9 billion dollars). The
// admission script compares amounts as doubles, exact up to 2^53, and a browser reads JSON numbers as
// doubles too; every amount that becomes micro-dollars (quota limits, settled costs, cost_used) must fit.
const MaxExactMicros = 1<<53 - 1

// ErrAmountTooLarge is returned (wrapped) by ParseMicros for an amount above MaxExactMicros.
var ErrAmountTooLarge = errors.New("amount exceeds the largest carried amount")

// ParseMicros parses a non-negative plain decimal dollar amount (ParseDecimal's syntax) into integer
// micro-dollars, half up. It refuses malformed input, negative amounts and amounts above MaxExactMicros.
func ParseMicros(s string) (int64, error) {
	d, err := ParseDecimal(s)
	if err != nil {
		return 0, err
	}
	if d.Sign() < 0 {
		return 0, fmt.Errorf("%q must not be negative", s)
	}
	m, err := ToMicros(d)
	if err != nil || m > MaxExactMicros {
		return 0, fmt.Errorf("%q: %w (%s dollars)", s, ErrAmountTooLarge, FormatMicros(MaxExactMicros))
	}
	return m, nil
}

// FormatMicros formats integer micro-dollars as a plain decimal dollar string (1500000 → "1.5").
func FormatMicros(m int64) string {
	return FormatDecimal(newExact().SetMantScale(m, microScale))
}
