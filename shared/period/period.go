// Package period computes budget periods: the calendar day, ISO week (Monday to Monday) or month, in an
// IANA time zone, that a moment belongs to (docs/budgets.md, "Periods"). Admission (data plane) and
// settlement (control plane) both derive a quota's current period here, so they agree on it.
package period

import (
	"fmt"
	"strconv"
	"time"
	_ "time/tzdata" // IANA zones even on hosts without a zoneinfo database
)

// Kind is a quota's budget period.
type Kind string

// Period kinds. None is a lifetime budget that never resets.
const (
	None    Kind = "none"
	Daily   Kind = "daily"
	Weekly  Kind = "weekly"
	Monthly Kind = "monthly"
)

// DefaultZone is the time zone of a quota that names none.
const DefaultZone = "UTC"

// ParseKind parses a period kind; "" is None.
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case "":
		return None, nil
	case None, Daily, Weekly, Monthly:
		return k, nil
	}
	return "", fmt.Errorf("period %q: want none, daily, weekly or monthly", s)
}

// maxZoneName bounds a zone name (the longest IANA name is about 30 characters).
const maxZoneName = 64

// LoadZone loads an IANA time zone by name ("" is UTC). "Local" is refused: the two planes' hosts may
// have different local zones.
func LoadZone(name string) (*time.Location, error) {
	if name == "" {
		name = DefaultZone
	}
	if name == "Local" || len(name) > maxZoneName {
		return nil, fmt.Errorf("time zone %.64q: want an IANA zone name such as Europe/Paris", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %.64q: %w", name, err)
	}
	return loc, nil
}

// Period is one budget period: [Start, End). The zero Period is the lifetime period of a None quota.
type Period struct {
	Kind  Kind
	Start time.Time
	End   time.Time
}

// Of returns the period of kind k in loc that contains t. Boundaries are local midnights: a day starts
// at 00:00, a week on Monday at 00:00, a month on its 1st at 00:00 (where a zone skips midnight for a
// daylight-saving change, the first instant after it). For None it returns the zero Period.
func Of(k Kind, loc *time.Location, t time.Time) Period {
	if loc == nil {
		loc = time.UTC
	}
	lt := t.In(loc)
	y, m, d := lt.Date()
	var start, end time.Time
	switch k {
	case Daily:
		start, end = time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	case Weekly:
		back := (int(lt.Weekday()) + 6) % 7 // days since Monday
		start, end = time.Date(y, m, d-back, 0, 0, 0, 0, loc), time.Date(y, m, d-back+7, 0, 0, 0, 0, loc)
	case Monthly:
		start, end = time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	default:
		return Period{}
	}
	// Where a zone skips midnight (a daylight-saving gap), time.Date normalises the boundary to an instant
	// on one side of the gap; keep t inside the period it returns.
	if t.Before(start) {
		return Of(k, loc, start.Add(-time.Nanosecond))
	}
	if !t.Before(end) {
		return Of(k, loc, end)
	}
	return Period{Kind: k, Start: start, End: end}
}

// ID names the period in Redis keys and Settle answers: "" for None, else the kind's initial and the
// start's Unix seconds ("d1764201600"). Two periods of one quota never share an id, even across a change
// of time zone.
func (p Period) ID() string {
	var c byte
	switch p.Kind {
	case Daily:
		c = 'd'
	case Weekly:
		c = 'w'
	case Monthly:
		c = 'm'
	default:
		return ""
	}
	return string(c) + strconv.FormatInt(p.Start.Unix(), 10)
}

// IsNone reports whether p is the lifetime period.
func (p Period) IsNone() bool { return p.Kind == "" || p.Kind == None }

// ValidID reports whether s can be a period id ("" or ID's form), the only period text accepted in a
// hold or a Redis key.
func ValidID(s string) bool {
	if s == "" {
		return true
	}
	if len(s) < 2 || len(s) > 21 || (s[0] != 'd' && s[0] != 'w' && s[0] != 'm') {
		return false
	}
	v, err := strconv.ParseInt(s[1:], 10, 64)
	return err == nil && strconv.FormatInt(v, 10) == s[1:]
}
