package settle

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/vocab"
)

//go:embed settle.lua
var settleLua string

var settleScript = redis.NewScript(settleLua)

// finish runs the settle script for answered entries, all of one shard (their holds' tag): mirror
// refresh, then ack + refund + delete. resp may be nil (entries that need only acknowledging, or that were
// dead-lettered: their holds are refunded all the same, since they will never settle).
//
// A quota's mirror lives in its organisation's current shard: the mirrors of the entries' shard are
// refreshed in the same script, the others (the answer names scopes of records of another shard only for
// records appended before a change of shards) each by a script of their own, whose failure is only
// logged (a mirror is a cache; the snapshot's cost_used is its floor).
func (f *Forwarder) finish(ctx context.Context, entries []entry, resp *settlementv1.SettleResponse) error {
	var tag string
	if len(entries) > 0 {
		tag = entries[0].hold.Tag
	}
	mirrors := f.mirrors(entries, resp)
	keys := []string{f.streams.Outbox(tag)}
	args := []any{group, int64(f.opts.MirrorTTL / time.Second)}
	own := mirrors[tag]
	delete(mirrors, tag)
	keys = append(keys, own.keys...)
	args = append(args, len(own.keys))
	args = append(args, own.vals...)
	args = append(args, len(entries))
	var ids []string
	inserted := map[string]bool{}
	for _, r := range resp.GetResults() {
		if r.GetInserted() {
			inserted[r.GetRequestId()] = true
		}
	}
	k := admission.Keys{Prefix: f.opts.Prefix, Tag: tag}
	for _, e := range entries {
		var tpmDelta int64
		if e.rec != nil {
			ids = append(ids, e.rec.GetRequestId())
			if e.hold.Tokens > 0 {
				tpmDelta = totalTokens(e.rec.GetTokens()) - e.hold.Tokens
			}
		}
		for _, s := range e.hold.Scopes {
			keys = append(keys, k.PendingIn(s.Scope, s.ID, s.Period))
		}
		mode := admission.HoldMode(e.hold)
		if mode == 2 {
			for _, s := range e.hold.Scopes {
				keys = append(keys, k.Holds(s.Scope, s.ID, s.Period))
			}
		}
		// The key's token window, then the scopes' (team, org, user TPM limits).
		keys = append(keys, k.TPM(e.hold.KeyID, e.hold.Window))
		for _, s := range e.hold.RateScopes {
			keys = append(keys, k.ScopeTPM(s.Scope, s.ID, e.hold.Window))
		}
		keys = append(keys, k.Hold(e.hold.RequestID))
		args = append(args, e.id, e.hold.Micros, len(e.hold.Scopes), 1+len(e.hold.RateScopes), tpmDelta, mode, e.hold.Member())
	}
	if err := f.runSettle(ctx, keys, args); err != nil {
		// The entries stay pending and are settled again (as duplicates) later; the refund happens then.
		return fmt.Errorf("acknowledge and refund %d entries: %w", len(entries), err)
	}
	for t, m := range mirrors {
		keys := append([]string{f.streams.Outbox(t)}, m.keys...)
		args := append([]any{group, int64(f.opts.MirrorTTL / time.Second), len(m.keys)}, m.vals...)
		if err := f.runSettle(ctx, keys, append(args, 0)); err != nil {
			f.log.Warn("refresh cost_used mirrors of another shard", "tag", t, "mirrors", len(m.keys), "err", err)
		}
	}
	if resp != nil {
		var n uint64
		for _, id := range ids {
			if inserted[id] {
				n++
			}
		}
		f.settled.Add(float64(n))
		f.duplicates.Add(float64(uint64(len(ids)) - n))
	}
	if f.opts.OnRefunded != nil && len(ids) > 0 {
		f.opts.OnRefunded(ids)
	}
	return nil
}

// runSettle runs settle.lua, trying up to five times.
func (f *Forwarder) runSettle(ctx context.Context, keys []string, args []any) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		sctx, cancel := f.redisCtx(ctx, 0)
		err = settleScript.Run(sctx, f.rdb, keys, args...).Err()
		cancel()
		if err == nil {
			return nil
		}
		if !sleep(ctx, time.Duration(attempt+1)*100*time.Millisecond) {
			break
		}
	}
	return err
}

// shardMirrors are the cost_used mirror keys of one shard with their values (settle.lua's ARGV pairs).
type shardMirrors struct {
	keys []string
	vals []any
}

// mirrors sorts the answer's cost_used values by the shard of their quota's organisation. The answer
// names the scopes of the batch's records; a scope's organisation is its record's (a scope no record
// names — not in a well-formed answer — is skipped when there are several shards).
func (f *Forwarder) mirrors(entries []entry, resp *settlementv1.SettleResponse) map[string]shardMirrors {
	out := map[string]shardMirrors{}
	quotas := resp.GetQuotas()
	if len(quotas) == 0 {
		return out
	}
	type scopeID struct {
		scope vocab.Scope
		id    int64
	}
	var orgOf map[scopeID]int64
	if f.shards.N() > 1 {
		orgOf = map[scopeID]int64{}
		for _, e := range entries {
			r := e.rec
			if r == nil {
				continue
			}
			orgOf[scopeID{vocab.ScopeOrg, r.GetOrgId()}] = r.GetOrgId()
			orgOf[scopeID{vocab.ScopeUser, r.GetUserId()}] = r.GetOrgId()
			orgOf[scopeID{vocab.ScopeKey, r.GetApiKeyId()}] = r.GetOrgId()
			if r.TeamId != nil {
				orgOf[scopeID{vocab.ScopeTeam, r.GetTeamId()}] = r.GetOrgId()
			}
		}
	}
	for _, q := range quotas {
		micros, err := costUsedMicros(q.GetCostUsed())
		if err != nil {
			f.log.Warn("unreadable cost_used in Settle answer", "scope", q.GetScope(), "id", q.GetScopeId(), "err", err)
			continue
		}
		sc := scopeOf(q.GetScope())
		tag := ""
		if orgOf != nil {
			org, ok := orgOf[scopeID{sc, q.GetScopeId()}]
			if !ok {
				f.log.Warn("Settle answer names a quota of no record in the batch; mirror not refreshed", "scope", sc, "id", q.GetScopeId())
				continue
			}
			tag = f.shards.Tag(org)
		}
		m := out[tag]
		// A periodic quota's answer names its period: the mirror is per period (docs/budgets.md).
		m.keys = append(m.keys, admission.Keys{Prefix: f.opts.Prefix, Tag: tag}.UsedIn(sc, q.GetScopeId(), q.GetPeriodId()))
		// With its adjustment epoch: settle.lua lets a newer epoch replace the mirror (a credit) and
		// ignores an older one (docs/settlement.md, "Adjustment epochs").
		m.vals = append(m.vals, max(micros, 0), max(q.GetAdjustEpoch(), 0))
		out[tag] = m
	}
	return out
}

func scopeOf(s string) vocab.Scope { return vocab.Scope(s) }

func totalTokens(t *settlementv1.TokenCounts) int64 {
	return t.GetInput() + t.GetOutput() + t.GetCacheRead() + t.GetCacheCreation_5M() + t.GetCacheCreation_30M() +
		t.GetCacheCreation_1H() + t.GetImageOutput()
}

// costUsedMicros reads a quota's cost_used from a Settle answer (Postgres numeric text, as many
// fraction digits as the sums of costs have) as integer micro-dollars with the one money parser
// (shared/pricing), rounding half up and saturating at the int64 maximum; a negative amount is refused.
func costUsedMicros(s string) (int64, error) {
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("cost_used %.40q: negative", s)
	}
	d, err := pricing.ParseStoredDecimal(s)
	if err != nil {
		return 0, fmt.Errorf("cost_used: %w", err)
	}
	m, err := pricing.ToMicros(d)
	if errors.Is(err, pricing.ErrMicrosOverflow) {
		return math.MaxInt64, nil
	}
	return m, err
}
