package app

import "testing"

func TestDefaultGC(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	limit := func(n int64, ok bool) func() (int64, bool) { return func() (int64, bool) { return n, ok } }
	for _, tc := range []struct {
		name   string
		env    map[string]string
		cgroup func() (int64, bool)
		want   gcSettings
	}{
		{"defaults, no cgroup limit", nil, limit(0, false), gcSettings{percent: DefaultGCPercent}},
		{"defaults under a cgroup limit", nil, limit(1<<30, true), gcSettings{percent: DefaultGCPercent, limit: (1 << 30) * 8 / 10}},
		{"operator's GOGC wins", map[string]string{"GOGC": "100"}, limit(1<<30, true), gcSettings{limit: (1 << 30) * 8 / 10}},
		{"operator's GOMEMLIMIT wins", map[string]string{"GOMEMLIMIT": "512MiB"}, limit(1<<30, true), gcSettings{percent: DefaultGCPercent}},
		{"GOGC=off sets nothing", map[string]string{"GOGC": "off"}, limit(1<<30, true), gcSettings{}},
	} {
		if got := defaultGC(env(tc.env), tc.cgroup); got != tc.want {
			t.Errorf("%s: defaultGC = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParseCgroupLimit(t *testing.T) {
	for in, want := range map[string]int64{"max\n": 0, "9223372036854771712\n": 0, "536870912\n": 536870912, "": 0, "garbage": 0} {
		got, ok := parseCgroupLimit(in)
		if got != want || ok != (want != 0) {
			t.Errorf("parseCgroupLimit(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
}
