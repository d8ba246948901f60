package routing

import (
	"crypto/sha256"
	"errors"
	"testing"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
)

func compiled(t *testing.T) *snapshot.Compiled {
	t.Helper()
	h1 := sha256.Sum256([]byte("k1"))
	h2 := sha256.Sum256([]byte("k2"))
	s := &snapshotv1.Snapshot{
		Version: 1,
		Providers: []*configv1.Provider{
			{Id: 1, Name: "p1", ChannelType: "alpha", BaseUrl: "http://a", Enabled: true},
			{Id: 2, Name: "p2", ChannelType: "alpha", BaseUrl: "http://b", Enabled: true},
			{Id: 3, Name: "p3", ChannelType: "alpha", BaseUrl: "http://c", Enabled: true},
			{Id: 4, Name: "off", ChannelType: "alpha", BaseUrl: "http://d", Enabled: false},
		},
		Routes: []*configv1.Route{{Id: 1, Name: "chat", Enabled: true, Aliases: []string{"c"}, Members: []*configv1.RouteMember{
			{ProviderId: 3, UpstreamModelId: "late", Priority: 5, Weight: 1, Enabled: true},
			{ProviderId: 1, UpstreamModelId: "x1", Priority: 1, Weight: 1, Enabled: true},
			{ProviderId: 2, UpstreamModelId: "x2", Priority: 1, Weight: 3, Enabled: true},
		}}},
		ApiKeys: []*configv1.ApiKey{
			{Id: 1, KeyHash: h1[:], Enabled: true, AllowedModels: []string{"c"}},
			{Id: 2, KeyHash: h2[:], Enabled: true},
		},
	}
	c, err := snapshot.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSelect(t *testing.T) {
	snap := compiled(t)
	tests := []struct {
		name  string
		model string
		r     int // what the injected source returns
		want  []string
		err   error
	}{
		{"first draw picks weight-1 member", "chat", 0, []string{"x1", "x2", "late"}, nil},
		{"draw in weight-3 range", "c", 1, []string{"x2", "x1", "late"}, nil},
		{"draw at end", "chat", 3, []string{"x2", "x1", "late"}, nil},
		{"scoped", "p3/some/model", 0, []string{"some/model"}, nil},
		{"scoped disabled provider", "off/m", 0, nil, ErrUnknownModel},
		{"scoped unknown provider", "nope/m", 0, nil, ErrUnknownModel},
		{"unknown", "gpt", 0, nil, ErrUnknownModel},
		{"empty scoped model", "p1/", 0, nil, ErrUnknownModel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(func(n int) int { return min(tt.r, n-1) })
			sel, err := s.Select(snap, tt.model, nil)
			if !errors.Is(err, tt.err) {
				t.Fatalf("Select(%q) error = %v, want %v", tt.model, err, tt.err)
			}
			var got []string
			for _, c := range sel.Candidates {
				got = append(got, c.UpstreamModel)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("Select(%q) = %v, want %v", tt.model, got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("Select(%q) = %v, want %v", tt.model, got, tt.want)
				}
			}
		})
	}
}

func TestSelectWeightsDistribution(t *testing.T) {
	snap := compiled(t)
	s := New(nil)
	firsts := map[string]int{}
	buf := make([]Candidate, 0, 4)
	for range 4000 {
		sel, err := s.Select(snap, "chat", buf)
		if err != nil {
			t.Fatal(err)
		}
		firsts[sel.Candidates[0].UpstreamModel]++
		if sel.Candidates[2].UpstreamModel != "late" {
			t.Fatal("lower priority member not last")
		}
	}
	// weights 1:3 → x2 first about 75% of the time.
	if f := firsts["x2"]; f < 2700 || f > 3300 {
		t.Errorf("x2 first %d/4000 times, want about 3000", f)
	}
}

func TestPermitted(t *testing.T) {
	snap := compiled(t)
	restricted, open := snap.LookupKey("k1"), snap.LookupKey("k2")
	r := snap.Route("chat")
	tests := []struct {
		key   *snapshot.APIKey
		model string
		route *snapshot.Route
		want  bool
	}{
		{restricted, "c", r, true},
		{restricted, "chat", r, true},
		{restricted, "p1/x", nil, false},
		{open, "p1/x", nil, true},
	}
	for _, tt := range tests {
		if got := Permitted(tt.key, tt.model, tt.route); got != tt.want {
			t.Errorf("Permitted(%d, %q) = %v, want %v", tt.key.ID, tt.model, got, tt.want)
		}
	}
}

func BenchmarkSelect(b *testing.B) {
	snap := compiled(&testing.T{})
	s := New(nil)
	var arr [8]Candidate
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Select(snap, "chat", arr[:0]); err != nil {
			b.Fatal(err)
		}
	}
}
