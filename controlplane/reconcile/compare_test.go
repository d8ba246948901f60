package reconcile

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/controlplane/store"
)

// An openai report has no cache-write field: every cache write, whatever its lifetime, is in its input. The
// other kinds compare the seven categories as they are: a 30-minute write is not a 1-hour one.
func TestFoldLedgerKeepsThe30MinuteCategoryExceptForOpenAI(t *testing.T) {
	g := store.LedgerGroup{Input: 100, Output: 10, CacheRead: 20, Cache5m: 5, Cache30m: 30, Cache1h: 60, ImageOut: 7}
	if got := foldLedger(KindOpenAI, g); got != (Tokens{Input: 195, Output: 10, CacheRead: 20, ImageOut: 7}) {
		t.Fatalf("openai: %+v", got)
	}
	for _, kind := range []string{KindAnthropic, KindCSV} {
		if got := foldLedger(kind, g); got != (Tokens{Input: 100, Output: 10, CacheRead: 20, Cache5m: 5, Cache30m: 30, Cache1h: 60, ImageOut: 7}) {
			t.Fatalf("%s: %+v", kind, got)
		}
	}
	if got := fromStore(toStore(foldLedger(KindCSV, g))); got.Total() != 232 || got.Cache30m != 30 {
		t.Fatalf("through the store's categories: %+v", got)
	}
}

// A beta stream that broke before message_delta is billed by the gateway with message_start's output (the
// usage the stream reported, source upstream) while the provider bills the output it generated: the token
// line says so, so the operator does not take it for a provider error.
func TestTokenDriftNamesStreamsThatBroke(t *testing.T) {
	ledger := []store.LedgerGroup{
		{KeyRef: "k", ProjectRef: "w", Model: "b-1", Tier: "standard", Source: "upstream", Rows: 3, Requests: 3, Input: 30, Output: 21, Cost: "0"},
		{KeyRef: "k", ProjectRef: "w", Model: "b-1", Tier: "standard", Source: "upstream", Rows: 2, Requests: 2, Cut: 2, Input: 20, Output: 2, Cost: "0"},
	}
	rep := store.ImportedDay{Complete: true, Usage: []store.ReportUsage{{KeyRef: "k", ProjectRef: "w", Model: "b-1", Tier: "standard",
		TokensReported: true, Tokens: store.ReportTokens{Input: 50, Output: 61}}}}
	refs := store.ProviderRefs{OwnProjects: map[string]bool{"w": true}, ForeignKeys: map[string]bool{}, ForeignProjects: map[string]bool{}}
	run, err := compare(KindAnthropic, ledger, nil, refs, rep, false)
	if err != nil {
		t.Fatal(err)
	}
	var line *store.ReconcileLine
	for i := range run.Lines {
		if run.Lines[i].Kind == "tokens" {
			line = &run.Lines[i]
		}
	}
	if line == nil || line.Cause != CauseTokens || !strings.Contains(line.Detail, "output +38") ||
		!strings.Contains(line.Detail, "2 of the ledger's rows are streams that broke") {
		t.Fatalf("token line %+v", line)
	}
	// Without broken streams, or when the provider does not bill more output, the detail is the token
	// difference alone.
	for _, c := range []struct {
		cut, output int64
	}{{0, 61}, {2, 20}} {
		ledger[1].Cut, rep.Usage[0].Tokens.Output = c.cut, c.output
		run, _ = compare(KindAnthropic, ledger, nil, refs, rep, false)
		for _, l := range run.Lines {
			if l.Kind == "tokens" && (l.Cause != CauseTokens || strings.Contains(l.Detail, "broke")) {
				t.Fatalf("%d broken streams, provider output %d: line %+v", c.cut, c.output, l)
			}
		}
	}
}
