package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// StoredUsage is one stored usage row as the admin API lists it.
type StoredUsage struct {
	ID                     int64     `json:"id"`
	RequestID              string    `json:"request_id"`
	APIKeyID               *int64    `json:"api_key_id"`
	UserID                 *int64    `json:"user_id"`
	TeamID                 *int64    `json:"team_id"`
	OrgID                  *int64    `json:"org_id"`
	RouteID                *int64    `json:"route_id"`
	ProviderID             *int64    `json:"provider_id"`
	CredentialID           *int64    `json:"credential_id"`
	LogicalModel           string    `json:"logical_model"`
	UpstreamModel          string    `json:"upstream_model"`
	Operation              string    `json:"operation"`
	InboundKind            string    `json:"inbound_kind"`
	Implementation         string    `json:"implementation"`
	DestKind               string    `json:"dest_kind"`
	InputTokens            int64     `json:"input_tokens"`
	OutputTokens           int64     `json:"output_tokens"`
	CacheReadTokens        int64     `json:"cache_read_tokens"`
	CacheCreation5mTokens  int64     `json:"cache_creation_5m_tokens"`
	CacheCreation30mTokens int64     `json:"cache_creation_30m_tokens"`
	CacheCreation1hTokens  int64     `json:"cache_creation_1h_tokens"`
	ImageOutputTokens      int64     `json:"image_output_tokens"`
	RequestedTier          string    `json:"requested_tier"`
	ReportedTier           string    `json:"reported_tier"`
	PriceRuleID            *int64    `json:"price_rule_id"`
	SnapshotVersion        int64     `json:"snapshot_version"`
	Cost                   string    `json:"cost"`
	Source                 string    `json:"source"`
	EndState               string    `json:"end_state"`
	HTTPStatus             int32     `json:"http_status"`
	LatencyMS              int64     `json:"latency_ms"`
	FirstByteMS            int64     `json:"first_byte_ms"`
	CreatedAt              time.Time `json:"created_at"`
	SettledAt              time.Time `json:"settled_at"`
	// BillingFlag is "" or "usage_out_of_bounds" (stored uncharged); FlagDetail says what was reported.
	BillingFlag string `json:"billing_flag"`
	FlagDetail  string `json:"flag_detail"`
	// PriceRuleVersion is the version of price_rule_id the row was priced with (null: no rule, or a row
	// settled before versions were recorded).
	PriceRuleVersion *int64 `json:"price_rule_version"`
	// Kind is "request" or "adjustment" (an audited correction: Cost is its signed amount, Operation
	// "quota_adjustment", only the adjusted scope's id is set; AdjustmentID and Reason name it).
	Kind         string  `json:"kind"`
	AdjustmentID *int64  `json:"adjustment_id,omitempty"`
	Reason       *string `json:"reason,omitempty"`
	// AdmittedAt is when admission reserved the request; it decides the row's budget period.
	AdmittedAt *time.Time `json:"admitted_at"`
	// BatchID and CustomID name the provider batch line a row settles (docs/batches.md); absent for requests.
	BatchID  *int64  `json:"batch_id,omitempty"`
	CustomID *string `json:"custom_id,omitempty"`
}

// UsageFilter selects usage rows; zero fields do not filter. Rows come newest id first; BeforeID
// (keyset cursor) keeps rows with id < BeforeID.
type UsageFilter struct {
	Since, Until                                         time.Time
	APIKeyID, UserID, TeamID, OrgID, RouteID, ProviderID *int64
	// BatchID keeps the rows of one provider batch's lines.
	BatchID  *int64
	EndState string
	// Kind is "request" or "adjustment"; "" lists both.
	Kind string
	// LogicalModel, UpstreamModel, Operation and RequestID match exactly when not empty.
	LogicalModel, UpstreamModel, Operation, RequestID string
	BeforeID                                          int64
	Limit                                             int
}

// usageColumns are the listing's columns, in StoredUsage's order; the FROM names the table "usages" (a
// partition is aliased so), which the adjustment's reason subquery refers to.
const usageColumns = `id, request_id, api_key_id, user_id, team_id, org_id, route_id, provider_id,
		credential_id, logical_model, upstream_model, operation, inbound_kind, implementation, dest_kind,
		input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens,
		cache_creation_1h_tokens, image_output_tokens, requested_tier, reported_tier, price_rule_id,
		snapshot_version, cost::text, source, end_state, http_status, latency_ms, first_byte_ms, created_at, settled_at,
		billing_flag, flag_detail, price_rule_version, kind, adjustment_id,
		(SELECT reason FROM quota_adjustments a WHERE a.id = usages.adjustment_id), admitted_at, batch_id, custom_id`

// usageQuery builds the WHERE clause of a listing query: f's filters, then the id bounds (0: none), with
// numbered placeholders; the LIMIT is the last argument.
func usageQuery(f UsageFilter, before, after int64) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if !f.Since.IsZero() {
		add("created_at >= ?", f.Since)
	}
	if !f.Until.IsZero() {
		add("created_at < ?", f.Until)
	}
	for _, c := range []struct {
		col string
		v   *int64
	}{{"api_key_id", f.APIKeyID}, {"user_id", f.UserID}, {"team_id", f.TeamID}, {"org_id", f.OrgID},
		{"route_id", f.RouteID}, {"provider_id", f.ProviderID}, {"batch_id", f.BatchID}} {
		if c.v != nil {
			add(c.col+" = ?", *c.v)
		}
	}
	for _, c := range []struct{ col, v string }{{"end_state", f.EndState}, {"logical_model", f.LogicalModel},
		{"upstream_model", f.UpstreamModel}, {"operation", f.Operation}, {"request_id", f.RequestID}} {
		if c.v != "" {
			add(c.col+" = ?", c.v)
		}
	}
	if f.Kind != "" {
		add("kind = ?", f.Kind)
	}
	if before > 0 {
		add("id < ?", before)
	}
	if after > 0 {
		add("id > ?", after)
	}
	where := ""
	if len(conds) > 0 {
		where = "WHERE " + strings.Join(conds, " AND ")
	}
	args = append(args, f.Limit)
	return where + " ORDER BY id DESC LIMIT $" + strconv.Itoa(len(args)), args
}

// batchDB runs a batch of statements in one round trip (*pgxpool.Pool, *pgx.Conn and pgx.Tx).
type batchDB interface {
	DBTX
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ListUsages returns usage rows matching f, newest id first, at most f.Limit of them: exactly the rows of
// listUsagesPlain (one ORDER BY id DESC LIMIT over the partitioned table), found partition by partition.
//
// The plain query plans every partition (ten indexes each) on every page, so its cost grew with the months
// kept. ListUsages instead, in one REPEATABLE READ READ ONLY transaction (one snapshot, as the single query
// had), reads the partitions and each one's max(id) — and, with a cursor, min(id) — in one statement, then
// queries the partitions by descending upper bound (max(id), capped below the cursor) one, four, sixteen … at
// a time (a batch per round trip), merging their rows, and stops when the page is full and every partition
// left has an upper bound at or below the page's lowest id. Ids come from one sequence at settlement, so a
// late record (settled after its month) carries a high id in an old partition: its partition's max(id) is
// high and it is read early — the order is by id bounds, not by month. Month partitions outside
// [Since, Until), and partitions whose lowest id is at or above the cursor, are not read; the default
// partition (any created_at) follows the same rule as the others. A lookup by request id keeps the plain
// query (one unique-index probe per partition: nothing to gain). Inside a caller's transaction (db a pgx.Tx)
// the walk runs on the caller's snapshot. docs/admin-api.md, "How a page is read".
//
// On a pool, ListUsages lists as a fresh Usages of that pool would: without a remembered partition list.
// A caller that lists the same database again keeps one Usages instead.
func ListUsages(ctx context.Context, db DBTX, f UsageFilter) ([]StoredUsage, error) {
	if pool, ok := db.(*pgxpool.Pool); ok {
		return NewUsages(pool).List(ctx, f)
	}
	if f.Limit <= 0 {
		return nil, nil
	}
	if b, ok := db.(batchDB); ok && f.RequestID == "" {
		// A caller's transaction (its snapshot) or connection: no retry (an error aborts it).
		return listUsagesByPartition(ctx, b, f, nil)
	}
	return listUsagesPlain(ctx, db, f)
}

// Usages lists one database's usage rows through its pool (List) and remembers the partitions of usages
// its last listing saw, sorted by name: the next listing reads their id ranges in the statement that
// checks the list (idRangesSQL), saving a round trip while the partitions stay the same. Keep one per pool:
// the list is a database's, so listings of two databases never trade theirs. Safe for concurrent use.
type Usages struct {
	pool *pgxpool.Pool
	// partitions is never written through: a listing that finds another list stores a new slice.
	partitions atomic.Pointer[[]string]
}

// NewUsages returns a Usages listing the database behind pool.
func NewUsages(pool *pgxpool.Pool) *Usages { return &Usages{pool: pool} }

// List is ListUsages on the pool's database, in a REPEATABLE READ READ ONLY transaction of its own on one
// connection; when the partitions changed between its statements (or a remembered one was dropped) it
// starts over once.
func (u *Usages) List(ctx context.Context, f UsageFilter) ([]StoredUsage, error) {
	if f.Limit <= 0 {
		return nil, nil
	}
	if f.RequestID != "" {
		return listUsagesPlain(ctx, u.pool, f)
	}
	c, err := u.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("list usages: %w", interpretError(err))
	}
	defer c.Release() // the pool discards a connection left inside a transaction
	out, err := listUsagesByPartition(ctx, c, f, &u.partitions)
	if err != nil && ctx.Err() == nil { // the partitions changed (or a remembered one was dropped): once more
		out, err = listUsagesByPartition(ctx, c, f, &u.partitions)
	}
	return out, err
}

// listUsagesPlain is the listing as one query over the partitioned table.
func listUsagesPlain(ctx context.Context, db DBTX, f UsageFilter) ([]StoredUsage, error) {
	where, args := usageQuery(f, f.BeforeID, 0)
	rows, err := db.Query(ctx, `SELECT `+usageColumns+` FROM usages `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("list usages: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[StoredUsage])
	if err != nil {
		return nil, fmt.Errorf("list usages: %w", interpretError(err))
	}
	return out, nil
}

// errRetryListing reports partitions that changed between two statements of one listing.
var errRetryListing = errors.New("list usages: the partitions of usages changed, retry")

// idRangesSQL answers the partitions of usages (sorted by name) and the min(id) (with withMin, else NULL:
// only a cursor needs it) and max(id) of each of names, as three arrays. It has no parameters, so each
// connection plans it once (pgx prepares it).
func idRangesSQL(names []string, withMin bool) string {
	var lo, hi strings.Builder
	for i, n := range names {
		if i > 0 {
			lo.WriteString(", ")
			hi.WriteString(", ")
		}
		t := pgx.Identifier{n}.Sanitize()
		if withMin {
			lo.WriteString("(SELECT min(id) FROM " + t + ")")
		} else {
			lo.WriteString("NULL")
		}
		hi.WriteString("(SELECT max(id) FROM " + t + ")")
	}
	return `SELECT ARRAY(SELECT (SELECT c.relname::text FROM pg_class c WHERE c.oid = i.inhrelid) FROM pg_inherits i
		WHERE i.inhparent = 'usages'::regclass ORDER BY 1), ARRAY[` + lo.String() + `]::bigint[], ARRAY[` + hi.String() + `]::bigint[]`
}

// idRange is one partition's ids: every row's id is at most hi.
type idRange struct {
	name string
	hi   int64
}

// listUsagesByPartition is ListUsages's walk (see there). With guess (Usages.List) it runs in its own
// REPEATABLE READ READ ONLY transaction on db (a connection of its own), whose BEGIN goes in the first round
// trip, starting from the partitions *guess names and storing there the list it finds when it differs.
// Without guess it runs in the caller's transaction and guesses nothing.
func listUsagesByPartition(ctx context.Context, db batchDB, f UsageFilter, guess *atomic.Pointer[[]string]) (page []StoredUsage, err error) {
	snapshot := guess != nil
	if snapshot {
		defer func() {
			end := "COMMIT"
			if err != nil {
				end = "ROLLBACK"
			}
			if _, cerr := db.Exec(context.WithoutCancel(ctx), end); cerr != nil && err == nil {
				page, err = nil, fmt.Errorf("list usages: %s: %w", end, interpretError(cerr))
			}
		}()
	}
	// The id ranges of the partitions last seen, and the partitions now, in one statement (the
	// transaction's first round trip). Another list than the guess (a month partition created or dropped)
	// costs a second statement; a dropped partition's name fails the first: the caller retries. In a
	// caller's transaction, which an error would abort, nothing is guessed. Every statement scans into
	// slices of its own: a stored guess is read by concurrent listings and never written again.
	var names []string
	if snapshot {
		if g := guess.Load(); g != nil {
			names = *g
		}
	}
	var lo, hi []*int64
	for try := 0; ; try++ {
		var now []string
		var first pgx.Batch
		if snapshot && try == 0 {
			first.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
		}
		first.Queue(idRangesSQL(names, f.BeforeID > 0))
		br := db.SendBatch(ctx, &first)
		if snapshot && try == 0 {
			_, err = br.Exec()
		}
		if err == nil {
			err = br.QueryRow().Scan(&now, &lo, &hi)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			if snapshot {
				guess.Store(nil)
			}
			return nil, fmt.Errorf("list usages: partitions: %w", interpretError(err))
		}
		if slices.Equal(now, names) {
			break
		}
		if try > 0 {
			return nil, errRetryListing
		}
		names = now
		if snapshot {
			guess.Store(&now)
		}
	}
	bounded := map[string]bool{}
	for _, p := range usageChildren(names) {
		if !p.From.IsZero() && (!f.Since.IsZero() && !p.To.After(f.Since) || !f.Until.IsZero() && !p.From.Before(f.Until)) {
			continue // a month partition outside [Since, Until)
		}
		bounded[p.Name] = true
	}
	var cands []idRange
	for i, n := range names {
		if !bounded[n] || hi[i] == nil || f.BeforeID > 0 && *lo[i] >= f.BeforeID {
			continue // outside the time range, empty, or every row at or above the cursor
		}
		r := idRange{name: n, hi: *hi[i]}
		if f.BeforeID > 0 && r.hi >= f.BeforeID {
			r.hi = f.BeforeID - 1
		}
		cands = append(cands, r)
	}
	slices.SortFunc(cands, func(a, b idRange) int { return cmp.Compare(b.hi, a.hi) })
	for i, group := 0, 1; i < len(cands); group *= 4 {
		var after int64 // the page's lowest id once full: a row must be above it to enter
		if len(page) >= f.Limit {
			after = page[f.Limit-1].ID
		}
		var batch pgx.Batch
		j := i
		for ; j < len(cands) && j < i+group; j++ {
			if after > 0 && cands[j].hi <= after {
				break // this partition and every later one (lower bounds) hold only ids below the page
			}
			where, args := usageQuery(f, f.BeforeID, after)
			batch.Queue(`SELECT `+usageColumns+` FROM `+pgx.Identifier{cands[j].name}.Sanitize()+` AS usages `+where, args...)
		}
		if j == i {
			break
		}
		br := db.SendBatch(ctx, &batch)
		for k := i; k < j; k++ {
			rows, err := br.Query()
			if err == nil {
				page, err = pgx.AppendRows(page, rows, pgx.RowToStructByPos[StoredUsage])
			}
			if err != nil {
				_ = br.Close()
				return nil, fmt.Errorf("list usages: %s: %w", cands[k].name, interpretError(err))
			}
		}
		if err := br.Close(); err != nil {
			return nil, fmt.Errorf("list usages: %w", interpretError(err))
		}
		slices.SortFunc(page, func(a, b StoredUsage) int { return cmp.Compare(b.ID, a.ID) })
		page = page[:min(len(page), f.Limit)]
		i = j
	}
	return page, nil
}

// AdminToken is an operator credential's metadata (never the token or its hash).
type AdminToken struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
}

// InsertAdminToken stores an admin token by its sha256 hash.
func InsertAdminToken(ctx context.Context, db DBTX, name, role string, hash []byte) (AdminToken, error) {
	t := AdminToken{Name: name, Role: role}
	if err := db.QueryRow(ctx, `INSERT INTO admin_tokens (name, role, token_hash) VALUES ($1, $2, $3)
		RETURNING id, created_at`, name, role, hash).Scan(&t.ID, &t.CreatedAt); err != nil {
		return AdminToken{}, fmt.Errorf("insert admin token %q: %w", name, interpretError(err))
	}
	return t, nil
}

// ListAdminTokens lists every admin token's metadata in id order.
func ListAdminTokens(ctx context.Context, db DBTX) ([]AdminToken, error) {
	rows, err := db.Query(ctx, `SELECT id, name, role, created_at FROM admin_tokens ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list admin tokens: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[AdminToken])
	if err != nil {
		return nil, fmt.Errorf("list admin tokens: %w", interpretError(err))
	}
	return out, nil
}

// AdminTokenByHash returns the admin token with this sha256 hash; ErrNotFound when none.
func AdminTokenByHash(ctx context.Context, db DBTX, hash []byte) (AdminToken, error) {
	var t AdminToken
	if err := db.QueryRow(ctx, `SELECT id, name, role, created_at FROM admin_tokens WHERE token_hash = $1`, hash).
		Scan(&t.ID, &t.Name, &t.Role, &t.CreatedAt); err != nil {
		return AdminToken{}, fmt.Errorf("look up admin token: %w", interpretError(err))
	}
	return t, nil
}

// DeleteAdminToken deletes an admin token; ErrNotFound when absent.
func DeleteAdminToken(ctx context.Context, db DBTX, id int64) error {
	tag, err := db.Exec(ctx, `DELETE FROM admin_tokens WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete admin token %d: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete admin token %d: %w", id, ErrNotFound)
	}
	return nil
}
