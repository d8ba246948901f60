package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

// seedDemoScale settles what a few minutes of `make run` produce: 24 requests over the last four UTC
// days (six today) costing fractions of a cent each (the demo price is $2.50 / $10 per million tokens),
// for two models on every day, with cache reads on some so that more than input and output are counted.
func seedDemoScale(t *testing.T, db *storetest.DB) {
	t.Helper()
	now := time.Now().UTC()
	today := now.Truncate(24 * time.Hour)
	models := []string{"demo-model", "demo-mini"}
	costs := []string{"0.000123", "0.00013", "0.0000405", "0.000987", "0.0002575"}
	var rows []store.UsageRow
	for i := range 24 {
		org, key := int64(1), int64(1+i%2)
		at := today.Add(-time.Duration(i%4) * 24 * time.Hour).Add(time.Duration(i) * time.Minute)
		if i%4 == 0 { // today's: before now, whatever the hour
			at = now.Add(-time.Duration(i+1) * time.Second)
		}
		rows = append(rows, store.UsageRow{RequestID: fmt.Sprintf("req-demo-%02d", i), OrgID: &org, APIKeyID: &key,
			LogicalModel: models[i/4%2], UpstreamModel: "mock-1", Operation: "generate_content", InboundKind: "alpha_chat_completions",
			InputTokens: int64(20 + i), OutputTokens: int64(8 + i%5), CacheReadTokens: int64(100 * (i % 3)), Cost: costs[i%5],
			Source: "upstream", EndState: "completed", HTTPStatus: 200, CreatedAt: at})
	}
	if _, err := store.SettleUsages(context.Background(), db.Pool, rows); err != nil {
		t.Fatal(err)
	}
}

// groupThousands writes an integer with comma thousands separators, as the console's count() does.
func groupThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestConsoleAtDemoScaleInChromium: with sub-cent costs, the Overview shows every amount exactly (never
// "<$0.01"), its tokens card shows the total of every token kind, and the Spend chart's y-axis ticks
// differ from each other instead of all reading "$0".
func TestConsoleAtDemoScaleInChromium(t *testing.T) {
	db := storetest.New(t)
	base := controlPlane(t, db)
	seedDemoScale(t, db)
	browserCtx := startBrowser(t, t.TempDir())
	p := newTab(t, browserCtx)
	defer p.checkConsole()

	p.do("open console", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/console/"))
	p.waitFor("sign-in form", visible("#signin-token"))
	p.do("sign in", fill("#signin-token", adminToken+"\n"))
	p.waitFor("overview", visible("#ov-today"))

	today := time.Now().UTC().Truncate(24 * time.Hour)
	subCent := regexp.MustCompile(`^0\.00\d*[1-9]$`)
	todaySum := sqlText(t, db, `SELECT trim_scale(sum(cost))::text FROM usages WHERE created_at >= $1`, today)
	monthSum := sqlText(t, db, `SELECT trim_scale(sum(cost))::text FROM usages`)
	for _, c := range []struct{ card, sum string }{{"#ov-today", todaySum}, {"#ov-month", monthSum}} {
		if !subCent.MatchString(c.sum) {
			t.Fatalf("the seed is not at demo scale: %s sums to %s", c.card, c.sum)
		}
		if got := p.text(c.card + " .card-value"); got != "$"+c.sum {
			t.Errorf("%s shows %q, want the exact $%s", c.card, got, c.sum)
		}
	}
	models := eval[[][]string](p, `[...document.querySelectorAll("#ov-models tbody tr")].map(r => [...r.cells].map(c => c.textContent))`)
	if len(models) != 2 {
		t.Fatalf("top models %v, want the two seeded models", models)
	}
	for _, row := range models {
		want := sqlText(t, db, `SELECT trim_scale(sum(cost))::text FROM usages WHERE logical_model = $1`, row[0])
		if row[2] != "$"+want {
			t.Errorf("top model %s costs %q, want the exact $%s", row[0], row[2], want)
		}
	}
	if page := p.text("#overview"); strings.Contains(page, "<$") {
		t.Errorf("the overview still rounds small amounts away: %q", page)
	}

	total, _ := strconv.ParseInt(sqlText(t, db, `SELECT sum(input_tokens + output_tokens + cache_read_tokens + cache_creation_5m_tokens
		+ cache_creation_30m_tokens + cache_creation_1h_tokens + image_output_tokens)::text FROM usages`), 10, 64)
	input, _ := strconv.ParseInt(sqlText(t, db, `SELECT sum(input_tokens)::text FROM usages`), 10, 64)
	output, _ := strconv.ParseInt(sqlText(t, db, `SELECT sum(output_tokens)::text FROM usages`), 10, 64)
	cached, _ := strconv.ParseInt(sqlText(t, db, `SELECT sum(cache_read_tokens)::text FROM usages`), 10, 64)
	if got := p.text("#ov-tokens .card-value"); got != groupThousands(total) {
		t.Errorf("tokens card value %q, want the total of every kind, %s", got, groupThousands(total))
	}
	if got := p.text("#ov-tokens .card-label"); !strings.HasPrefix(got, "All tokens") {
		t.Errorf("tokens card label %q does not say it counts every kind", got)
	}
	sub := p.text("#ov-tokens .card-sub")
	for _, want := range []string{groupThousands(input) + " input", groupThousands(output) + " output", groupThousands(cached) + " cache read"} {
		if !strings.Contains(sub, want) {
			t.Errorf("tokens card breakdown %q lacks %q", sub, want)
		}
	}
	p.screenshot("console-overview-demo-1280", 1280)
	p.screenshot("console-overview-demo-390", 390)

	// Spend: by day, one series; the y-axis labels are those uPlot drew (kept on the chart element).
	p.do("spend page", chromedp.EmulateViewport(1280, 900), chromedp.Click(chromedp.CSS(`#sections a[href="#spend"]`)))
	p.waitFor("spend chart", `!!document.querySelector("#sp-chart canvas") && !!document.getElementById("sp-chart").dataset.yTicks`)
	if got := p.text("#sp-table tr.total td.mono"); got != monthSum {
		t.Errorf("spend table total %q, want %s", got, monthSum)
	}
	var ticks []string
	if err := json.Unmarshal([]byte(eval[string](p, `document.getElementById("sp-chart").dataset.yTicks`)), &ticks); err != nil {
		t.Fatal(err)
	}
	tick := regexp.MustCompile(`^\$0\.\d+$`)
	if len(ticks) < 3 {
		t.Fatalf("y-axis ticks %v: fewer than three", ticks)
	}
	for i, v := range ticks {
		if !tick.MatchString(v) || len(v) != len(ticks[0]) {
			t.Errorf("y-axis tick %q (of %v) is not a dollar amount with the others' decimals", v, ticks)
		}
		if i > 0 && v <= ticks[i-1] { // same length, so text order is numeric order
			t.Errorf("y-axis ticks %v do not increase: each must differ", ticks)
		}
	}
	p.screenshot("console-spend-demo-1280", 1280)
	p.screenshot("console-spend-demo-390", 390)
}
