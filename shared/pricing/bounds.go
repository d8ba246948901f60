package pricing

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Bounds are the plausibility bounds of one request's settlement: a report beyond them is not charged
// but recorded as flagged (docs/settlement.md, "Bounds"). Both planes enforce them: the data plane when it
// builds the record, the control plane again when it stores it.
type Bounds struct {
	// MaxRequestTokens bounds the total of the seven token categories of one request.
	MaxRequestTokens int64
	// MaxRequestCostMicros bounds the cost of one request, in micro-dollars.
	MaxRequestCostMicros int64
}

// DefaultBounds: 100 million tokens and $1,000 per request — well above any single request of today's
// models (a 2-million-token context at $150 per million output tokens is $300), far below what would
// lock a scope out for good.
var DefaultBounds = Bounds{MaxRequestTokens: 100_000_000, MaxRequestCostMicros: 1_000_000_000}

// Validate checks that the bounds themselves are usable: both positive, the cost at most MaxExactMicros.
func (b Bounds) Validate() error {
	if b.MaxRequestTokens <= 0 {
		return fmt.Errorf("max request tokens must be positive, got %d", b.MaxRequestTokens)
	}
	if b.MaxRequestCostMicros <= 0 || b.MaxRequestCostMicros > MaxExactMicros {
		return fmt.Errorf("max request cost must be from 0.000001 to %s dollars, got %s", FormatMicros(MaxExactMicros), FormatMicros(b.MaxRequestCostMicros))
	}
	return nil
}

// OrDefault returns b, or DefaultBounds when b is the zero value.
func (b Bounds) OrDefault() Bounds {
	if b == (Bounds{}) {
		return DefaultBounds
	}
	return b
}

// ErrOutOfBounds is wrapped by every CheckTokens / CheckCost failure.
var ErrOutOfBounds = errors.New("usage out of bounds")

// CheckTokens fails (wrapping ErrOutOfBounds) when a count is negative or the total exceeds
// MaxRequestTokens (the sum is computed without overflow).
func (b Bounds) CheckTokens(counts ...int64) error {
	b = b.OrDefault()
	var total int64
	for _, c := range counts {
		if c < 0 {
			return fmt.Errorf("%w: negative token count %d", ErrOutOfBounds, c)
		}
		if c > b.MaxRequestTokens-total {
			return fmt.Errorf("%w: reported tokens %v exceed %d per request", ErrOutOfBounds, counts, b.MaxRequestTokens)
		}
		total += c
	}
	return nil
}

// CheckCost parses a settled cost — a plain non-negative decimal of dollars, any number of fraction
// digits (a quote's exact cost can have more than a price) — and fails (wrapping ErrOutOfBounds) when it
// exceeds MaxRequestCostMicros or cannot be carried at all. A cost that is not a plain decimal (a sign,
// an exponent, NaN, spaces) is ErrMalformedDecimal instead: not a report to flag but a broken record.
func (b Bounds) CheckCost(cost string) error {
	b = b.OrDefault()
	ip, fp, dot := strings.Cut(cost, ".")
	if len(cost) > maxCostLen || !allDigits(ip) || (dot && !allDigits(fp)) {
		return fmt.Errorf("%w: cost %.40q is not a plain non-negative decimal of at most %d characters", ErrMalformedDecimal, cost, maxCostLen)
	}
	ip = strings.TrimLeft(ip, "0")
	if len(ip) > MaxIntegerDigits {
		return fmt.Errorf("%w: cost %.40q exceeds %s dollars per request", ErrOutOfBounds, cost, FormatMicros(b.MaxRequestCostMicros))
	}
	var m big.Int
	m.SetString(ip+fp+"0", 10) // digits only: cannot fail; the "0" keeps an empty mantissa valid
	d := newExact().SetBigMantScale(&m, len(fp)+1)
	micros, err := ToMicros(d)
	if err != nil || micros > b.MaxRequestCostMicros {
		return fmt.Errorf("%w: cost %.40q exceeds %s dollars per request", ErrOutOfBounds, cost, FormatMicros(b.MaxRequestCostMicros))
	}
	return nil
}

// maxCostLen bounds a settled cost's text (Settle refused longer ones before bounds existed).
const maxCostLen = 100

// ParseBounds reads bounds as carried in a snapshot (a token count and a decimal dollar cost).
func ParseBounds(maxTokens int64, maxCost string) (Bounds, error) {
	m, err := ParseMicros(maxCost)
	if err != nil {
		return Bounds{}, fmt.Errorf("max request cost: %w", err)
	}
	b := Bounds{MaxRequestTokens: maxTokens, MaxRequestCostMicros: m}
	return b, b.Validate()
}
