package store

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// usages is partitioned by UTC month (migration 0013): usages_YYYY_MM holds [the month's first instant, the
// next month's), usages_default every row of a month without a partition. See docs/operations.md, "Usages
// partitions and retention".

// partitionLockID is the advisory lock serialising partition maintenance across control-plane replicas
// ("usagpart").
const partitionLockID = 0x7573616770617274

// partitionLockTimeout bounds the wait for the table locks partition DDL takes, so maintenance never queues
// settlement behind a long reader for long: a round that times out is retried at the next.
const partitionLockTimeout = "5s"

var partitionName = regexp.MustCompile(`^usages_([0-9]{4})_([0-9]{2})$`)

// UsagePartition is one month partition of usages.
type UsagePartition struct {
	Name string
	// From and To bound the month: created_at in [From, To) (zero for the default partition).
	From, To time.Time
}

// MonthStart is the first instant of t's UTC month.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// ListUsagePartitions lists the month partitions of usages, oldest first (not the default partition).
func ListUsagePartitions(ctx context.Context, db DBTX) ([]UsagePartition, error) {
	rows, err := db.Query(ctx, usageChildrenSQL)
	if err != nil {
		return nil, fmt.Errorf("list usages partitions: %w", interpretError(err))
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list usages partitions: %w", interpretError(err))
	}
	return slices.DeleteFunc(usageChildren(names), func(p UsagePartition) bool { return p.From.IsZero() }), nil
}

// usageChildrenSQL names every partition of usages.
const usageChildrenSQL = `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'usages'::regclass`

// usageChildren reads the partitions of usages from their names: the month partitions oldest first, then the
// others (the default partition) with zero From and To: they may hold any created_at.
func usageChildren(names []string) []UsagePartition {
	var out, other []UsagePartition
	for _, n := range names {
		m := partitionName.FindStringSubmatch(n)
		if m == nil {
			other = append(other, UsagePartition{Name: n})
			continue
		}
		y, _ := strconv.Atoi(m[1])
		mo, _ := strconv.Atoi(m[2])
		from := time.Date(y, time.Month(mo), 1, 0, 0, 0, 0, time.UTC)
		out = append(out, UsagePartition{Name: n, From: from, To: from.AddDate(0, 1, 0)})
	}
	slices.SortFunc(out, func(a, b UsagePartition) int { return a.From.Compare(b.From) })
	slices.SortFunc(other, func(a, b UsagePartition) int { return strings.Compare(a.Name, b.Name) })
	return append(out, other...)
}

// EnsureUsagePartitions creates the partitions of now's UTC month and the next ahead months after it that
// are missing, moving their rows out of the default partition (usages_ensure_partition), and returns the
// names it created. Replicas serialise on an advisory lock; one that finds it taken returns (nil, nil): the
// holder is doing the work.
func EnsureUsagePartitions(ctx context.Context, db TxBeginner, now time.Time, ahead int) ([]string, error) {
	var created []string
	err := partitionTx(ctx, db, func(tx pgx.Tx) error {
		m := MonthStart(now)
		for i := 0; i <= ahead; i++ {
			var did bool
			month := m.AddDate(0, i, 0)
			if err := tx.QueryRow(ctx, `SELECT usages_ensure_partition($1)`, month).Scan(&did); err != nil {
				return fmt.Errorf("create usages partition of %s: %w", month.Format("2006-01"), interpretError(err))
			}
			if did {
				created = append(created, "usages_"+month.Format("2006_01"))
			}
		}
		return nil
	})
	return created, err
}

// DropUsagePartitionsBefore drops the month partitions that end at or before cutoff and deletes the rows of
// the default partition created before it; it returns the partitions dropped and the default rows deleted.
// Each DROP takes an ACCESS EXCLUSIVE lock on usages for an instant (waiting at most partitionLockTimeout).
// Like EnsureUsagePartitions it does nothing when another replica holds the maintenance lock.
func DropUsagePartitionsBefore(ctx context.Context, db TxBeginner, cutoff time.Time) ([]string, int64, error) {
	var dropped []string
	var deleted int64
	err := partitionTx(ctx, db, func(tx pgx.Tx) error {
		parts, err := ListUsagePartitions(ctx, tx)
		if err != nil {
			return err
		}
		for _, p := range parts {
			if p.To.After(cutoff) {
				break
			}
			if _, err := tx.Exec(ctx, `DROP TABLE `+pgx.Identifier{p.Name}.Sanitize()); err != nil {
				return fmt.Errorf("drop usages partition %s: %w", p.Name, interpretError(err))
			}
			dropped = append(dropped, p.Name)
		}
		tag, err := tx.Exec(ctx, `DELETE FROM usages_default WHERE created_at < $1`, cutoff)
		if err != nil {
			return fmt.Errorf("delete old rows of usages_default: %w", interpretError(err))
		}
		deleted = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return dropped, deleted, nil
}

// partitionTx runs fn in a transaction holding the maintenance advisory lock, with a lock timeout; it
// skips fn when another session holds the lock.
func partitionTx(ctx context.Context, db TxBeginner, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, int64(partitionLockID)).Scan(&got); err != nil {
			return fmt.Errorf("usages partitions: lock: %w", interpretError(err))
		}
		if !got {
			return nil
		}
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+partitionLockTimeout+`'`); err != nil {
			return fmt.Errorf("usages partitions: lock timeout: %w", interpretError(err))
		}
		return fn(tx)
	})
}
