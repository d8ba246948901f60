package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

// Batch statuses (batches.status) and outcomes (batches.outcome); docs/batches.md.
const (
	BatchValidating = "validating"
	BatchInProgress = "in_progress"
	BatchFinalizing = "finalizing"
	BatchEnded      = "ended"

	OutcomeCompleted = "completed"
	OutcomeFailed    = "failed"
	OutcomeExpired   = "expired"
	OutcomeCancelled = "cancelled"
)

// Line end states (batch_lines.state).
const (
	LinePending   = "pending"
	LineSucceeded = "succeeded"
	LineErrored   = "errored"
	LineExpired   = "expired"
	LineCancelled = "cancelled"
	LineMissing   = "missing"
)

// Batch is one provider batch a data plane submitted, as batches stores it.
type Batch struct {
	ID              int64
	ProviderID      int64
	CredentialID    int64
	ProviderBatchID string
	Dialect         string
	Endpoint        string
	APIKeyID        int64
	UserID          *int64
	TeamID          *int64
	OrgID           *int64
	RouteID         *int64
	LogicalModel    string
	UpstreamModel   string
	Status          string
	Outcome         string
	ProviderStatus  string
	CreatedAt       time.Time
	ExpiresAt       time.Time
	HoldExpiresAt   time.Time
	EndedAt         *time.Time
	SettledAt       *time.Time
	ReservedMicros  int64
	AdmittedAt      *time.Time
	HeldMicros      int64
	SettledCost     string
	LineCount       int64
	LinesSucceeded  int64
	LinesErrored    int64
	LinesExpired    int64
	LinesCancelled  int64
	ProgressSeq     int64
	LastError       string
}

// BatchLine is one request of a batch: its custom_id (the dialect's line identity), the models it resolved
// to and the micro-dollars of the batch's reservation that belong to it.
type BatchLine struct {
	CustomID       string
	LogicalModel   string
	UpstreamModel  string
	EstimateMicros int64
}

// BatchHoldGrace is how long after the provider's own expiry a batch's reservation lasts if nothing ever
// releases it (a control plane down for that long): the hold's expiry (docs/batches.md).
const BatchHoldGrace = 6 * time.Hour

const batchColumns = `id, provider_id, credential_id, provider_batch_id, dialect, endpoint, api_key_id, user_id,
	team_id, org_id, route_id, logical_model, upstream_model, status, outcome, provider_status, created_at, expires_at,
	hold_expires_at, ended_at, settled_at, reserved_micros, admitted_at, held_micros, settled_cost::text, line_count,
	lines_succeeded, lines_errored, lines_expired, lines_cancelled, progress_seq, last_error`

func scanBatch(row pgx.Row) (Batch, error) {
	var b Batch
	err := row.Scan(&b.ID, &b.ProviderID, &b.CredentialID, &b.ProviderBatchID, &b.Dialect, &b.Endpoint, &b.APIKeyID,
		&b.UserID, &b.TeamID, &b.OrgID, &b.RouteID, &b.LogicalModel, &b.UpstreamModel, &b.Status, &b.Outcome,
		&b.ProviderStatus, &b.CreatedAt, &b.ExpiresAt, &b.HoldExpiresAt, &b.EndedAt, &b.SettledAt, &b.ReservedMicros,
		&b.AdmittedAt, &b.HeldMicros, &b.SettledCost, &b.LineCount, &b.LinesSucceeded, &b.LinesErrored,
		&b.LinesExpired, &b.LinesCancelled, &b.ProgressSeq, &b.LastError)
	return b, err
}

func collectBatches(rows pgx.Rows, err error) ([]Batch, error) {
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	var out []Batch
	for rows.Next() {
		b, err := scanBatch(rows)
		if err != nil {
			return nil, interpretError(err)
		}
		out = append(out, b)
	}
	return out, interpretError(rows.Err())
}

// RegisterBatch stores a submitted batch and its lines in one transaction, idempotently by
// (provider_id, provider_batch_id): a repeated registration (a data plane retrying after a lost answer)
// answers the stored batch with created false and changes nothing. The hold starts whole
// (held_micros = reserved_micros) and expires BatchHoldGrace after the provider's expiry.
func RegisterBatch(ctx context.Context, db TxBeginner, b Batch, lines []BatchLine) (Batch, bool, error) {
	ids := make([]string, len(lines))
	logical, upstream := make([]string, len(lines)), make([]string, len(lines))
	est := make([]int64, len(lines))
	for i, l := range lines {
		ids[i], logical[i], upstream[i], est[i] = l.CustomID, l.LogicalModel, l.UpstreamModel, l.EstimateMicros
	}
	var out Batch
	created := false
	tx, err := db.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return Batch{}, false, fmt.Errorf("register batch: begin: %w", interpretError(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	out, err = scanBatch(tx.QueryRow(ctx, `
		INSERT INTO batches (provider_id, credential_id, provider_batch_id, dialect, endpoint, api_key_id, user_id,
		    team_id, org_id, route_id, logical_model, upstream_model, expires_at, hold_expires_at, reserved_micros,
		    admitted_at, held_micros, line_count)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $15, $17)
		ON CONFLICT (provider_id, provider_batch_id) DO NOTHING
		RETURNING `+batchColumns,
		b.ProviderID, b.CredentialID, b.ProviderBatchID, b.Dialect, b.Endpoint, b.APIKeyID, b.UserID, b.TeamID,
		b.OrgID, b.RouteID, b.LogicalModel, b.UpstreamModel, b.ExpiresAt, b.ExpiresAt.Add(BatchHoldGrace),
		b.ReservedMicros, b.AdmittedAt, len(lines)))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		out, err = scanBatch(tx.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches
			WHERE provider_id = $1 AND provider_batch_id = $2`, b.ProviderID, b.ProviderBatchID))
		if err != nil {
			return Batch{}, false, fmt.Errorf("register batch: read stored: %w", interpretError(err))
		}
		return out, false, nil
	case err != nil:
		return Batch{}, false, fmt.Errorf("register batch: %w", interpretError(err))
	}
	created = true
	if len(lines) > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO batch_lines (batch_id, custom_id, logical_model, upstream_model, estimate_micros)
			SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[])`,
			out.ID, ids, logical, upstream, est); err != nil {
			return Batch{}, false, fmt.Errorf("register batch: lines: %w", interpretError(err))
		}
	}
	if out.ProgressSeq, err = nextProgressSeqs(ctx, tx, 1); err != nil {
		return Batch{}, false, err
	}
	if _, err := tx.Exec(ctx, `UPDATE batches SET progress_seq = $2 WHERE id = $1`, out.ID, out.ProgressSeq); err != nil {
		return Batch{}, false, fmt.Errorf("register batch: progress: %w", interpretError(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return Batch{}, false, fmt.Errorf("register batch: commit: %w", interpretError(err))
	}
	return out, created, nil
}

// GetBatch reads one batch; ErrNotFound when absent.
func GetBatch(ctx context.Context, db DBTX, id int64) (Batch, error) {
	b, err := scanBatch(db.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches WHERE id = $1`, id))
	if err != nil {
		return Batch{}, fmt.Errorf("get batch %d: %w", id, interpretError(err))
	}
	return b, nil
}

// BatchFilter selects batches for a listing: open only (not settled) or all, newest first, by keyset on id.
type BatchFilter struct {
	OpenOnly bool
	OrgID    *int64
	APIKeyID *int64
	BeforeID int64 // 0: from the newest
	Limit    int
}

// ListBatches lists batches by descending id.
func ListBatches(ctx context.Context, db DBTX, f BatchFilter) ([]Batch, error) {
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 100
	}
	out, err := collectBatches(db.Query(ctx, `SELECT `+batchColumns+` FROM batches
		WHERE (NOT $1 OR settled_at IS NULL) AND ($2::bigint IS NULL OR org_id = $2)
		  AND ($3::bigint IS NULL OR api_key_id = $3) AND ($4 = 0 OR id < $4)
		ORDER BY id DESC LIMIT $5`, f.OpenOnly, f.OrgID, f.APIKeyID, f.BeforeID, f.Limit))
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	return out, nil
}

// ListBatchHolds answers the batches whose hold changed after sequence number after (progress_seq), in
// sequence order: what a data plane applies to its reservations (docs/batches.md, "Releasing the hold").
func ListBatchHolds(ctx context.Context, db DBTX, after int64, limit int) ([]Batch, error) {
	if limit <= 0 || limit > 1000 {
		limit = 500
	}
	out, err := collectBatches(db.Query(ctx, `SELECT `+batchColumns+` FROM batches
		WHERE progress_seq > $1 ORDER BY progress_seq LIMIT $2`, after, limit))
	if err != nil {
		return nil, fmt.Errorf("list batch holds: %w", err)
	}
	return out, nil
}

// ClaimBatches leases up to limit open batches due for a poll to owner for lease: a batch is claimed by
// one replica at a time (FOR UPDATE SKIP LOCKED, and leased_until keeps it that way after the claim's
// transaction). A lease that expired (its holder died) is claimed again.
func ClaimBatches(ctx context.Context, db DBTX, owner string, lease time.Duration, limit int) ([]Batch, error) {
	out, err := collectBatches(db.Query(ctx, `
		UPDATE batches SET leased_by = $1, leased_until = now() + make_interval(secs => $2), poll_count = poll_count + 1
		 WHERE id IN (SELECT id FROM batches
		               WHERE settled_at IS NULL AND next_poll_at <= now()
		                 AND (leased_until IS NULL OR leased_until < now())
		               ORDER BY next_poll_at, id
		               LIMIT $3 FOR UPDATE SKIP LOCKED)
		RETURNING `+batchColumns, owner, lease.Seconds(), limit))
	if err != nil {
		return nil, fmt.Errorf("claim batches: %w", err)
	}
	return out, nil
}

// ErrLeaseLost means another replica holds the batch now (this replica's lease expired).
var ErrLeaseLost = errors.New("batch lease lost")

// RenewBatchLease extends owner's lease; ErrLeaseLost when owner no longer holds it.
func RenewBatchLease(ctx context.Context, db DBTX, id int64, owner string, lease time.Duration) error {
	tag, err := db.Exec(ctx, `UPDATE batches SET leased_until = now() + make_interval(secs => $3)
		WHERE id = $1 AND leased_by = $2 AND leased_until >= now()`, id, owner, lease.Seconds())
	if err != nil {
		return fmt.Errorf("renew batch lease %d: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	return nil
}

// BatchPoll is what one poll learned of a batch at its provider.
type BatchPoll struct {
	Status         string
	Outcome        string
	ProviderStatus string
	EndedAt        *time.Time
	NextPollAt     time.Time
	LastError      string
}

// RecordBatchPoll stores a poll's result and gives up owner's lease (the next claim is at NextPollAt).
// The batch's end (its status becoming ended) takes a progress number. ErrLeaseLost when owner no longer holds
// the batch.
func RecordBatchPoll(ctx context.Context, db TxBeginner, id int64, owner string, p BatchPoll) error {
	return pgx.BeginTxFunc(ctx, db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var status string
		var seq int64
		err := tx.QueryRow(ctx, `SELECT status, progress_seq FROM batches WHERE id = $1 AND leased_by = $2 FOR UPDATE`, id, owner).Scan(&status, &seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrLeaseLost
		}
		if err != nil {
			return fmt.Errorf("record batch poll %d: %w", id, interpretError(err))
		}
		if status != BatchEnded && p.Status == BatchEnded {
			if seq, err = nextProgressSeqs(ctx, tx, 1); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE batches SET status = $2, outcome = $3, provider_status = $4,
			    ended_at = coalesce(ended_at, $5), next_poll_at = $6, last_error = $7, leased_by = '', leased_until = NULL,
			    progress_seq = $8
			WHERE id = $1`, id, p.Status, p.Outcome, p.ProviderStatus, p.EndedAt, p.NextPollAt, p.LastError, seq); err != nil {
			return fmt.Errorf("record batch poll %d: %w", id, interpretError(err))
		}
		return nil
	})
}

// nextProgressSeqs reserves n consecutive progress numbers and answers the first. The counter row stays locked
// to the transaction's end, so numbers commit in order (migration 0021): call it last, after every batch row and
// line the transaction locks.
func nextProgressSeqs(ctx context.Context, tx pgx.Tx, n int) (int64, error) {
	var last int64
	if err := tx.QueryRow(ctx, `UPDATE batch_progress SET seq = seq + $1 RETURNING seq`, n).Scan(&last); err != nil {
		return 0, fmt.Errorf("batch progress number: %w", interpretError(err))
	}
	return last - int64(n) + 1, nil
}

// CloseBatch marks a batch whose results were all read as settled (and ended, if its end was not recorded): its lines still pending (the results did
// not name them) become 'missing' with no usage row (the provider bills nothing it did not answer), the hold
// drops to 0 and progress_seq moves so data planes release the rest. Idempotent.
func CloseBatch(ctx context.Context, db TxBeginner, id int64) error {
	return pgx.BeginTxFunc(ctx, db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var settled bool
		if err := tx.QueryRow(ctx, `SELECT settled_at IS NOT NULL FROM batches WHERE id = $1 FOR UPDATE`, id).Scan(&settled); err != nil {
			return fmt.Errorf("close batch %d: lock: %w", id, interpretError(err))
		}
		if settled {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE batch_lines SET state = 'missing', cost = 0, settled_at = now()
			WHERE batch_id = $1 AND state = 'pending'`, id); err != nil {
			return fmt.Errorf("close batch %d: lines: %w", id, interpretError(err))
		}
		seq, err := nextProgressSeqs(ctx, tx, 1)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE batches SET settled_at = now(), held_micros = 0, progress_seq = $2,
			    status = 'ended', ended_at = coalesce(ended_at, now()), leased_by = '', leased_until = NULL
			WHERE id = $1`, id, seq); err != nil {
			return fmt.Errorf("close batch %d: %w", id, interpretError(err))
		}
		return nil
	})
}

// BatchLinesOf reads the registered lines among customIDs (absent ones are not in the answer).
func BatchLinesOf(ctx context.Context, db DBTX, batchID int64, customIDs []string) (map[string]BatchLine, error) {
	rows, err := db.Query(ctx, `SELECT custom_id, logical_model, upstream_model, estimate_micros FROM batch_lines
		WHERE batch_id = $1 AND custom_id = ANY($2)`, batchID, customIDs)
	if err != nil {
		return nil, fmt.Errorf("batch lines of %d: %w", batchID, interpretError(err))
	}
	defer rows.Close()
	out := make(map[string]BatchLine, len(customIDs))
	for rows.Next() {
		var l BatchLine
		if err := rows.Scan(&l.CustomID, &l.LogicalModel, &l.UpstreamModel, &l.EstimateMicros); err != nil {
			return nil, fmt.Errorf("batch lines of %d: %w", batchID, interpretError(err))
		}
		out[l.CustomID] = l
	}
	return out, interpretError(rows.Err())
}

// BatchLineState is one line's settled state (tests and the admin API).
type BatchLineState struct {
	CustomID       string
	State          string
	Registered     bool
	Cost           *string
	UsageRequestID *string
}

// BatchLineStates lists a batch's lines in custom_id order.
func BatchLineStates(ctx context.Context, db DBTX, batchID int64) ([]BatchLineState, error) {
	rows, err := db.Query(ctx, `SELECT custom_id, state, registered, cost::text, usage_request_id FROM batch_lines
		WHERE batch_id = $1 ORDER BY custom_id`, batchID)
	if err != nil {
		return nil, fmt.Errorf("batch line states of %d: %w", batchID, interpretError(err))
	}
	defer rows.Close()
	var out []BatchLineState
	for rows.Next() {
		var s BatchLineState
		if err := rows.Scan(&s.CustomID, &s.State, &s.Registered, &s.Cost, &s.UsageRequestID); err != nil {
			return nil, fmt.Errorf("batch line states of %d: %w", batchID, interpretError(err))
		}
		out = append(out, s)
	}
	return out, interpretError(rows.Err())
}

// BatchLineRequestID is the usage row's request_id of a batch line: "batch_<batch id>_<custom_id>", or with a
// digest of the custom_id when it is long (request ids are at most 200 characters).
func BatchLineRequestID(batchID int64, customID string) string {
	prefix := "batch_" + strconv.FormatInt(batchID, 10) + "_"
	if len(customID) <= 150 {
		return prefix + customID
	}
	sum := sha256.Sum256([]byte(customID))
	return prefix + "h" + hex.EncodeToString(sum[:])
}

// batchLineClaim is a batch line the settling transaction moved out of pending.
type batchLineClaim struct {
	estimate int64
}

// claimBatchLines moves the batch lines among rows from pending to their end state (or inserts an
// unregistered line) and answers the ones this transaction claimed, keyed by request id: a line already
// settled — by an earlier read, another replica, or a repeated row in this batch — is not claimed and its row
// must not be inserted. Lines are claimed in (batch_id, custom_id) order, so concurrent settlements of
// overlapping lines queue instead of deadlocking.
func claimBatchLines(ctx context.Context, tx pgx.Tx, rows []*UsageRow) (map[string]batchLineClaim, error) {
	var lines []*UsageRow
	for _, r := range rows {
		if r.BatchID != nil {
			lines = append(lines, r)
		}
	}
	claimed := make(map[string]batchLineClaim, len(lines))
	if len(lines) == 0 {
		return claimed, nil
	}
	slices.SortFunc(lines, func(a, b *UsageRow) int {
		if *a.BatchID != *b.BatchID {
			if *a.BatchID < *b.BatchID {
				return -1
			}
			return 1
		}
		switch {
		case a.CustomID < b.CustomID:
			return -1
		case a.CustomID > b.CustomID:
			return 1
		}
		return 0
	})
	batchIDs := make([]int64, 0, 1)
	for _, r := range lines {
		if len(batchIDs) == 0 || batchIDs[len(batchIDs)-1] != *r.BatchID {
			batchIDs = append(batchIDs, *r.BatchID)
		}
	}
	// The batch rows first (id order), as CloseBatch takes them, then the lines: no lock-order inversion.
	if _, err := tx.Exec(ctx, `SELECT id FROM batches WHERE id = ANY($1) ORDER BY id FOR UPDATE`, batchIDs); err != nil {
		return nil, fmt.Errorf("settle: lock batches: %w", interpretError(err))
	}
	n := len(lines)
	batch, custom, state, logical, upstream, cost, reqID := make([]int64, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, r := range lines {
		batch[i], custom[i], state[i] = *r.BatchID, r.CustomID, r.BatchLineState
		logical[i], upstream[i], cost[i], reqID[i] = r.LogicalModel, r.UpstreamModel, r.Cost, r.RequestID
	}
	res, err := tx.Query(ctx, `
		INSERT INTO batch_lines AS l (batch_id, custom_id, logical_model, upstream_model, state, registered, cost,
		    usage_request_id, settled_at)
		SELECT b, c, lm, um, s, false, co, rq, now()
		  FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::numeric[], $7::text[])
		       AS t(b, c, s, lm, um, co, rq)
		 ORDER BY b, c
		ON CONFLICT (batch_id, custom_id) DO UPDATE
		   SET state = excluded.state, cost = excluded.cost, usage_request_id = excluded.usage_request_id,
		       settled_at = excluded.settled_at
		 WHERE l.state = 'pending'
		RETURNING l.usage_request_id, l.estimate_micros`, batch, custom, state, logical, upstream, cost, reqID)
	if err != nil {
		return nil, fmt.Errorf("settle: claim batch lines: %w", interpretError(err))
	}
	defer res.Close()
	for res.Next() {
		var id string
		var c batchLineClaim
		if err := res.Scan(&id, &c.estimate); err != nil {
			return nil, fmt.Errorf("settle: claim batch lines: %w", interpretError(err))
		}
		claimed[id] = c
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("settle: claim batch lines: %w", interpretError(err))
	}
	return claimed, nil
}

// applyBatchProgress adds the claimed lines to their batches' counters, settled cost and hold, and moves
// each batch's progress_seq, in the settling transaction.
func applyBatchProgress(ctx context.Context, tx pgx.Tx, rows []*UsageRow, claimed map[string]batchLineClaim, costs map[string]string) error {
	type acc struct {
		ok, errored, expired, cancelled int64
		released                        int64
		cost                            []string
	}
	byBatch := map[int64]*acc{}
	for _, r := range rows {
		c, ok := claimed[r.RequestID]
		if r.BatchID == nil || !ok {
			continue
		}
		a := byBatch[*r.BatchID]
		if a == nil {
			a = &acc{}
			byBatch[*r.BatchID] = a
		}
		switch r.BatchLineState {
		case LineSucceeded:
			a.ok++
		case LineErrored:
			a.errored++
		case LineExpired:
			a.expired++
		case LineCancelled:
			a.cancelled++
		}
		a.released += c.estimate
		if cost, ok := costs[r.RequestID]; ok {
			a.cost = append(a.cost, cost)
		}
	}
	ids := make([]int64, 0, len(byBatch))
	for id := range byBatch {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(ids) == 0 {
		return nil
	}
	first, err := nextProgressSeqs(ctx, tx, len(ids))
	if err != nil {
		return err
	}
	for i, id := range ids {
		a := byBatch[id]
		if _, err := tx.Exec(ctx, `UPDATE batches SET
			    lines_succeeded = lines_succeeded + $2, lines_errored = lines_errored + $3,
			    lines_expired = lines_expired + $4, lines_cancelled = lines_cancelled + $5,
			    held_micros = greatest(0, held_micros - $6),
			    settled_cost = settled_cost + coalesce((SELECT sum(c) FROM unnest($7::numeric[]) AS c), 0),
			    progress_seq = $8
			WHERE id = $1`, id, a.ok, a.errored, a.expired, a.cancelled, a.released, a.cost, first+int64(i)); err != nil {
			return fmt.Errorf("settle: batch %d progress: %w", id, interpretError(err))
		}
	}
	return nil
}

// BatchCredential is what the watcher needs to call a batch's provider: the channel, the base URL and the
// sealed secret of the credential that created the batch (read even when disabled since: the batch lives in
// that account).
type BatchCredential struct {
	ChannelType string
	BaseURL     string
	Sealed      []byte
}

// GetBatchCredential reads a credential with its provider; ErrNotFound when absent.
func GetBatchCredential(ctx context.Context, db DBTX, credentialID int64) (BatchCredential, error) {
	var c BatchCredential
	err := db.QueryRow(ctx, `SELECT p.channel_type, p.base_url, c.secret_ciphertext
		  FROM credentials c JOIN providers p ON p.id = c.provider_id WHERE c.id = $1`, credentialID).
		Scan(&c.ChannelType, &c.BaseURL, &c.Sealed)
	if err != nil {
		return BatchCredential{}, fmt.Errorf("batch credential %d: %w", credentialID, interpretError(err))
	}
	return c, nil
}

// PricedRules reads the enabled price rules exactly as the snapshot carries them (with their current
// version), and the config revision they belong to, in one read-only transaction.
func PricedRules(ctx context.Context, db TxBeginner) ([]*configv1.PriceRule, int64, error) {
	var rules []*configv1.PriceRule
	var rev int64
	err := pgx.BeginTxFunc(ctx, db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if rev, err = Revision(ctx, tx); err != nil {
			return err
		}
		rules, err = snapPriceRules(ctx, tx)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("priced rules: %w", err)
	}
	return rules, rev, nil
}
