package period

import (
	"testing"
	"time"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := LoadZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestOfCalendarBoundaries(t *testing.T) {
	paris := mustZone(t, "Europe/Paris")
	ny := mustZone(t, "America/New_York")
	cases := []struct {
		name       string
		k          Kind
		loc        *time.Location
		at         time.Time
		start, end time.Time
	}{
		{"daily utc", Daily, time.UTC, time.Date(2026, 11, 27, 23, 59, 59, 0, time.UTC),
			time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)},
		{"daily paris: 23:30 UTC is tomorrow", Daily, paris, time.Date(2026, 11, 27, 23, 30, 0, 0, time.UTC),
			time.Date(2026, 11, 28, 0, 0, 0, 0, paris), time.Date(2026, 11, 29, 0, 0, 0, 0, paris)},
		{"daily across DST start is 23h", Daily, paris, time.Date(2026, 3, 29, 12, 0, 0, 0, paris),
			time.Date(2026, 3, 29, 0, 0, 0, 0, paris), time.Date(2026, 3, 30, 0, 0, 0, 0, paris)},
		{"weekly starts monday", Weekly, ny, time.Date(2026, 11, 29, 23, 0, 0, 0, ny), // a Sunday
			time.Date(2026, 11, 23, 0, 0, 0, 0, ny), time.Date(2026, 11, 30, 0, 0, 0, 0, ny)},
		{"weekly on monday midnight", Weekly, time.UTC, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
			time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)},
		{"monthly december to january", Monthly, time.UTC, time.Date(2026, 12, 31, 23, 59, 59, 999, time.UTC),
			time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"monthly february leap year", Monthly, time.UTC, time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC),
			time.Date(2028, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		p := Of(c.k, c.loc, c.at)
		if !p.Start.Equal(c.start) || !p.End.Equal(c.end) {
			t.Errorf("%s: got [%s, %s), want [%s, %s)", c.name, p.Start, p.End, c.start, c.end)
		}
	}
	if p := Of(Daily, paris, time.Date(2026, 3, 29, 12, 0, 0, 0, paris)); p.End.Sub(p.Start) != 23*time.Hour {
		t.Errorf("DST day lasts %s, want 23h", p.End.Sub(p.Start))
	}
	if p := Of(None, time.UTC, time.Now()); !p.IsNone() || p.ID() != "" {
		t.Errorf("none period: %+v id %q", p, p.ID())
	}
}

func TestIDs(t *testing.T) {
	p := Of(Daily, time.UTC, time.Date(2026, 11, 27, 5, 0, 0, 0, time.UTC))
	if got := p.ID(); got != "d1795737600" {
		t.Fatalf("id %q", got)
	}
	for _, s := range []string{"", "d1795737600", "w0", "m-3600"} {
		if !ValidID(s) {
			t.Errorf("ValidID(%q) false", s)
		}
	}
	for _, s := range []string{"x1", "d", "d+1", "d01", "d1:2", "d1 ", "d99999999999999999999"} {
		if ValidID(s) {
			t.Errorf("ValidID(%q) true", s)
		}
	}
	if _, err := LoadZone("Local"); err == nil {
		t.Error("Local accepted")
	}
	if _, err := LoadZone("Mars/Olympus"); err == nil {
		t.Error("unknown zone accepted")
	}
	if _, err := ParseKind("yearly"); err == nil {
		t.Error("yearly accepted")
	}
}

// FuzzOf checks, for any kind, zone and instant, that the period contains the instant, that the next
// period starts where this one ends, and that its id round-trips through ValidID.
func FuzzOf(f *testing.F) {
	f.Add("daily", "Europe/Paris", int64(1764201600))
	f.Add("weekly", "America/Sao_Paulo", int64(-1))
	f.Add("monthly", "Pacific/Apia", int64(1325239200))
	f.Add("bogus", "", int64(0))
	f.Fuzz(func(t *testing.T, kind, zone string, sec int64) {
		k, err := ParseKind(kind)
		if err != nil {
			return
		}
		loc, err := LoadZone(zone)
		if err != nil {
			return
		}
		sec %= 1 << 40 // years far beyond any budget still fit
		at := time.Unix(sec, 0)
		p := Of(k, loc, at)
		if k == None {
			if !p.IsNone() {
				t.Fatalf("none gave %+v", p)
			}
			return
		}
		if at.Before(p.Start) || !at.Before(p.End) {
			t.Fatalf("%s %s %s: %s not in [%s, %s)", k, zone, at, at, p.Start, p.End)
		}
		if next := Of(k, loc, p.End); !next.Start.Equal(p.End) {
			t.Fatalf("%s %s: next period starts %s, this one ends %s", k, zone, next.Start, p.End)
		}
		if !ValidID(p.ID()) || p.ID() == "" {
			t.Fatalf("id %q", p.ID())
		}
	})
}
