package canon

import "testing"

func TestCleanTier(t *testing.T) {
	for in, want := range map[string]string{"SERVICE_TIER_FLEX": "flex", " FLEX ": "flex", "flex": "flex", "SERVICE_TIER_UNSPECIFIED": "",
		"unspecified": "", "": "", "Priority": "priority"} {
		if got := CleanTier(in); got != want {
			t.Errorf("CleanTier(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPickTier(t *testing.T) {
	for _, tt := range []struct{ speed, top, usage, want string }{
		{"fast", "default", "flex", "fast"},
		{"standard", "default", "flex", "default"},
		{"", "", "flex", "flex"},
		{"auto", "", "", "auto"},
		{"", "", "", ""},
	} {
		if got := PickTier(tt.speed, tt.top, tt.usage); got != tt.want {
			t.Errorf("PickTier(%q, %q, %q) = %q, want %q", tt.speed, tt.top, tt.usage, got, tt.want)
		}
	}
}
