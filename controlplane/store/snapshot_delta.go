package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// ErrDeltaUnavailable is returned by ReadSnapshotChanges for a base revision the database cannot name the
// changes since: below the delta horizon (deletions pruned, a key or user table truncated, or older than
// the change tracking itself) or above the current revision. The caller reads a whole snapshot instead.
var ErrDeltaUnavailable = errors.New("no delta from this revision")

// SnapshotChanges is what changed in the configuration since a base revision, read in one transaction.
type SnapshotChanges struct {
	// Version is the revision read (the delta's target).
	Version int64
	// Now is the database time of the read; key expiry and rotation grace are judged at it.
	Now time.Time
	// Read names the small kinds read: those built from a table written since the base, and the quotas
	// when asked (Since.Quotas). The others are unchanged since the base.
	Read SmallKinds
	// Rest holds the small kinds of Read, each read whole (Version set, ApiKeys nil): the caller compares
	// them element by element with the base's.
	Rest *snapshotv1.Snapshot
	// Keys are the keys written since the base (or asked for) that the snapshot carries now, in id order.
	Keys []*configv1.ApiKey
	// GoneKeyIDs are the keys written or deleted since the base (or asked for) that the snapshot does not
	// carry now (deleted, disabled, expired), in order.
	GoneKeyIDs []int64
}

// Since names what ReadSnapshotChanges reads.
type Since struct {
	// Base is the revision the changes are read from.
	Base int64
	// Recheck are held keys to read again whatever their rows say: their expiry or rotation grace has
	// passed (time, not a write, changed them).
	Recheck []int64
	// Quotas reads the quotas even when no quota was written since Base, to refresh the cost_used and
	// period the snapshot carries (they move without a write).
	Quotas bool
}

// ReadSnapshotChanges reads, in one REPEATABLE READ, read-only transaction like ReadSnapshot, the state
// of the current revision V as changes since base: the small kinds built from a table written since
// base (quotas also when asked), whole (SnapshotChanges.Read), and only the API keys whose rows were
// written (changed_revision) or deleted (config_deletions) in (base, V], plus the keys of since.Recheck. The
// cost of the key part follows the number of keys changed, through the index on changed_revision. A
// base the changes cannot be read from is ErrDeltaUnavailable; data failures are a *SnapshotDataError.
func ReadSnapshotChanges(ctx context.Context, db TxBeginner, secrets SecretOpener, since Since) (*SnapshotChanges, error) {
	base := since.Base
	ch, err := readSnapshotChanges(ctx, db, secrets, since)
	if err != nil && ch != nil && errors.Is(err, ErrSnapshotData) {
		return nil, &SnapshotDataError{Version: ch.Version, Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("read snapshot changes since %d: %w", base, err)
	}
	return ch, nil
}

func readSnapshotChanges(ctx context.Context, db TxBeginner, secrets SecretOpener, since Since) (*SnapshotChanges, error) {
	base, recheck := since.Base, since.Recheck
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	ch := &SnapshotChanges{Rest: &snapshotv1.Snapshot{}}
	// First statement: the transaction's snapshot is the state this revision names.
	var horizon int64
	if err := tx.QueryRow(ctx, `SELECT r.revision, h.revision, now() FROM config_revision r, config_delta_horizon h`).
		Scan(&ch.Version, &horizon, &ch.Now); err != nil {
		return nil, fmt.Errorf("revision: %w", interpretError(err))
	}
	ch.Rest.Version = ch.Version
	if base < horizon || base > ch.Version {
		return nil, fmt.Errorf("%w: base %d, horizon %d, current %d", ErrDeltaUnavailable, base, horizon, ch.Version)
	}
	written, err := tablesWrittenSince(ctx, tx, base)
	if err != nil {
		return ch, err
	}
	if len(written) == 0 && ch.Version > base {
		return nil, fmt.Errorf("%w: revision %d → %d with no table written (a write around the triggers?)",
			ErrDeltaUnavailable, base, ch.Version)
	}
	ch.Read = smallKindsOf(written)
	ch.Read.Quotas = ch.Read.Quotas || since.Quotas
	if err := readSnapshotRest(ctx, tx, secrets, ch.Rest, ch.Read); err != nil {
		return ch, err
	}
	rows, err := tx.Query(ctx, `
		SELECT id FROM api_keys WHERE changed_revision > $1
		UNION SELECT key FROM config_deletions WHERE kind = 'api_key' AND revision > $1
		UNION SELECT unnest($2::bigint[])`, base, recheck)
	if err != nil {
		return ch, fmt.Errorf("changed api keys: %w", interpretError(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return ch, fmt.Errorf("changed api keys: %w", interpretError(err))
	}
	if len(ids) == 0 {
		return ch, nil
	}
	if ch.Keys, err = snapAPIKeys(ctx, tx, ids); err != nil {
		return ch, err
	}
	slices.Sort(ids)
	found := make(map[int64]bool, len(ch.Keys))
	for _, k := range ch.Keys {
		found[k.Id] = true
	}
	for _, id := range ids {
		if !found[id] {
			ch.GoneKeyIDs = append(ch.GoneKeyIDs, id)
		}
	}
	return ch, nil
}

// tablesWrittenSince names the configuration tables a statement wrote to after base
// (config_table_revisions).
func tablesWrittenSince(ctx context.Context, tx pgx.Tx, base int64) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT table_name FROM config_table_revisions WHERE revision > $1`, base)
	if err != nil {
		return nil, fmt.Errorf("tables written: %w", interpretError(err))
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("tables written: %w", interpretError(err))
	}
	return names, nil
}

// smallKindsOf names the small kinds built from one of the tables written, following what each kind's
// read joins.
func smallKindsOf(names []string) SmallKinds {
	written := func(tables ...string) bool {
		for _, t := range tables {
			if slices.Contains(names, t) {
				return true
			}
		}
		return false
	}
	return SmallKinds{
		PriceRules:          written("price_rules", "providers"), // price_rule_versions is written with price_rules
		ScheduledPriceRules: written("price_rule_schedule", "providers"),
		RoutingRules:        written("routing_rules", "providers"),
		ModelPolicy:         written("gateway_settings"),
		Providers:           written("providers", "credentials", "gateway_settings"),
		Routes:              written("routes", "route_aliases", "route_members", "providers"),
		Quotas:              written("quotas"),
	}
}

// PruneConfigDeletions deletes the key deletions recorded more than retention ago and raises the delta
// horizon past them: a delta from before a pruned deletion can no longer be read (the data plane holding
// such an old version gets a whole snapshot). It returns the number of records pruned.
func PruneConfigDeletions(ctx context.Context, db DBTX, retention time.Duration) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, `
		WITH d AS (DELETE FROM config_deletions WHERE deleted_at < now() - $1 * interval '1 microsecond' RETURNING revision),
		     h AS (UPDATE config_delta_horizon SET revision = greatest(revision, (SELECT max(revision) FROM d))
		            WHERE singleton AND EXISTS (SELECT 1 FROM d))
		SELECT count(*) FROM d`, retention.Microseconds()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("prune config deletions: %w", interpretError(err))
	}
	return n, nil
}
