package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate/tollgate/shared/period"
)

// UsageRow is one settled request, as SettleUsages writes it into usages. Money is an exact decimal
// string (numeric in Postgres); optional ids are nil when absent.
type UsageRow struct {
	RequestID        string
	APIKeyID         *int64
	UserID           *int64
	TeamID           *int64
	OrgID            *int64
	RouteID          *int64
	ProviderID       *int64
	CredentialID     *int64
	LogicalModel     string
	UpstreamModel    string
	Operation        string
	InboundKind      string
	Implementation   string
	DestKind         string
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheCreation5m  int64
	CacheCreation30m int64
	CacheCreation1h  int64
	ImageOutput      int64
	RequestedTier    string
	ReportedTier     string
	PriceRuleID      *int64
	// PriceRuleVersion is the version of PriceRuleID the cost was computed with (nil: unknown or no rule).
	PriceRuleVersion *int64
	SnapshotVersion  int64
	Cost             string
	// BillingFlag is "" or "usage_out_of_bounds" (stored uncharged: Cost is "0"); FlagDetail says what
	// was reported.
	BillingFlag string
	FlagDetail  string
	Source      string
	EndState    string
	HTTPStatus  int32
	LatencyMS   int64
	FirstByteMS int64
	CreatedAt   time.Time
	// AdmittedAt is when admission reserved the request (nil: nothing reserved); it decides the budget
	// period of a periodic quota (docs/budgets.md, "Periods"), CreatedAt when nil.
	AdmittedAt *time.Time
	// BatchID and CustomID name the batch line this row settles (nil, "": a request). A batch line's row is
	// inserted only if this transaction moves the line out of pending (batch_lines), so each line settles
	// once; BatchLineState is the line's end state (succeeded, errored, expired, cancelled).
	BatchID        *int64
	CustomID       string
	BatchLineState string
}

// periodTime is the moment that decides a row's budget period: its admission, else its creation.
func (r *UsageRow) periodTime() time.Time {
	if r.AdmittedAt != nil && !r.AdmittedAt.IsZero() {
		return *r.AdmittedAt
	}
	return r.CreatedAt
}

// QuotaTotal is the state of one quota row after a settlement batch. CostLimit is nil when unlimited;
// both amounts are exact decimal strings. AdjustEpoch is the row's adjustment epoch, read under the
// same row lock as CostUsed, so the pair is consistent (docs/settlement.md, "Adjustment epochs").
//
// For a periodic quota there is one QuotaTotal per period the batch's rows belong to: CostUsed is that
// period's spend and Period names it (docs/budgets.md, "Periods").
type QuotaTotal struct {
	Scope       string
	ScopeID     int64
	CostLimit   *string
	CostUsed    string
	AdjustEpoch int64
	// Period is the period CostUsed belongs to (the zero Period for a quota without period).
	Period period.Period
	// kind and zone are the quota's period settings.
	kind period.Kind
	zone *time.Location
}

// SettleResult answers SettleUsages: which request ids this call inserted (the others were already
// stored and changed nothing) and the quota rows of every scope the batch's rows name.
type SettleResult struct {
	Inserted map[string]bool
	Quotas   []QuotaTotal
}

// scopeKey names one quota scope.
type scopeKey struct {
	scope string
	id    int64
}

func compareScope(a, b scopeKey) int {
	if a.scope != b.scope {
		if a.scope < b.scope {
			return -1
		}
		return 1
	}
	switch {
	case a.id < b.id:
		return -1
	case a.id > b.id:
		return 1
	}
	return 0
}

// SettleUsages stores a batch of settled requests in one transaction, idempotently by request_id:
//
//  1. it locks the quota rows of every scope (org, team, user, key) the batch names, in (scope, scope_id)
//     order, so concurrent batches never deadlock on quotas;
//  2. inserts the usages rows (ordered by request_id, one statement over unnest arrays) with
//     ON CONFLICT (request_id, created_at) DO NOTHING, returning the rows actually inserted — usages is
//     partitioned by created_at (migration 0013), a record carries the created_at it was first sent with, and
//     a row without one takes its stored row's (resolveCreatedAt);
//  3. increments quotas.cost_used (exact numeric) of each scope by the summed cost of the rows it
//     inserted — a row already stored adds nothing — and, for a periodic quota, the spend and request
//     count of the period each row was admitted in (quota_periods, created on first use);
//  4. answers the resulting cost_used of every locked quota row (per period for a periodic quota).
//
// Only scopes with a quotas row accumulate spend; a scope without one is not quota-bearing and the
// row is not created. Updating cost_used alone does not bump the config revision (migration 0001).
// Rows repeating a request_id within the batch are stored once (the first wins).
//
// A batch can meet partition maintenance: a row routed to the default partition while the month it belongs
// to gets its own partition (usages_ensure_partition) fails the partition check once the maintenance
// commits. That is not bad data, so the batch is run again (it then routes to the new partition) and, should
// it meet another such change, fails as a transient error rather than as ErrConstraint.
func SettleUsages(ctx context.Context, db TxBeginner, rows []UsageRow) (SettleResult, error) {
	res, err := settleUsages(ctx, db, rows)
	for try := 0; try < 2 && partitionMoved(err); try++ {
		res, err = settleUsages(ctx, db, rows)
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && partitionMoved(err) {
		return res, fmt.Errorf("settle: the partitions of usages changed during the batch, retry: %w", pgErr)
	}
	return res, err
}

// partitionMoved reports a row that failed its partition's bounds: the partitions changed under the insert.
func partitionMoved(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == "23514" && pgErr.ConstraintName == "" && strings.Contains(pgErr.Message, "partition constraint")
}

func settleUsages(ctx context.Context, b TxBeginner, rows []UsageRow) (SettleResult, error) {
	res := SettleResult{Inserted: make(map[string]bool, len(rows))}
	if len(rows) == 0 {
		return res, nil
	}
	// Dedupe by request_id and order the insert, so concurrent duplicate batches take the unique-index
	// locks in the same order.
	seen := make(map[string]bool, len(rows))
	uniq := make([]*UsageRow, 0, len(rows))
	for i := range rows {
		if seen[rows[i].RequestID] {
			continue
		}
		seen[rows[i].RequestID] = true
		uniq = append(uniq, &rows[i])
	}
	slices.SortFunc(uniq, func(a, b *UsageRow) int {
		switch {
		case a.RequestID < b.RequestID:
			return -1
		case a.RequestID > b.RequestID:
			return 1
		}
		return 0
	})
	scopeSet := map[scopeKey]bool{}
	for _, r := range uniq {
		for _, k := range rowScopes(r) {
			scopeSet[k] = true
		}
	}
	scopes := make([]scopeKey, 0, len(scopeSet))
	for k := range scopeSet {
		scopes = append(scopes, k)
	}
	slices.SortFunc(scopes, compareScope)

	tx, err := b.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return res, fmt.Errorf("settle: begin: %w", interpretError(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	quotas, err := lockQuotas(ctx, tx, scopes)
	if err != nil {
		return res, err
	}
	claimed, err := claimBatchLines(ctx, tx, uniq)
	if err != nil {
		return res, err
	}
	uniq = slices.DeleteFunc(uniq, func(r *UsageRow) bool {
		_, ok := claimed[r.RequestID]
		return r.BatchID != nil && !ok
	})
	if err := resolveCreatedAt(ctx, tx, uniq, time.Now().Truncate(time.Microsecond)); err != nil {
		return res, err
	}
	inserted, err := insertUsages(ctx, tx, uniq)
	if err != nil {
		return res, err
	}
	// Spend per quota-bearing scope, from the rows actually inserted (cost as Postgres returned it).
	var spendScope []string
	var spendID []int64
	var spendCost []string
	periods := newPeriodSpend()
	for _, ins := range inserted {
		res.Inserted[ins.requestID] = true
		for _, k := range ins.scopes {
			if q, ok := quotas[k]; ok {
				spendScope = append(spendScope, k.scope)
				spendID = append(spendID, k.id)
				spendCost = append(spendCost, ins.cost)
				if q.kind != period.None {
					periods.add(k, q, period.Of(q.kind, q.zone, ins.at), ins.cost, 1)
				}
			}
		}
	}
	// Every period the batch's rows name is answered, inserted or not: a redelivered batch still
	// refreshes the mirror of its period.
	for _, r := range uniq {
		for _, k := range rowScopes(r) {
			if q, ok := quotas[k]; ok && q.kind != period.None {
				periods.add(k, q, period.Of(q.kind, q.zone, r.periodTime()), "0", 0)
			}
		}
	}
	periodTotals, err := periods.apply(ctx, tx)
	if err != nil {
		return res, err
	}
	if len(spendScope) > 0 {
		rs, err := tx.Query(ctx, `
			UPDATE quotas q
			   SET cost_used = q.cost_used + s.cost, updated_at = now()
			  FROM (SELECT scope, scope_id, sum(cost) AS cost
			          FROM unnest($1::text[], $2::bigint[], $3::numeric[]) AS t(scope, scope_id, cost)
			         GROUP BY scope, scope_id) s
			 WHERE q.scope = s.scope AND q.scope_id = s.scope_id
			RETURNING q.scope, q.scope_id, q.cost_used::text`, spendScope, spendID, spendCost)
		if err != nil {
			return res, fmt.Errorf("settle: increment cost_used: %w", interpretError(err))
		}
		for rs.Next() {
			var k scopeKey
			var used string
			if err := rs.Scan(&k.scope, &k.id, &used); err != nil {
				rs.Close()
				return res, fmt.Errorf("settle: read cost_used: %w", interpretError(err))
			}
			q := quotas[k]
			q.CostUsed = used
			quotas[k] = q
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return res, fmt.Errorf("settle: increment cost_used: %w", interpretError(err))
		}
	}
	if len(claimed) > 0 {
		// Last: the batches' progress numbers lock their counter to the commit (migration 0021).
		costs := make(map[string]string, len(inserted))
		for _, ins := range inserted {
			costs[ins.requestID] = ins.cost
		}
		if err := applyBatchProgress(ctx, tx, uniq, claimed, costs); err != nil {
			return res, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("settle: commit: %w", interpretError(err))
	}
	for _, k := range scopes {
		q, ok := quotas[k]
		switch {
		case !ok:
		case q.kind == period.None:
			res.Quotas = append(res.Quotas, q)
		default:
			res.Quotas = append(res.Quotas, periodTotals[k]...)
		}
	}
	return res, nil
}

// rowScopes lists the quota scopes a usage row names.
func rowScopes(r *UsageRow) []scopeKey {
	out := make([]scopeKey, 0, 4)
	if r.APIKeyID != nil && *r.APIKeyID > 0 {
		out = append(out, scopeKey{"key", *r.APIKeyID})
	}
	if r.OrgID != nil && *r.OrgID > 0 {
		out = append(out, scopeKey{"org", *r.OrgID})
	}
	if r.TeamID != nil && *r.TeamID > 0 {
		out = append(out, scopeKey{"team", *r.TeamID})
	}
	if r.UserID != nil && *r.UserID > 0 {
		out = append(out, scopeKey{"user", *r.UserID})
	}
	return out
}

// lockQuotas locks (FOR UPDATE, in scope order) and reads the quota rows that exist among scopes.
func lockQuotas(ctx context.Context, tx pgx.Tx, scopes []scopeKey) (map[scopeKey]QuotaTotal, error) {
	out := make(map[scopeKey]QuotaTotal, len(scopes))
	if len(scopes) == 0 {
		return out, nil
	}
	names := make([]string, len(scopes))
	ids := make([]int64, len(scopes))
	for i, k := range scopes {
		names[i], ids[i] = k.scope, k.id
	}
	rows, err := tx.Query(ctx, `
		SELECT q.scope, q.scope_id, q.cost_limit::text, q.cost_used::text, q.adjust_epoch, q.period, q.time_zone
		  FROM quotas q
		  JOIN unnest($1::text[], $2::bigint[]) AS t(scope, scope_id)
		    ON q.scope = t.scope AND q.scope_id = t.scope_id
		 ORDER BY q.scope, q.scope_id
		   FOR UPDATE OF q`, names, ids)
	if err != nil {
		return nil, fmt.Errorf("settle: lock quotas: %w", interpretError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var q QuotaTotal
		var kind, zone string
		if err := rows.Scan(&q.Scope, &q.ScopeID, &q.CostLimit, &q.CostUsed, &q.AdjustEpoch, &kind, &zone); err != nil {
			return nil, fmt.Errorf("settle: read quotas: %w", interpretError(err))
		}
		q.kind, q.zone = quotaPeriodSettings(kind, zone)
		out[scopeKey{q.Scope, q.ScopeID}] = q
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("settle: lock quotas: %w", interpretError(err))
	}
	return out, nil
}

type insertedRow struct {
	requestID string
	cost      string
	scopes    []scopeKey
	at        time.Time // decides the budget period
}

// createdAtLockClass is the first key of the advisory locks resolveCreatedAt takes on request ids ("usag").
const createdAtLockClass = 0x75736167

// resolveCreatedAt gives the rows without created_at one, in place (rows are copies owned by the batch):
// usages is unique by (request_id, created_at) — the partition key must be part of every unique index
// (migration 0013) — so a record redelivered without created_at must take the created_at its first
// delivery was stored with, or it would be stored twice. Under a transaction-level advisory lock per
// request id (taken in hash order, after the quota locks, so concurrent batches queue instead of
// deadlocking), it reads the stored row of each such request id and reuses its created_at; a request id not
// stored yet gets now. The lock is held to commit, so a concurrent batch with the same record waits and then
// finds this one's row. Records always carry created_at (the data plane sets it when the request arrives):
// this path costs nothing for them.
func resolveCreatedAt(ctx context.Context, tx pgx.Tx, rows []*UsageRow, now time.Time) error {
	var ids []string
	for _, r := range rows {
		if r.CreatedAt.IsZero() {
			ids = append(ids, r.RequestID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($2, h)
		  FROM (SELECT DISTINCT hashtext(id) AS h FROM unnest($1::text[]) AS id ORDER BY h) s`, ids, int32(createdAtLockClass)); err != nil {
		return fmt.Errorf("settle: lock request ids without created_at: %w", interpretError(err))
	}
	stored := make(map[string]time.Time, len(ids))
	rs, err := tx.Query(ctx, `SELECT DISTINCT ON (request_id) request_id, created_at FROM usages
		WHERE request_id = ANY($1) ORDER BY request_id, created_at`, ids)
	if err != nil {
		return fmt.Errorf("settle: read stored created_at: %w", interpretError(err))
	}
	for rs.Next() {
		var id string
		var at time.Time
		if err := rs.Scan(&id, &at); err != nil {
			rs.Close()
			return fmt.Errorf("settle: read stored created_at: %w", interpretError(err))
		}
		stored[id] = at
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return fmt.Errorf("settle: read stored created_at: %w", interpretError(err))
	}
	for i, r := range rows {
		if !r.CreatedAt.IsZero() {
			continue
		}
		c := *r
		c.CreatedAt = now
		if at, ok := stored[r.RequestID]; ok {
			c.CreatedAt = at
		}
		rows[i] = &c
	}
	return nil
}

// insertUsages inserts rows with one statement over unnest arrays and returns those actually inserted.
func insertUsages(ctx context.Context, tx pgx.Tx, rows []*UsageRow) ([]insertedRow, error) {
	n := len(rows)
	var (
		requestID                                                  = make([]string, n)
		apiKey, user, team, org, route, provider, credential, rule = make([]*int64, n), make([]*int64, n), make([]*int64, n), make([]*int64, n), make([]*int64, n), make([]*int64, n), make([]*int64, n), make([]*int64, n)
		logical, upstream, op, inKind, impl, destKind              = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		in, out, cr, c5, c30, c1h, img                             = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		reqTier, repTier, cost, source, endState                   = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		snapVer, latency, firstByte                                = make([]int64, n), make([]int64, n), make([]int64, n)
		status                                                     = make([]int32, n)
		flag, flagDetail                                           = make([]string, n), make([]string, n)
		created                                                    = make([]time.Time, n)
		ruleVersion                                                = make([]*int64, n)
		admitted                                                   = make([]*time.Time, n)
		batchID                                                    = make([]*int64, n)
		customID                                                   = make([]*string, n)
	)
	byID := make(map[string]*UsageRow, n)
	for i, r := range rows {
		byID[r.RequestID] = r
		requestID[i] = r.RequestID
		apiKey[i], user[i], team[i], org[i] = r.APIKeyID, r.UserID, r.TeamID, r.OrgID
		route[i], provider[i], credential[i], rule[i] = r.RouteID, r.ProviderID, r.CredentialID, r.PriceRuleID
		logical[i], upstream[i], op[i], inKind[i], impl[i], destKind[i] = r.LogicalModel, r.UpstreamModel, r.Operation, r.InboundKind, r.Implementation, r.DestKind
		in[i], out[i], cr[i], c5[i], c30[i], c1h[i], img[i] = r.InputTokens, r.OutputTokens, r.CacheReadTokens, r.CacheCreation5m, r.CacheCreation30m, r.CacheCreation1h, r.ImageOutput
		reqTier[i], repTier[i], cost[i], source[i], endState[i] = r.RequestedTier, r.ReportedTier, r.Cost, r.Source, r.EndState
		snapVer[i], latency[i], firstByte[i], status[i] = r.SnapshotVersion, r.LatencyMS, r.FirstByteMS, r.HTTPStatus
		created[i] = r.CreatedAt
		flag[i], flagDetail[i] = r.BillingFlag, r.FlagDetail
		ruleVersion[i] = r.PriceRuleVersion
		admitted[i] = r.AdmittedAt
		if r.BatchID != nil {
			batchID[i], customID[i] = r.BatchID, &r.CustomID
		}
	}
	args := []any{requestID, apiKey, user, team, org, route, provider, credential,
		logical, upstream, op, inKind, impl, destKind,
		in, out, cr, c5, c30, c1h, img, reqTier, repTier, rule,
		snapVer, cost, source, endState, status, latency, firstByte, created, flag, flagDetail, ruleVersion, admitted}
	// The batch columns (migration 0021) are named only when the rows settle batch lines, so request
	// settlement reads and writes exactly what it did before them.
	batchCols, batchArgs := "", ""
	if slices.ContainsFunc(batchID, func(id *int64) bool { return id != nil }) {
		batchCols, batchArgs = ", batch_id, custom_id", ", $37::bigint[], $38::text[]"
		args = append(args, batchID, customID)
	}
	res, err := tx.Query(ctx, `
		INSERT INTO usages (request_id, api_key_id, user_id, team_id, org_id, route_id, provider_id, credential_id,
		    logical_model, upstream_model, operation, inbound_kind, implementation, dest_kind,
		    input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens,
		    cache_creation_1h_tokens, image_output_tokens, requested_tier, reported_tier, price_rule_id,
		    snapshot_version, cost, source, end_state, http_status, latency_ms, first_byte_ms, created_at,
		    billing_flag, flag_detail, price_rule_version, admitted_at`+batchCols+`)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],
		    $7::bigint[], $8::bigint[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
		    $15::bigint[], $16::bigint[], $17::bigint[], $18::bigint[], $19::bigint[], $20::bigint[], $21::bigint[],
		    $22::text[], $23::text[], $24::bigint[], $25::bigint[], $26::numeric[], $27::text[], $28::text[],
		    $29::integer[], $30::bigint[], $31::bigint[], $32::timestamptz[], $33::text[], $34::text[], $35::integer[], $36::timestamptz[]`+batchArgs+`)
		 ORDER BY 1
		ON CONFLICT (request_id, created_at) DO NOTHING
		RETURNING request_id, cost::text`, args...)
	if err != nil {
		return nil, fmt.Errorf("settle: insert usages: %w", interpretError(err))
	}
	defer res.Close()
	var done []insertedRow
	for res.Next() {
		var ins insertedRow
		if err := res.Scan(&ins.requestID, &ins.cost); err != nil {
			return nil, fmt.Errorf("settle: read inserted: %w", interpretError(err))
		}
		if r := byID[ins.requestID]; r != nil {
			ins.scopes = rowScopes(r)
			ins.at = r.periodTime()
		}
		done = append(done, ins)
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("settle: insert usages: %w", interpretError(err))
	}
	return done, nil
}
