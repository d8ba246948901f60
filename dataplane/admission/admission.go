// Package admission owns the data plane's pre-upstream checks in Redis: an API key's per-minute request
// and token rate limits, and quota admission — reserving the request's estimated cost as pending
// micro-dollars on every quota-bearing scope (org, team, user), all or nothing, in a single Lua round
// trip. It also owns the Redis key layout of pending holds (qp:), the cost_used mirror (qu:) and the rate
// windows, which the settlement forwarder uses to refund holds and refresh the mirror.
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
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Defaults of Options.
const (
	DefaultPendingTTL = 15 * time.Minute // spec "Pending quota counter TTL"
	DefaultMirrorTTL  = time.Hour
	// DefaultTimeout bounds one admission call (config.RedisTimeout's default).
	DefaultTimeout = time.Second
	// rateWindowTTL keeps a per-minute window key a little past its minute, so a settle-time TPM
	// correction can still find it.
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
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("rate limit %s exceeded; retry after %s", e.Limit, e.RetryAfter)
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
}

// Request is what Admit checks.
type Request struct {
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
	// Scopes are the request's quota-bearing scopes (org, team, user with a limited quota).
	Scopes []ScopeQuota
}

// ScopeRef names a scope a hold reserved on.
type ScopeRef struct {
	Scope vocab.Scope
	ID    int64
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
}

// Options tune an Admitter.
type Options struct {
	// Prefix namespaces every key (config.RedisKeyPrefix).
	Prefix string
	// PendingTTL is the lifetime of a pending counter, refreshed at every reservation (default 15 min).
	PendingTTL time.Duration
	// Now is the clock of the rate windows (default time.Now).
	Now func() time.Time
	// Timeout bounds one admission call (default DefaultTimeout); the caller's context may end it sooner.
	Timeout time.Duration
	// OnRedisFailure is what a failed or timed-out call means (default FailOpen).
	OnRedisFailure FailurePolicy
	// Snapshot, when set, returns the snapshot in force: Admit then takes each scope's
	// SnapshotUsedMicros and SnapshotEpoch from it (both from the one snapshot, so they belong
	// together, and never older than the caller's), whatever the Request carries. A scope the snapshot
	// has no quota for keeps the Request's values.
	Snapshot func() *snapshot.Compiled
}

// Admitter runs admission against Redis. It is safe for concurrent use.
type Admitter struct {
	rdb     redis.Scripter
	keys    Keys
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
	return &Admitter{rdb: rdb, keys: Keys{Prefix: opts.Prefix}, ttl: opts.PendingTTL, now: opts.Now, script: admitScript,
		timeout: opts.Timeout, policy: opts.OnRedisFailure, snap: opts.Snapshot}
}

// Policy is the Admitter's FailurePolicy.
func (a *Admitter) Policy() FailurePolicy { return a.policy }

// Keys is the Redis key layout shared by admission and the settlement forwarder.
type Keys struct{ Prefix string }

// Pending is the pending-estimate counter of a scope: qp:{scope}:{id}, integer micro-dollars.
func (k Keys) Pending(s vocab.Scope, id int64) string {
	return k.Prefix + "qp:" + string(s) + ":" + strconv.FormatInt(id, 10)
}

// Used is the mirror of a scope's cost_used: qu:{scope}:{id}, integer micro-dollars, followed by
// ':<adjustment epoch>' when the epoch is not 0 (docs/settlement.md, "Adjustment epochs").
func (k Keys) Used(s vocab.Scope, id int64) string {
	return k.Prefix + "qu:" + string(s) + ":" + strconv.FormatInt(id, 10)
}

// RPM is the request count of a key in one minute window.
func (k Keys) RPM(keyID, window int64) string {
	return k.Prefix + "rl:" + strconv.FormatInt(keyID, 10) + ":" + strconv.FormatInt(window, 10) + ":r"
}

// Hold is the marker of a request's hold: qh:{request id}, 'h' while held, 'x' once refunded or released.
func (k Keys) Hold(requestID string) string { return k.Prefix + "qh:" + requestID }

// TPM is the token count of a key in one minute window.
func (k Keys) TPM(keyID, window int64) string {
	return k.Prefix + "rl:" + strconv.FormatInt(keyID, 10) + ":" + strconv.FormatInt(window, 10) + ":t"
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
	marked := ValidRequestID(req.ID) && est > 0 && len(req.Scopes) > 0
	keys := make([]string, 0, 3+2*len(req.Scopes))
	keys = append(keys, a.keys.RPM(req.KeyID, window), a.keys.TPM(req.KeyID, window), a.keys.Hold(req.ID))
	args := make([]any, 0, 7+3*len(req.Scopes))
	args = append(args, max(req.RPMLimit, 0), max(req.TPMLimit, 0), tokens, est,
		int64(a.ttl/time.Second), int64(rateWindowTTL/time.Second), markerArg(marked))
	var snap *snapshot.Compiled
	if a.snap != nil {
		snap = a.snap()
	}
	for _, s := range req.Scopes {
		if snap != nil {
			if q, ok := snap.Quota(s.Scope, s.ID); ok {
				s.SnapshotUsedMicros, s.SnapshotEpoch = q.UsedMicros, q.Epoch
			}
		}
		keys = append(keys, a.keys.Pending(s.Scope, s.ID), a.keys.Used(s.Scope, s.ID))
		args = append(args, s.LimitMicros, max(s.SnapshotUsedMicros, 0), max(s.SnapshotEpoch, 0))
	}
	if time.Now().UnixNano() < a.downUntil.Load() {
		return Hold{}, a.failed(ErrUnavailable)
	}
	callCtx, cancel := context.WithTimeout(ctx, a.timeout)
	res, err := a.script.Run(callCtx, a.rdb, keys, args...).Int64Slice()
	cancel()
	if err != nil {
		if ctx.Err() == nil { // a request that went away says nothing about Redis
			a.downUntil.Store(time.Now().Add(unavailablePause).UnixNano())
		}
		if marked && !errors.Is(err, redisbatch.ErrNotSent) {
			// Sent, but no reply: it may still reserve when Redis answers. Release it then.
			a.abandon(Hold{Micros: est, Scopes: scopeRefs(req.Scopes), RequestID: req.ID})
		}
		if ctx.Err() != nil {
			return Hold{}, fmt.Errorf("admission: redis: %w", err)
		}
		return Hold{}, a.failed(fmt.Errorf("admission: redis: %w", err))
	}
	if len(res) != 2 {
		return Hold{}, fmt.Errorf("admission: unexpected script reply %v", res)
	}
	switch res[0] {
	case 0:
	case 1, 2:
		limit := "rpm"
		if res[0] == 2 {
			limit = "tpm"
		}
		retry := time.Unix((window+1)*60, 0).Sub(now)
		if retry < time.Second {
			retry = time.Second
		}
		return Hold{}, &RateLimitError{RetryAfter: retry, Limit: limit}
	case 4:
		return Hold{}, a.failed(errReleased)
	case 3:
		i := int(res[1]) - 1
		if i < 0 || i >= len(req.Scopes) {
			return Hold{}, ErrQuotaExceeded
		}
		return Hold{}, &QuotaError{Scope: req.Scopes[i].Scope, ID: req.Scopes[i].ID}
	default:
		return Hold{}, fmt.Errorf("admission: unexpected script reply %v", res)
	}
	h := Hold{KeyID: req.KeyID, Window: window}
	if req.TPMLimit > 0 {
		h.Tokens = tokens
	}
	if est > 0 && len(req.Scopes) > 0 {
		h.Micros = est
		h.Scopes = scopeRefs(req.Scopes)
		if marked {
			h.RequestID = req.ID
		}
	}
	return h, nil
}

func scopeRefs(scopes []ScopeQuota) []ScopeRef {
	refs := make([]ScopeRef, len(scopes))
	for i, s := range scopes {
		refs[i] = ScopeRef{Scope: s.Scope, ID: s.ID}
	}
	return refs
}

// markerTTL is the lifetime of a held marker. The marker is deleted when its request settles, so it only
// outlives that for a request lost with its data plane; it must outlast any settlement delay (a
// control-plane outage), because a hold whose marker expired is no longer refunded.
const markerTTL = 7 * 24 * time.Hour

func markerArg(marked bool) int64 {
	if marked {
		return int64(markerTTL / time.Second)
	}
	return 0
}

func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
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
	keys := make([]string, 0, 1+len(h.Scopes))
	keys = append(keys, a.keys.Hold(h.RequestID))
	for _, s := range h.Scopes {
		keys = append(keys, a.keys.Pending(s.Scope, s.ID))
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	if err := refundScript.Run(ctx, a.rdb, keys, h.Micros, boolArg(h.RequestID != ""), int64(a.ttl/time.Second)).Err(); err != nil {
		return fmt.Errorf("admission: refund: %w", err)
	}
	return nil
}

//go:embed refund.lua
var refundLua string

var refundScript = redis.NewScript(refundLua)

// EncodeHold renders a hold as a compact, versioned text form for the settlement outbox:
// "v1;<micros>;<key>;<window>;<tokens>;<scope>:<id>,…" for an unmarked hold, and the same with version
// "v2" and a seventh field, the request id of its marker, for a marked one.
func EncodeHold(h Hold) string {
	var b strings.Builder
	if h.RequestID != "" {
		b.WriteString("v2;")
	} else {
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
	for i, s := range h.Scopes {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(s.Scope))
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(s.ID, 10))
	}
	if h.RequestID != "" {
		b.WriteByte(';')
		b.WriteString(h.RequestID)
	}
	return b.String()
}

// maxHoldScopes bounds the scopes a decoded hold may name (a request has at most org, team and user).
const maxHoldScopes = 3

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
	default:
		return Hold{}, fmt.Errorf("decode hold %.40q: want v1 with 6 fields or v2 with 7", s)
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
	if len(parts) == 7 {
		if !ValidRequestID(parts[6]) {
			return Hold{}, fmt.Errorf("decode hold: bad request id %.20q", parts[6])
		}
		if h.Micros == 0 {
			return Hold{}, errors.New("decode hold: marker without an amount")
		}
		h.RequestID = parts[6]
	}
	if parts[5] == "" {
		if h.Micros != 0 {
			return Hold{}, errors.New("decode hold: amount without scopes")
		}
		return h, nil
	}
	refs := strings.Split(parts[5], ",")
	if len(refs) > maxHoldScopes {
		return Hold{}, fmt.Errorf("decode hold: %d scopes, at most %d", len(refs), maxHoldScopes)
	}
	for _, r := range refs {
		name, idText, ok := strings.Cut(r, ":")
		sc := vocab.Scope(name)
		if !ok || (sc != vocab.ScopeOrg && sc != vocab.ScopeTeam && sc != vocab.ScopeUser) {
			return Hold{}, fmt.Errorf("decode hold: bad scope %.20q", r)
		}
		id, err := strconv.ParseInt(idText, 10, 64)
		if err != nil || id <= 0 {
			return Hold{}, fmt.Errorf("decode hold: bad scope id %.20q", r)
		}
		h.Scopes = append(h.Scopes, ScopeRef{Scope: sc, ID: id})
	}
	return h, nil
}
