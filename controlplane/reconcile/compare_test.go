package reconcile

import (
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
