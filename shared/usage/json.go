package usage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
)

// count is a token count read from JSON. It accepts integers, integers written as strings
// (proto3 JSON int64), and numbers whose fraction is all zeros ("12.0"). Negative values are
// clamped to 0. null leaves it unset.
type count struct {
	v   int64
	set bool
}

var errCount = errors.New("invalid token count")

func (c *count) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		b = b[1 : len(b)-1]
	}
	v, err := parseCount(b)
	if err != nil {
		return fmt.Errorf("%w %q", err, truncate(b))
	}
	c.v, c.set = v, true
	return nil
}

func parseCount(b []byte) (int64, error) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg = true
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, errCount
	}
	var v int64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := int64(b[i] - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, errCount
		}
		v = v*10 + d
	}
	if i == 0 {
		return 0, errCount
	}
	if i < len(b) {
		if b[i] != '.' || i+1 == len(b) {
			return 0, errCount
		}
		for _, ch := range b[i+1:] {
			if ch != '0' {
				return 0, errCount
			}
		}
	}
	if neg {
		return 0, nil
	}
	return v, nil
}

func truncate(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "…"
	}
	return string(b)
}

// merge overwrites c with o when o was present (latest value wins).
func (c *count) merge(o count) {
	if o.set {
		*c = o
	}
}

// tierName is a tier name read from JSON: a string is kept, any other JSON value is ignored.
type tierName struct {
	s   string
	set bool
}

func (t *tierName) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '"' {
		return nil // null, numbers, objects: not a tier name
	}
	var s string
	if inner := b[1 : len(b)-1]; b[len(b)-1] == '"' && bytes.IndexByte(inner, '\\') < 0 {
		if t.set && string(inner) == t.s {
			return nil // common in streams: the same tier on every chunk
		}
		s = string(inner)
	} else {
		var err error
		if s, err = unquote(b); err != nil {
			return err
		}
	}
	if s = CleanTier(s); s != "" {
		t.s, t.set = s, true
	}
	return nil
}

func unquote(b []byte) (string, error) {
	var s string
	err := json.Unmarshal(b, &s)
	return s, err
}

func (t *tierName) merge(o tierName) {
	if o.set {
		*t = o
	}
}

// CleanTier lower-cases and trims a tier name and strips gamma's enum prefix, so that
// "SERVICE_TIER_FLEX", "FLEX" and "flex" all become "flex". "unspecified" becomes "".
// Synonyms (fast→priority, …) are the pricing package's business (pricing.NormalizeTier).
func CleanTier(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, "service_tier_")
	if s == "unspecified" {
		return ""
	}
	return s
}

// isStandardSpeed reports whether a speed value means "no speed premium".
func isStandardSpeed(s string) bool {
	switch s {
	case "", "standard", "default", "on_demand", "auto", "normal":
		return true
	}
	return false
}

// PickTier applies the reported-tier precedence (docs/pricing.md): a non-standard speed
// ("fast") wins, then the top-level service_tier, then usage.service_tier, then a standard speed.
func PickTier(speed, top, usageTier string) string {
	switch {
	case !isStandardSpeed(speed):
		return speed
	case top != "":
		return top
	case usageTier != "":
		return usageTier
	}
	return speed
}
