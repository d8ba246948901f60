package snapshot

import (
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

func TestMatchModel(t *testing.T) {
	tests := []struct {
		pattern, model string
		want           bool
	}{
		{"gpt-4o*", "gpt-4o", true},
		{"gpt-4o*", "gpt-4o-mini-2024", true},
		{"gpt-4o*", "gpt-4", false},
		{"*-mini", "gpt-4o-mini", true},
		{"*-mini", "gpt-4o-mini-x", false},
		{"openai/*", "openai/gpt-4o", true},
		{"openai/*", "azure/gpt-4o", false},
		{"*", "", true},
		{"*", "anything/at/all", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "abcbc", true},
		{"a*b*c", "acb", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"GPT*", "gpt-4o", false},
		{"**", "x", true},
	}
	for _, tt := range tests {
		if got := MatchModel(tt.pattern, tt.model); got != tt.want {
			t.Errorf("MatchModel(%q, %q) = %v, want %v", tt.pattern, tt.model, got, tt.want)
		}
	}
}

// FuzzMatchModel checks MatchModel against a regular expression built from the same pattern.
func FuzzMatchModel(f *testing.F) {
	for _, s := range [][2]string{{"gpt-4o*", "gpt-4o-mini"}, {"*a*b", "xaab"}, {"a**", "a"}, {"*", ""}, {"a*b*c*d", "abdcd"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, model string) {
		if CheckModelPattern(pattern) != nil {
			return
		}
		parts := strings.Split(pattern, "*")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re, err := regexp.Compile(`^(?s:` + strings.Join(parts, ".*") + `)$`)
		if err != nil || !utf8.ValidString(pattern+model) {
			return // no regexp to compare with: regexp works on runes, MatchModel on bytes
		}
		if got, want := MatchModel(pattern, model), re.MatchString(model); got != want {
			t.Fatalf("MatchModel(%q, %q) = %v, regexp says %v", pattern, model, got, want)
		}
	})
}

func TestCompileKeyPolicyFields(t *testing.T) {
	h1, h2 := make([]byte, 32), make([]byte, 32)
	h1[0], h2[0] = 1, 2
	end := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	base := func() *snapshotv1.Snapshot {
		return &snapshotv1.Snapshot{Version: 1,
			ModelPolicy: &configv1.ModelPolicy{UnpricedPolicy: "deny", DirectAddressing: false},
			Providers:   []*configv1.Provider{{Id: 1, Name: "p", ChannelType: "alpha", BaseUrl: "http://a", Enabled: true, UnpricedPolicy: "deny"}},
			ApiKeys: []*configv1.ApiKey{{Id: 1, KeyHash: h1, Prefix: "tg-new", Enabled: true, AllowDirectAddressing: true,
				PreviousKeyHash: h2, PreviousPrefix: "tg-old", PreviousExpiresAt: timestamppb.New(end)}}}
	}
	c, err := Compile(base())
	if err != nil {
		t.Fatal(err)
	}
	var k1, k2 [32]byte
	copy(k1[:], h1)
	copy(k2[:], h2)
	cur, prev := c.Key(k1), c.Key(k2)
	if cur == nil || prev == nil || cur.ID != 1 || prev.ID != 1 || prev.Prefix != "tg-old" || !prev.Previous || !prev.ExpiresAt.Equal(end) {
		t.Fatalf("keys: current %+v previous %+v", cur, prev)
	}
	if c.DirectAddressing || !cur.DirectAddressing() || !c.Provider(1).UnpricedDeny {
		t.Fatalf("policy: gateway direct %v, key direct %v, provider deny %v", c.DirectAddressing, cur.DirectAddressing(), c.Provider(1).UnpricedDeny)
	}
	for name, mutate := range map[string]func(*snapshotv1.Snapshot){
		"bad provider policy": func(s *snapshotv1.Snapshot) { s.Providers[0].UnpricedPolicy = "maybe" },
		"bad gateway policy":  func(s *snapshotv1.Snapshot) { s.ModelPolicy.UnpricedPolicy = "maybe" },
		"too many stars":      func(s *snapshotv1.Snapshot) { s.ApiKeys[0].AllowedModels = []string{"*a*b*c*d*"} },
		"empty model":         func(s *snapshotv1.Snapshot) { s.ApiKeys[0].AllowedModels = []string{""} },
		"previous no expiry":  func(s *snapshotv1.Snapshot) { s.ApiKeys[0].PreviousExpiresAt = nil },
		"previous short hash": func(s *snapshotv1.Snapshot) { s.ApiKeys[0].PreviousKeyHash = []byte{1} },
		"previous is another key": func(s *snapshotv1.Snapshot) {
			s.ApiKeys = append(s.ApiKeys, &configv1.ApiKey{Id: 2, KeyHash: h2, Enabled: true})
		},
	} {
		s := base()
		mutate(s)
		if _, err := Compile(s); err == nil {
			t.Errorf("%s: compiled", name)
		}
	}
}

func TestDisclosesCost(t *testing.T) {
	t.Parallel()
	hash := func(b byte) []byte { h := make([]byte, 32); h[0] = b; return h }
	keys := []*configv1.ApiKey{
		{Id: 1, KeyHash: hash(1), Prefix: "tg-follow", Enabled: true},
		{Id: 2, KeyHash: hash(2), Prefix: "tg-on", Enabled: true, CostDisclosure: proto.Bool(true)},
		{Id: 3, KeyHash: hash(3), Prefix: "tg-off", Enabled: true, CostDisclosure: proto.Bool(false)},
	}
	tests := []struct {
		name     string
		settings *configv1.GatewaySettings
		gateway  bool
		want     [3]bool // keys 1, 2, 3
	}{
		{name: "no settings: on", settings: nil, gateway: true, want: [3]bool{true, true, false}},
		{name: "gateway on", settings: &configv1.GatewaySettings{CostDisclosure: true}, gateway: true, want: [3]bool{true, true, false}},
		{name: "gateway off", settings: &configv1.GatewaySettings{}, gateway: false, want: [3]bool{false, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Compile(&snapshotv1.Snapshot{Version: 1, GatewaySettings: tt.settings, ApiKeys: keys})
			if err != nil {
				t.Fatal(err)
			}
			if c.CostDisclosure != tt.gateway {
				t.Errorf("CostDisclosure = %v, want %v", c.CostDisclosure, tt.gateway)
			}
			for i, kk := range keys {
				k := c.Key([32]byte(kk.GetKeyHash()))
				if got := c.DisclosesCost(k); got != tt.want[i] {
					t.Errorf("DisclosesCost(key %d) = %v, want %v", kk.GetId(), got, tt.want[i])
				}
			}
			if c.DisclosesCost(nil) {
				t.Error("DisclosesCost(nil) = true")
			}
			// A delta turning the gateway's switch over reaches every key that follows it, and only those.
			flipped := &configv1.GatewaySettings{CostDisclosure: !tt.gateway}
			d, err := ApplyDelta(c, &snapshotv1.SnapshotDelta{BaseVersion: 1, Version: 2, GatewaySettings: flipped})
			if err != nil {
				t.Fatal(err)
			}
			if d.CostDisclosure != !tt.gateway {
				t.Errorf("after the delta CostDisclosure = %v, want %v", d.CostDisclosure, !tt.gateway)
			}
			if got := d.DisclosesCost(d.Key([32]byte(keys[0].GetKeyHash()))); got != !tt.gateway {
				t.Errorf("after the delta DisclosesCost(following key) = %v, want %v", got, !tt.gateway)
			}
			if got := d.DisclosesCost(d.Key([32]byte(keys[2].GetKeyHash()))); got {
				t.Error("after the delta DisclosesCost(key off) = true")
			}
		})
	}
}
