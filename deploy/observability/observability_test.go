// Package observability checks the shipped alert rules and Grafana dashboard: promtool validates and
// unit-tests the rules, and every Tollgate metric they query is one docs/observability.md lists.
package observability

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install Debian's prometheus package (`make test` installs it: .ci/testtools)")
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestAlertRules(t *testing.T) {
	t.Parallel()
	promtool(t, "check", "rules", "alerts.yaml")
	promtool(t, "test", "rules", "alerts_test.yaml")
}

var metricName = regexp.MustCompile(`\b(?:gen_ai|tollgate)_[a-z0-9_]+`)

// documented returns the metric names docs/observability.md lists.
func documented(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func checkNames(t *testing.T, where, text, docs string) {
	t.Helper()
	for _, n := range metricName.FindAllString(text, -1) {
		base := n
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			base = strings.TrimSuffix(base, suffix)
		}
		if !strings.Contains(docs, "`"+base+"`") {
			t.Errorf("%s queries %s, which docs/observability.md does not list", where, n)
		}
	}
}

func TestDashboardAndRulesUseDocumentedMetrics(t *testing.T) {
	t.Parallel()
	docs := documented(t)
	raw, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	queries := 0
	for _, p := range dash.Panels {
		for _, q := range p.Targets {
			queries++
			checkNames(t, "dashboard panel "+p.Title, q.Expr, docs)
		}
	}
	if dash.UID == "" || queries < 20 {
		t.Errorf("dashboard uid %q with %d queries", dash.UID, queries)
	}
	rules, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, l := range strings.Split(string(rules), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			exprs = append(exprs, l)
		}
	}
	checkNames(t, "alerts.yaml", strings.Join(exprs, "\n"), docs)
}
