// Package admission owns the data plane's pre-upstream checks in Redis: an API key's per-minute request
// and token rate limits, and quota admission — reserving the request's estimated cost as pending
// micro-dollars on every quota-bearing scope (org, team, user), all or nothing, in a single Lua round
// trip. It also owns the Redis key layout of pending holds (qp:), the cost_used mirror (qu:) and the rate
// windows, which the settlement forwarder uses to refund holds and refresh the mirror, and its sharding by
// organisation under hash tags (Shards; Redis Cluster).
//
// Admission math (docs/settlement.md): a request with estimate e is admitted on scope s only when
//
//	used(s) + pending(s) + e <= limit(s)
//
// where used is, of the qu: mirror and the snapshot's cost_used, the one of the newer adjustment epoch,
// or the larger at the same epoch (docs/settlement.md, "Adjustment epochs"), and pending is the sum of estimates still
// held. Consequently the settled total of a scope exceeds its limit by at most the sum, over the requests
// in flight when the limit is crossed, of max(0, actual cost − estimate): see Bound.
//
// A Redis that hangs cannot hold a request (docs/dataplane.md, "Redis outage"): every Admit call has a
// deadline (Options.Timeout), and what a failed call means is the operator's FailurePolicy — admit
// without a reservation (open) or refuse (closed, ErrFailedClosed). A reservation that reaches Redis
// after its caller gave up does not leak: every hold of a request with an id carries a marker
// (qh:{request id}) that makes it exist once, and the calls whose outcome is unknown are released in the
// background as soon as Redis answers again.
package admission

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/redisbatch"
	"github.com/tollgate/tollgate/shared/period"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Defaults of Options.
const (
	DefaultPendingTTL = 15 * time.Minute // a hold outlives any request; a lost one frees itself after this
	DefaultMirrorTTL  = time.Hour
	// DefaultTimeout bounds one admission call (config.RedisTimeout's default).
	DefaultTimeout = time.Second
	// rateWindowTTL keeps a per-minute window key a little past its minute, so a settle-time TPM
	// correction can still find it. It runs from the window's first count; admit.lua writes it as a
	// literal (120 s; TestAdmitKeyTTLs).
	rateWindowTTL = 2 * time.Minute
)

// ErrQuotaExceeded refuses a request whose estimate does not fit a scope's remaining quota (→ 402
// insufficient_quota). Nothing was reserved.
var ErrQuotaExceeded = errors.New("quota exceeded")

// ErrUnavailable is Admit's answer, without trying Redis, for unavailablePause after a Redis call failed:
// during an outage requests do not each wait for a dead server (the caller decides what an unavailable
// admission means; the data plane admits without a reservation).
var ErrUnavailable = errors.New("admission: redis failed less than a second ago; not retried yet")

// unavailablePause is how long Admit answers ErrUnavailable after a failed Redis call.
const unavailablePause = time.Second

// ErrFailedClosed is Admit's answer under FailClosed when Redis failed or did not answer in time (or
// failed less than a second ago): the request must be refused (→ 503). Nothing was reserved — or what a
// late call reserves is released (Abandoned).
var ErrFailedClosed = errors.New("admission: redis unavailable and the failure policy is closed")

// errReleased is the script's answer to a copy of a call whose reservation was released already.
var errReleased = errors.New("admission: this request's reservation was released (its caller gave up)")

// FailurePolicy says what a Redis failure during admission means (config.AdmissionOnRedisFailure).
type FailurePolicy string

// Failure policies.
const (
	// FailOpen admits the request without a reservation (the caller decides; Admit returns the Redis
	// error): availability wins, and settlement still records the cost.
	FailOpen FailurePolicy = "open"
	// FailClosed refuses the request (ErrFailedClosed): no request is served without its quota checked.
	FailClosed FailurePolicy = "closed"
)

// ParseFailurePolicy parses "open" or "closed".
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	switch p := FailurePolicy(s); p {
	case FailOpen, FailClosed:
		return p, nil
	}
	return "", fmt.Errorf("admission failure policy %q: want open or closed", s)
}

// maxAbandoned bounds the reservations of unknown outcome kept for release; beyond it they are left to
// the pending TTL.
const maxAbandoned = 100_000

// abandoned is a call whose reply never came (timeout, connection lost): it may or may not have reserved
// its hold, so the hold is released — at most once, by its marker — when Redis answers again.
type abandoned struct{ hold Hold }

// QuotaError details ErrQuotaExceeded: the first scope that refused.
type QuotaError struct {
	Scope vocab.Scope
	ID    int64
}

func (e *QuotaError) Error() string { return fmt.Sprintf("quota exceeded on %s %d", e.Scope, e.ID) }

// Is makes errors.Is(err, ErrQuotaExceeded) true.
func (e *QuotaError) Is(target error) bool { return target == ErrQuotaExceeded }

// RateLimitError refuses a request over the key's rate limit (→ 429 with Retry-After). Nothing was
// reserved or counted.
type RateLimitError struct {
	// RetryAfter is the time until the current window ends.
	RetryAfter time.Duration
	// Limit names the exhausted limit: "rpm" or "tpm".
	Limit string
	// Scope and ID name whose limit it is: the API key's own (ScopeKey) or its team's, org's or user's
	// (docs/budgets.md, "Admission").
	Scope vocab.Scope
	ID    int64
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("rate limit %s of %s %d exceeded; retry after %s", e.Limit, e.Scope, e.ID, e.RetryAfter)
}

// ScopeQuota is one quota-bearing scope of a request: a scope with a quota that has a limit.
type ScopeQuota struct {
	Scope vocab.Scope
	ID    int64
	// LimitMicros is the scope's cost_limit in micro-dollars.
	LimitMicros int64
	// SnapshotUsedMicros is cost_used as of the snapshot (micro-dollars): the fallback when the Redis
	// mirror is absent, a floor under a mirror of the same adjustment epoch, and the value when the
	// mirror's epoch is older (a credit the mirror has not seen).
	SnapshotUsedMicros int64
	// SnapshotEpoch is the snapshot's adjustment epoch of the scope (snapshot.Quota.Epoch).
	SnapshotEpoch int64
	// Period is the id of the budget period the request is admitted in (period.Period.ID; "" for a
	// quota without period). With Options.Snapshot, Admit derives it from the snapshot and its clock.
	Period string
}

// Request is what Admit checks.
type Request struct {
	// OrgID is the key's organisation: it decides the shard of every key the request touches (Shards).
	// With Options.Snapshot the snapshot's key's organisation is used when it knows the key.
	OrgID int64
	// ID is the request's id (the settlement record's request_id). With an id, the hold carries a marker
	// that makes it exist and be refunded once (see Hold.RequestID); without one (tests), it does not.
	ID    string
	KeyID int64
	// RPMLimit and TPMLimit are the key's per-minute limits; 0 means unlimited.
	RPMLimit int64
	TPMLimit int64
	// EstimateTokens counts against TPM now (corrected at settlement to the actual total).
	EstimateTokens int64
	// EstimateMicros is the pending estimate to reserve on every scope (pricing.EstimateMicros).
	EstimateMicros int64
	// Scopes are the request's quota-bearing scopes: the key's org, team, user and the key itself, each
	// when it has a limited quota (QuotaScopes). With Options.Snapshot, Admit also checks the per-minute
	// limits of the key's org's, team's and user's quotas (docs/budgets.md, "Admission").
	Scopes []ScopeQuota
}

// ScopeRef names a scope a hold reserved on, in the budget period it was admitted in ("" for none).
type ScopeRef struct {
	Scope  vocab.Scope
	ID     int64
	Period string
}

// Hold is what one admitted request reserved; the settlement record carries it so the forwarder can
// refund exactly this amount on exactly these scopes once the control plane has settled the request.
type Hold struct {
	// Micros was added to qp: of every scope in Scopes (0: nothing reserved, Scopes empty).
	Micros int64
	Scopes []ScopeRef
	// KeyID, Window (unix minute) and Tokens locate the TPM count to correct at settlement.
	KeyID  int64
	Window int64
	Tokens int64
	// RequestID names the hold's marker (Keys.Hold) when the reservation set one: refunds then remove
	// the hold only while the marker says it is held, so a hold is refunded at most once whatever path
	// (outbox, spill, immediate refund, release) and however often. Empty for unmarked holds.
	RequestID string
	// At is when admission ran (Options.Now); the settlement record carries it as admitted_at, which
	// decides the budget period its cost is charged to. Zero for a hold not made by this version.
	At time.Time
	// Expiring is set for a marked hold whose amount is also a member of each scope's qe: set (every
	// hold this version makes): a refund then subtracts it only while the member is there.
	Expiring bool
	// RateScopes are the scopes whose per-minute token windows (Keys.ScopeTPM) counted Tokens besides the
	// key's own, corrected at settlement like the key's.
	RateScopes []ScopeRef
	// Tag is the shard tag (Keys.Tag) of every key the hold names: its organisation's when admission
	// made it. It is not part of EncodeHold: an outbox entry's tag is its stream's (settle.Streams).
	Tag string
}

// Member is the hold's member in its scopes' qe: sets: "<micros>:<request id>".
func (h Hold) Member() string {
	if !h.Expiring || h.RequestID == "" {
		return ""
	}
	return strconv.FormatInt(h.Micros, 10) + ":" + h.RequestID
}

// Options tune an Admitter.
type Options struct {
	// Prefix namespaces every key (config.RedisKeyPrefix).
	Prefix string
	// Shards is the number of shards the organisations' keys are spread over (config.RedisShards; 0 or
	// 1: one, untagged). Every data plane sharing a Redis must use the same number.
	Shards int
	// PendingTTL is the lifetime of a hold (default 15 min): a hold not refunded by then stops counting
	// at the scope's next admission; the counters' keys live that long after the last reservation.
	PendingTTL time.Duration
	// Now is the clock of the rate windows, the holds' expiry and the budget periods (default time.Now).
	Now func() time.Time
	// Timeout bounds one admission call (default DefaultTimeout); the caller's context may end it sooner.
	Timeout time.Duration
	// OnRedisFailure is what a failed or timed-out call means (default FailOpen).
	OnRedisFailure FailurePolicy
	// Snapshot, when set, returns the snapshot in force: Admit then takes each scope's
	// SnapshotUsedMicros, SnapshotEpoch and budget period from it (from the one snapshot, so they belong
	// together, and never older than the caller's), whatever the Request carries, and checks the rate
	// limits of the key's org, team and user quotas. A scope the snapshot has no quota for keeps the
	// Request's values. Without it, scopes are treated as quotas without period.
	Snapshot func() *snapshot.Compiled
}

// Admitter runs admission against Redis. It is safe for concurrent use.
type Admitter struct {
	rdb     redis.Scripter
	prefix  string
	shards  Shards
	ttl     time.Duration
	now     func() time.Time
	script  *redis.Script
	timeout time.Duration
	policy  FailurePolicy
	snap    func() *snapshot.Compiled
	// downUntil (unix nanoseconds, wall clock) ends the pause after a failed Redis call.
	downUntil atomic.Int64

	mu        sync.Mutex
	abandoned []abandoned // reservations of unknown outcome, released by release
	releasing bool        // release is running
}

//go:embed admit.lua
var admitLua string

var admitScript = redis.NewScript(admitLua)

// New returns an Admitter on rdb.
func New(rdb redis.Scripter, opts Options) *Admitter {
	if opts.PendingTTL <= 0 {
		opts.PendingTTL = DefaultPendingTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.OnRedisFailure == "" {
		opts.OnRedisFailure = FailOpen
	}
	return &Admitter{rdb: rdb, prefix: opts.Prefix, shards: NewShards(opts.Shards), ttl: opts.PendingTTL, now: opts.Now, script: admitScript,
		timeout: opts.Timeout, policy: opts.OnRedisFailure, snap: opts.Snapshot}
}

// Policy is the Admitter's FailurePolicy.
func (a *Admitter) Policy() FailurePolicy { return a.policy }

// Keys is the Redis key layout shared by admission and the settlement forwarder: the keys of one shard.
// With a Tag every name is "<prefix><kind>:{<tag>}:<rest>" — the hash tag of the organisation's shard,
// which puts all keys of one request in one Redis Cluster slot (Shards); without one (a single shard)
// "<prefix><kind>:<rest>", the names of the releases before sharding.
type Keys struct {
	Prefix string
	Tag    string
}

// kind is "<prefix><kind>:", followed by "{<tag>}:" with a tag.
func (k Keys) kind(kind string) string {
	if k.Tag == "" {
		return k.Prefix + kind + ":"
	}
	return k.Prefix + kind + ":{" + k.Tag + "}:"
}

// scopeKey is "<kind>:<scope>:<id>", followed by ":<period id>" for a periodic quota.
func (k Keys) scopeKey(kind string, s vocab.Scope, id int64, periodID string) string {
	key := k.kind(kind) + string(s) + ":" + strconv.FormatInt(id, 10)
	if periodID != "" {
		key += ":" + periodID
	}
	return key
}

// Pending is the pending-estimate counter of a scope without period: qp:{scope}:{id}, integer micros.
func (k Keys) Pending(s vocab.Scope, id int64) string { return k.scopeKey("qp", s, id, "") }

// PendingIn is the pending-estimate counter of a scope in a budget period: qp:{scope}:{id}:{period}
// (Pending when periodID is "").
func (k Keys) PendingIn(s vocab.Scope, id int64, periodID string) string {
	return k.scopeKey("qp", s, id, periodID)
}

// Holds is the sorted set of the holds counted in PendingIn, scored by expiry (unix ms).
func (k Keys) Holds(s vocab.Scope, id int64, periodID string) string {
	return k.scopeKey("qe", s, id, periodID)
}

// Used is the mirror of a scope's cost_used: qu:{scope}:{id}, integer micro-dollars, followed by
// ':<adjustment epoch>' when the epoch is not 0 (docs/settlement.md, "Adjustment epochs").
func (k Keys) Used(s vocab.Scope, id int64) string { return k.scopeKey("qu", s, id, "") }

// UsedIn is the mirror of a periodic scope's spend in one period: qu:{scope}:{id}:{period}.
func (k Keys) UsedIn(s vocab.Scope, id int64, periodID string) string {
	return k.scopeKey("qu", s, id, periodID)
}

// ScopeRPM and ScopeTPM are the request and token counts of a scope (team, org, user) in one minute
// window: rs:{scope}:{id}:{unix minute}:r / :t.
func (k Keys) ScopeRPM(s vocab.Scope, id, window int64) string {
	return k.kind("rs") + string(s) + ":" + strconv.FormatInt(id, 10) + ":" + strconv.FormatInt(window, 10) + ":r"
}

// ScopeTPM: see ScopeRPM.
func (k Keys) ScopeTPM(s vocab.Scope, id, window int64) string {
	return k.kind("rs") + string(s) + ":" + strconv.FormatInt(id, 10) + ":" + strconv.FormatInt(window, 10) + ":t"
}

// RPM is the request count of a key in one minute window.
func (k Keys) RPM(keyID, window int64) string {
	return k.kind("rl") + strconv.FormatInt(keyID, 10) + ":" + strconv.FormatInt(window, 10) + ":r"
}

// Hold is the marker of a request's hold: qh:{request id}, 'h' while held, 'x' once refunded or released.
func (k Keys) Hold(requestID string) string { return k.kind("qh") + requestID }

// RequestCost is a request's cost-lookup marker: rc:{request id}, the id of the API key that made it, for
// costMarkerTTL from admission (docs/cost.md, "Cost by request id").
func (k Keys) RequestCost(requestID string) string { return k.kind("rc") + requestID }

// costMarkerTTL is the lifetime of a cost-lookup marker (admit.lua's literal).
const costMarkerTTL = 24 * time.Hour

// TPM is the token count of a key in one minute window.
func (k Keys) TPM(keyID, window int64) string {
	return k.kind("rl") + strconv.FormatInt(keyID, 10) + ":" + strconv.FormatInt(window, 10) + ":t"
}

// Admit checks the key's rate limits and every scope's quota in one Redis round trip and, only when
// everything passes, reserves EstimateMicros on every scope and counts the request. It returns a
// *RateLimitError, an error matching ErrQuotaExceeded (a *QuotaError), or — Redis failed, did not answer
// within Options.Timeout, or failed less than a second ago — under FailOpen the Redis error (wrapped, or
// ErrUnavailable) and under FailClosed an error matching ErrFailedClosed; on any error nothing is
// reserved (a reservation of unknown outcome is released once Redis answers). A zero estimate reserves
// nothing (the quota check still refuses a scope that is already over its limit).
func (a *Admitter) Admit(ctx context.Context, req Request) (Hold, error) {
	now := a.now()
	window := now.Unix() / 60
	est := max(req.EstimateMicros, 0)
	tokens := max(req.EstimateTokens, 0)
	var snap *snapshot.Compiled
	if a.snap != nil {
		snap = a.snap()
	}
	scopes, limiters, org := a.resolve(snap, req, now)
	keys := Keys{Prefix: a.prefix, Tag: a.shards.Tag(org)}
	marked := ValidRequestID(req.ID) && est > 0 && len(scopes) > 0
	h := Hold{KeyID: req.KeyID, Window: window, At: now, Tag: keys.Tag}
	if marked {
		h.Micros, h.RequestID, h.Expiring = est, req.ID, true
	}
	names := make([]string, 0, 2+2*len(limiters)+3*len(scopes))
	names = append(names, keys.Hold(req.ID))
	ttl := int64(a.ttl / time.Second)
	args := make([]any, 0, 8+2*len(limiters)+3*len(scopes))
	args = append(args, len(limiters), tokens, est, ttl, now.UnixMilli(), h.Member(), now.UnixMilli()+ttl*1000)
	for _, l := range limiters {
		if l.Scope == vocab.ScopeKey {
			names = append(names, keys.RPM(req.KeyID, window), keys.TPM(req.KeyID, window))
		} else {
			names = append(names, keys.ScopeRPM(l.Scope, l.ID, window), keys.ScopeTPM(l.Scope, l.ID, window))
		}
		args = append(args, max(l.rpm, 0), max(l.tpm, 0)) // admit.lua: '0' is no limit
	}
	for _, s := range scopes {
		names = append(names, keys.PendingIn(s.Scope, s.ID, s.Period), keys.UsedIn(s.Scope, s.ID, s.Period),
			keys.Holds(s.Scope, s.ID, s.Period))
		args = append(args, s.LimitMicros, max(s.SnapshotUsedMicros, 0), max(s.SnapshotEpoch, 0))
	}
	// The cost-lookup marker (docs/cost.md): which key made this request, until it settled and after.
	names = append(names, keys.RequestCost(req.ID))
	if ValidRequestID(req.ID) && req.KeyID != 0 {
		args = append(args, req.KeyID)
	} else {
		args = append(args, "")
	}
	if time.Now().UnixNano() < a.downUntil.Load() {
		return Hold{}, a.failed(ErrUnavailable)
	}
	callCtx, cancel := context.WithTimeout(ctx, a.timeout)
	res, err := a.script.Run(callCtx, a.rdb, names, args...).Int64()
	cancel()
	if err != nil {
		if ctx.Err() == nil { // a request that went away says nothing about Redis
			a.downUntil.Store(time.Now().Add(unavailablePause).UnixNano())
		}
		if marked && !errors.Is(err, redisbatch.ErrNotSent) {
			// Sent, but no reply: it may still reserve when Redis answers. Release it then.
			a.abandon(Hold{Micros: est, Scopes: scopeRefs(scopes), RequestID: req.ID, Expiring: true, Tag: keys.Tag})
		}
		if ctx.Err() != nil {
			return Hold{}, fmt.Errorf("admission: redis: %w", err)
		}
		return Hold{}, a.failed(fmt.Errorf("admission: redis: %w", err))
	}
	// admit.lua answers 100 × outcome + the index of the limiter or scope it names (a number: cheaper for
	// Redis than a list).
	code, index := res/100, res%100
	switch code {
	case 0:
	case 1, 2:
		limit := "rpm"
		if code == 2 {
			limit = "tpm"
		}
		retry := time.Unix((window+1)*60, 0).Sub(now)
		if retry < time.Second {
			retry = time.Second
		}
		e := &RateLimitError{RetryAfter: retry, Limit: limit, Scope: vocab.ScopeKey, ID: req.KeyID}
		if j := int(index) - 1; j >= 0 && j < len(limiters) {
			e.Scope, e.ID = limiters[j].Scope, limiters[j].ID
		}
		return Hold{}, e
	case 4:
		return Hold{}, a.failed(errReleased)
	case 3:
		i := int(index) - 1
		if i < 0 || i >= len(scopes) {
			return Hold{}, ErrQuotaExceeded
		}
		return Hold{}, &QuotaError{Scope: scopes[i].Scope, ID: scopes[i].ID}
	default:
		return Hold{}, fmt.Errorf("admission: unexpected script reply %v", res)
	}
	if tokens > 0 {
		for _, l := range limiters {
			if l.tpm <= 0 {
				continue
			}
			if l.Scope == vocab.ScopeKey {
				h.Tokens = tokens
			} else {
				h.RateScopes = append(h.RateScopes, ScopeRef{Scope: l.Scope, ID: l.ID})
			}
		}
		if len(h.RateScopes) > 0 {
			h.Tokens = tokens
		}
	}
	if est > 0 && len(scopes) > 0 {
		h.Micros = est
		h.Scopes = scopeRefs(scopes)
	}
	return h, nil
}

// limiter is one per-minute rate limit checked by admission: the key's own or a scope's.
type limiter struct {
	Scope    vocab.Scope
	ID       int64
	rpm, tpm int64
}

// resolve completes a request from the snapshot in force: each scope's spend and epoch in the period
// containing now, the rate limits of the key and of its team's, org's and user's quotas, and the key's
// organisation (which decides the shard). Without a snapshot the request is used as it is.
func (a *Admitter) resolve(snap *snapshot.Compiled, req Request, now time.Time) ([]ScopeQuota, []limiter, int64) {
	var limiters []limiter
	if req.RPMLimit > 0 || req.TPMLimit > 0 {
		limiters = append(limiters, limiter{Scope: vocab.ScopeKey, ID: req.KeyID, rpm: max(req.RPMLimit, 0), tpm: max(req.TPMLimit, 0)})
	}
	org := req.OrgID
	if snap == nil {
		return req.Scopes, limiters, org
	}
	scopes := make([]ScopeQuota, 0, len(req.Scopes))
	for _, s := range req.Scopes {
		if q, ok := snap.Quota(s.Scope, s.ID); ok {
			var p period.Period
			p, s.SnapshotUsedMicros = q.Current(now)
			s.SnapshotEpoch, s.Period = q.Epoch, p.ID()
		}
		scopes = append(scopes, s)
	}
	if k := snap.KeyByID(req.KeyID); k != nil {
		org = k.OrgID
		refs, n := keyScopes(k)
		for _, sc := range refs[:n-1] {
			if q, ok := snap.Quota(sc.Scope, sc.ID); ok && (q.RPMLimit > 0 || q.TPMLimit > 0) {
				limiters = append(limiters, limiter{Scope: sc.Scope, ID: sc.ID, rpm: q.RPMLimit, tpm: q.TPMLimit})
			}
		}
	}
	return scopes, limiters, org
}

// keyScopes are the scopes a key's spend counts in: its org, team (when the key's user has one), user —
// the owners, refs[:n-1] — and the key itself, refs[n-1]. An array, not a slice: this runs on every
// request and allocates nothing.
func keyScopes(k *snapshot.APIKey) (refs [4]ScopeRef, n int) {
	refs[n] = ScopeRef{Scope: vocab.ScopeOrg, ID: k.OrgID}
	n++
	if k.TeamID > 0 {
		refs[n] = ScopeRef{Scope: vocab.ScopeTeam, ID: k.TeamID}
		n++
	}
	refs[n] = ScopeRef{Scope: vocab.ScopeUser, ID: k.UserID}
	refs[n+1] = ScopeRef{Scope: vocab.ScopeKey, ID: k.ID}
	return refs, n + 2
}

// QuotaScopes appends to dst the quota-bearing scopes of a billable request by key: its org, team, user
// and the key itself (scope "key"), each when the snapshot has a quota with a limit for it, with the
// limit and the snapshot's spend (Admit refreshes the spend and period from the snapshot in force). The
// caller puts them in Request.Scopes.
func QuotaScopes(snap *snapshot.Compiled, k *snapshot.APIKey, dst []ScopeQuota) []ScopeQuota {
	if snap == nil || k == nil {
		return dst
	}
	refs, n := keyScopes(k)
	for _, sc := range refs[:n] {
		if q, ok := snap.Quota(sc.Scope, sc.ID); ok && !q.Unlimited && sc.ID > 0 {
			dst = append(dst, ScopeQuota{Scope: sc.Scope, ID: sc.ID, LimitMicros: q.LimitMicros, SnapshotUsedMicros: q.UsedMicros,
				SnapshotEpoch: q.Epoch})
		}
	}
	return dst
}

// ScopeRateLimited reports whether the key's org, team or user quota has a per-minute limit: a request
// by the key then needs Admit even when the key has no limit of its own and nothing to reserve.
func ScopeRateLimited(snap *snapshot.Compiled, k *snapshot.APIKey) bool {
	if snap == nil || k == nil {
		return false
	}
	refs, n := keyScopes(k)
	for _, sc := range refs[:n-1] {
		if q, ok := snap.Quota(sc.Scope, sc.ID); ok && (q.RPMLimit > 0 || q.TPMLimit > 0) {
			return true
		}
	}
	return false
}

func scopeRefs(scopes []ScopeQuota) []ScopeRef {
	refs := make([]ScopeRef, len(scopes))
	for i, s := range scopes {
		refs[i] = ScopeRef{Scope: s.Scope, ID: s.ID, Period: s.Period}
	}
	return refs
}

// markerTTL is the lifetime of a held marker. The marker is deleted when its request settles, so it only
// outlives that for a request lost with its data plane; it must outlast any settlement delay (a
// control-plane outage), because a hold whose marker expired is no longer refunded. admit.lua writes it
// as a literal (604800 s; TestAdmitKeyTTLs).
const markerTTL = 7 * 24 * time.Hour

// HoldMode is how a refund treats a hold (refund.lua, the forwarder's settle.lua): 0 unmarked
// (unconditional), 1 marked (only while its marker is held), 2 marked with expiring members (and, per
// scope, only while its member is in the scope's qe: set).
func HoldMode(h Hold) int {
	switch {
	case h.RequestID == "":
		return 0
	case h.Member() != "":
		return 2
	}
	return 1
}

// failed applies the failure policy to a Redis failure.
func (a *Admitter) failed(err error) error {
	if a.policy == FailClosed {
		return fmt.Errorf("%w: %w", ErrFailedClosed, err)
	}
	return err
}

// abandon keeps a hold of unknown outcome for release (bounded: beyond maxAbandoned the pending TTL is
// the only remedy) and starts the releaser if it is not running.
func (a *Admitter) abandon(h Hold) {
	a.mu.Lock()
	if len(a.abandoned) < maxAbandoned {
		a.abandoned = append(a.abandoned, abandoned{hold: h})
	}
	start := !a.releasing
	a.releasing = true
	a.mu.Unlock()
	if start {
		go a.release()
	}
}

// Abandoned is the number of reservations of unknown outcome not released yet.
func (a *Admitter) Abandoned() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.abandoned)
}

// release releases the reservations of unknown outcome, oldest first, trying again every
// unavailablePause while Redis fails; it ends when none is left. Each release is a marked Refund: it
// removes the hold only if the call did reserve it, and leaves a tombstone so a copy of the call that
// reaches Redis later reserves nothing.
func (a *Admitter) release() {
	for {
		a.mu.Lock()
		if len(a.abandoned) == 0 {
			a.releasing = false
			a.mu.Unlock()
			return
		}
		x := a.abandoned[0]
		a.mu.Unlock()
		if err := a.Refund(context.Background(), x.hold); err != nil {
			time.Sleep(unavailablePause)
			continue
		}
		a.mu.Lock()
		a.abandoned = a.abandoned[1:]
		a.mu.Unlock()
	}
}

// Refund releases a hold immediately (a request that never reached the upstream and will not be
// settled, or a reservation of unknown outcome). It decrements exactly the reserved amount on exactly the
// reserved scopes, never below zero. A marked hold (RequestID set) is removed at most once however often
// it is refunded, and a late copy of its admission call reserves nothing afterwards; an unmarked hold is
// refunded unconditionally (refunding it twice is the caller's mistake). Settled requests are refunded
// by the settlement forwarder instead. The call is bounded by ctx and Options.Timeout.
func (a *Admitter) Refund(ctx context.Context, h Hold) error {
	if h.Micros <= 0 || len(h.Scopes) == 0 {
		return nil
	}
	k := Keys{Prefix: a.prefix, Tag: h.Tag}
	keys := make([]string, 0, 1+2*len(h.Scopes))
	keys = append(keys, k.Hold(h.RequestID))
	for _, s := range h.Scopes {
		keys = append(keys, k.PendingIn(s.Scope, s.ID, s.Period))
	}
	if h.Member() != "" {
		for _, s := range h.Scopes {
			keys = append(keys, k.Holds(s.Scope, s.ID, s.Period))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	if err := refundScript.Run(ctx, a.rdb, keys, h.Micros, HoldMode(h), int64(a.ttl/time.Second), h.Member()).Err(); err != nil {
		return fmt.Errorf("admission: refund: %w", err)
	}
	return nil
}

//go:embed refund.lua
var refundLua string

var refundScript = redis.NewScript(refundLua)

// EncodeHold renders a hold as a compact, versioned text form for the settlement outbox:
// "v1;<micros>;<key>;<window>;<tokens>;<scope>:<id>,…" for an unmarked hold without an admission time,
// the same with version "v2" and a seventh field, the request id of its marker, for a marked one; and
// "v3;<micros>;<key>;<window>;<tokens>;<scope>:<id>[:<period>],…;<request id or empty>;<admitted unix
// ms>;<expiring 0|1>;<scope>:<id>,…" (the last field: the scope token windows of RateScopes) for every
// hold with an admission time (docs/budgets.md).
func EncodeHold(h Hold) string {
	var b strings.Builder
	v3 := !h.At.IsZero()
	switch {
	case v3:
		b.WriteString("v3;")
	case h.RequestID != "":
		b.WriteString("v2;")
	default:
		b.WriteString("v1;")
	}
	b.WriteString(strconv.FormatInt(h.Micros, 10))
	b.WriteByte(';')
	b.WriteString(strconv.FormatInt(h.KeyID, 10))
	b.WriteByte(';')
	b.WriteString(strconv.FormatInt(h.Window, 10))
	b.WriteByte(';')
	b.WriteString(strconv.FormatInt(h.Tokens, 10))
	b.WriteByte(';')
	writeRefs(&b, h.Scopes, v3)
	if v3 {
		b.WriteByte(';')
		b.WriteString(h.RequestID)
		b.WriteByte(';')
		b.WriteString(strconv.FormatInt(h.At.UnixMilli(), 10))
		b.WriteByte(';')
		if h.Expiring {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
		b.WriteByte(';')
		writeRefs(&b, h.RateScopes, false)
	} else if h.RequestID != "" {
		b.WriteByte(';')
		b.WriteString(h.RequestID)
	}
	return b.String()
}

func writeRefs(b *strings.Builder, refs []ScopeRef, withPeriod bool) {
	for i, s := range refs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(s.Scope))
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(s.ID, 10))
		if withPeriod && s.Period != "" {
			b.WriteByte(':')
			b.WriteString(s.Period)
		}
	}
}

// maxHoldScopes bounds the scopes a decoded hold may name (a request has at most org, team, user and key).
const maxHoldScopes = 4

// maxRequestID bounds a marker's request id (the data plane's are "req_" and 32 hex digits).
const maxRequestID = 64

// ValidRequestID reports whether id can name a hold marker: 1 to 64 ASCII letters, digits, '_' or '-'.
func ValidRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// DecodeHold parses EncodeHold's form strictly.
func DecodeHold(s string) (Hold, error) {
	parts := strings.Split(s, ";")
	switch {
	case len(parts) == 6 && parts[0] == "v1":
	case len(parts) == 7 && parts[0] == "v2":
	case len(parts) == 10 && parts[0] == "v3":
	default:
		return Hold{}, fmt.Errorf("decode hold %.40q: want v1 with 6 fields, v2 with 7 or v3 with 10", s)
	}
	var h Hold
	var err error
	for i, dst := range []*int64{&h.Micros, &h.KeyID, &h.Window, &h.Tokens} {
		if *dst, err = strconv.ParseInt(parts[i+1], 10, 64); err != nil {
			return Hold{}, fmt.Errorf("decode hold field %d: %w", i+1, err)
		}
	}
	if h.Micros < 0 || h.Tokens < 0 {
		return Hold{}, errors.New("decode hold: negative amount")
	}
	v3 := parts[0] == "v3"
	if len(parts) >= 7 && (parts[6] != "" || !v3) {
		if !ValidRequestID(parts[6]) {
			return Hold{}, fmt.Errorf("decode hold: bad request id %.20q", parts[6])
		}
		if h.Micros == 0 {
			return Hold{}, errors.New("decode hold: marker without an amount")
		}
		h.RequestID = parts[6]
	}
	if v3 {
		ms, err := strconv.ParseInt(parts[7], 10, 64)
		if err != nil || ms <= 0 {
			return Hold{}, fmt.Errorf("decode hold: bad admission time %.20q", parts[7])
		}
		h.At = time.UnixMilli(ms)
		switch parts[8] {
		case "0":
		case "1":
			if h.RequestID == "" {
				return Hold{}, errors.New("decode hold: expiring hold without a request id")
			}
			h.Expiring = true
		default:
			return Hold{}, fmt.Errorf("decode hold: bad expiring flag %.5q", parts[8])
		}
		if h.RateScopes, err = decodeRefs(parts[9], false); err != nil {
			return Hold{}, fmt.Errorf("decode hold rate scopes: %w", err)
		}
	}
	if h.Scopes, err = decodeRefs(parts[5], v3); err != nil {
		return Hold{}, fmt.Errorf("decode hold: %w", err)
	}
	if len(h.Scopes) == 0 && h.Micros != 0 {
		return Hold{}, errors.New("decode hold: amount without scopes")
	}
	return h, nil
}

// decodeRefs parses "<scope>:<id>[:<period>],…" (periods only when withPeriod).
func decodeRefs(text string, withPeriod bool) ([]ScopeRef, error) {
	if text == "" {
		return nil, nil
	}
	refs := strings.Split(text, ",")
	if len(refs) > maxHoldScopes {
		return nil, fmt.Errorf("%d scopes, at most %d", len(refs), maxHoldScopes)
	}
	out := make([]ScopeRef, 0, len(refs))
	for _, r := range refs {
		f := strings.Split(r, ":")
		if len(f) != 2 && !(withPeriod && len(f) == 3) {
			return nil, fmt.Errorf("bad scope %.30q", r)
		}
		sc := vocab.Scope(f[0])
		if sc != vocab.ScopeOrg && sc != vocab.ScopeTeam && sc != vocab.ScopeUser && sc != vocab.ScopeKey {
			return nil, fmt.Errorf("bad scope %.30q", r)
		}
		id, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("bad scope id %.30q", r)
		}
		ref := ScopeRef{Scope: sc, ID: id}
		if len(f) == 3 {
			if f[2] == "" || !period.ValidID(f[2]) {
				return nil, fmt.Errorf("bad period %.30q", r)
			}
			ref.Period = f[2]
		}
		out = append(out, ref)
	}
	return out, nil
}
