package pricing

import (
	"math"
	"math/big"
	"math/bits"

	"github.com/ericlagergren/decimal"

	"github.com/tollgate/tollgate/shared/usage"
)

// fastRates are a rule's effective rates as integers over one scale: rate[c] = m[c] × 10^-scale.
// With them a quote is seven 64×64→128-bit multiplications; anything that does not fit falls
// back to the decimal path, so results are identical (tests compare both).
type fastRates struct {
	ok    bool
	scale int // ≤ 19, so 10^scale fits a uint64
	m     [NumCategories]uint64
}

var pow10u = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

func newFastRates(rates *Prices) fastRates {
	var f fastRates
	var mant [NumCategories]uint64
	var scales [NumCategories]int
	for c, r := range rates {
		if r == nil || r.Sign() == 0 {
			continue
		}
		if r.Sign() < 0 || r.Scale() < 0 || r.Scale() > 19 || r.Precision() > 19 {
			return fastRates{}
		}
		var m decimal.Big
		m.Copy(r)
		m.SetScale(0)
		v, ok := m.Uint64()
		if !ok {
			return fastRates{}
		}
		mant[c], scales[c] = v, r.Scale()
		f.scale = max(f.scale, r.Scale())
	}
	for c := range mant {
		if mant[c] == 0 {
			continue
		}
		hi, lo := bits.Mul64(mant[c], pow10u[f.scale-scales[c]])
		if hi != 0 {
			return fastRates{}
		}
		f.m[c] = lo
	}
	f.ok = true
	return f
}

// quote prices u exactly with 128-bit integers; ok is false when the sum does not fit, in which
// case the caller uses the decimal path.
func (f *fastRates) quote(u usage.Usage) (cost *decimal.Big, micros int64, saturated, ok bool) {
	var hi, lo uint64
	for c, n := range u.Counts() {
		if n <= 0 || f.m[c] == 0 {
			continue
		}
		h, l := bits.Mul64(uint64(n), f.m[c])
		var carry uint64
		lo, carry = bits.Add64(lo, l, 0)
		hi, carry = bits.Add64(hi, h, carry)
		if carry != 0 {
			return nil, 0, false, false
		}
	}
	cost = newExact()
	if hi == 0 {
		cost.SetUint64(lo)
	} else {
		var b big.Int
		b.SetUint64(hi)
		b.Lsh(&b, 64)
		b.Or(&b, new(big.Int).SetUint64(lo))
		cost.SetBigMantScale(&b, 0)
	}
	cost.SetScale(f.scale + microScale)

	// micros = sum / 10^scale, half up.
	d := pow10u[f.scale]
	if hi >= d {
		return cost, math.MaxInt64, true, true // quotient ≥ 2^64
	}
	q, r := bits.Div64(hi, lo, d)
	if r >= d-r { // 2r ≥ d without overflow
		if q == math.MaxUint64 {
			return cost, math.MaxInt64, true, true
		}
		q++
	}
	if q > math.MaxInt64 {
		return cost, math.MaxInt64, true, true
	}
	return cost, int64(q), false, true
}
