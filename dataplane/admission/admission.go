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
// where used is max(the qu: mirror, the snapshot's cost_used) and pending is the sum of estimates still
// held. Consequently the settled total of a scope exceeds its limit by at most the sum, over the requests
// in flight when the limit is crossed, of max(0, actual cost − estimate): see Bound.
package admission

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/shared/vocab"
)

// Defaults of Options.
const (
	DefaultPendingTTL = 15 * time.Minute // spec "Pending quota counter TTL"
	DefaultMirrorTTL  = time.Hour
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
	// mirror is absent, and a floor under it.
	SnapshotUsedMicros int64
}

// Request is what Admit checks.
type Request struct {
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
}

// Options tune an Admitter.
type Options struct {
	// Prefix namespaces every key (config.RedisKeyPrefix).
	Prefix string
	// PendingTTL is the lifetime of a pending counter, refreshed at every reservation (default 15 min).
	PendingTTL time.Duration
	// Now is the clock of the rate windows (default time.Now).
	Now func() time.Time
}

// Admitter runs admission against Redis. It is safe for concurrent use.
type Admitter struct {
	rdb    redis.Scripter
	keys   Keys
	ttl    time.Duration
	now    func() time.Time
	script *redis.Script
	// downUntil (unix nanoseconds, wall clock) ends the pause after a failed Redis call.
	downUntil atomic.Int64
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
	return &Admitter{rdb: rdb, keys: Keys{Prefix: opts.Prefix}, ttl: opts.PendingTTL, now: opts.Now, script: admitScript}
}

// Keys is the Redis key layout shared by admission and the settlement forwarder.
type Keys struct{ Prefix string }

// Pending is the pending-estimate counter of a scope: qp:{scope}:{id}, integer micro-dollars.
func (k Keys) Pending(s vocab.Scope, id int64) string {
	return k.Prefix + "qp:" + string(s) + ":" + strconv.FormatInt(id, 10)
}

// Used is the mirror of a scope's cost_used: qu:{scope}:{id}, integer micro-dollars.
func (k Keys) Used(s vocab.Scope, id int64) string {
	return k.Prefix + "qu:" + string(s) + ":" + strconv.FormatInt(id, 10)
}

// RPM is the request count of a key in one minute window.
func (k Keys) RPM(keyID, window int64) string {
	return k.Prefix + "rl:" + strconv.FormatInt(keyID, 10) + ":" + strconv.FormatInt(window, 10) + ":r"
}

// TPM is the token count of a key in one minute window.
func (k Keys) TPM(keyID, window int64) string {
	return k.Prefix + "rl:" + strconv.FormatInt(keyID, 10) + ":" + strconv.FormatInt(window, 10) + ":t"
}

// Admit checks the key's rate limits and every scope's quota in one Redis round trip and, only when
// everything passes, reserves EstimateMicros on every scope and counts the request. It returns a
// *RateLimitError, an error matching ErrQuotaExceeded (a *QuotaError), or a Redis error (wrapped); on
// any error nothing is reserved. A zero estimate reserves nothing (the quota check still refuses a scope
// that is already over its limit).
func (a *Admitter) Admit(ctx context.Context, req Request) (Hold, error) {
	now := a.now()
	window := now.Unix() / 60
	est := max(req.EstimateMicros, 0)
	tokens := max(req.EstimateTokens, 0)
	keys := make([]string, 0, 2+2*len(req.Scopes))
	keys = append(keys, a.keys.RPM(req.KeyID, window), a.keys.TPM(req.KeyID, window))
	args := make([]any, 0, 6+2*len(req.Scopes))
	args = append(args, max(req.RPMLimit, 0), max(req.TPMLimit, 0), tokens, est,
		int64(a.ttl/time.Second), int64(rateWindowTTL/time.Second))
	for _, s := range req.Scopes {
		keys = append(keys, a.keys.Pending(s.Scope, s.ID), a.keys.Used(s.Scope, s.ID))
		args = append(args, s.LimitMicros, max(s.SnapshotUsedMicros, 0))
	}
	if time.Now().UnixNano() < a.downUntil.Load() {
		return Hold{}, ErrUnavailable
	}
	res, err := a.script.Run(ctx, a.rdb, keys, args...).Int64Slice()
	if err != nil {
		if ctx.Err() == nil { // a request that went away says nothing about Redis
			a.downUntil.Store(time.Now().Add(unavailablePause).UnixNano())
		}
		return Hold{}, fmt.Errorf("admission: redis: %w", err)
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
		h.Scopes = make([]ScopeRef, len(req.Scopes))
		for i, s := range req.Scopes {
			h.Scopes[i] = ScopeRef{Scope: s.Scope, ID: s.ID}
		}
	}
	return h, nil
}

// Refund releases a hold immediately (a request that never reached the upstream and will not be
// settled). It decrements exactly the reserved amount on exactly the reserved scopes, never below zero.
// Settled requests are refunded by the settlement forwarder instead; refunding one hold twice is the
// caller's mistake.
func (a *Admitter) Refund(ctx context.Context, h Hold) error {
	if h.Micros <= 0 || len(h.Scopes) == 0 {
		return nil
	}
	keys := make([]string, len(h.Scopes))
	for i, s := range h.Scopes {
		keys[i] = a.keys.Pending(s.Scope, s.ID)
	}
	if err := refundScript.Run(ctx, a.rdb, keys, h.Micros).Err(); err != nil {
		return fmt.Errorf("admission: refund: %w", err)
	}
	return nil
}

//go:embed refund.lua
var refundLua string

var refundScript = redis.NewScript(refundLua)

// EncodeHold renders a hold as a compact, versioned text form for the settlement outbox:
// "v1;<micros>;<key>;<window>;<tokens>;<scope>:<id>,…".
func EncodeHold(h Hold) string {
	var b strings.Builder
	b.WriteString("v1;")
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
	return b.String()
}

// maxHoldScopes bounds the scopes a decoded hold may name (a request has at most org, team and user).
const maxHoldScopes = 3

// DecodeHold parses EncodeHold's form strictly.
func DecodeHold(s string) (Hold, error) {
	parts := strings.Split(s, ";")
	if len(parts) != 6 || parts[0] != "v1" {
		return Hold{}, fmt.Errorf("decode hold %.40q: want v1 with 6 fields", s)
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
