package admission_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/shared/vocab"
)

// BenchmarkAdmitScriptCost measures what the admission and refund scripts cost Redis itself — the time
// of one EVALSHA as Redis's INFO commandstats counts it, every redis.call inside included — in the request
// path's shape (deploy/loadgen -admission): a key with RPM and TPM limits, one org quota with a cost_used
// mirror, a hold marker (request id) on every request, and a steady number of holds in flight on the org
// (each admission refunds, through Admitter.Refund, the hold admitted inflight calls earlier). The scripts
// of the release before (testdata/*_before.lua, driven by the same Go code) and the current ones run
// interleaved, three rounds, on the test Redis (admissiontest: its own key prefix, deleted afterwards),
// with EVALSHA "return 1" as the floor of any script call.
//
// A third pass measures a refusal: every admission refused because the org's quota is spent.
//
// Each script is measured in a pass of its own, in which it is the only EVALSHA: the other one goes as
// EVAL. Calls run in segments of 100, and a segment counts only if Redis saw exactly its EVALSHAs (another
// client's script during it drops it: dropped-segments). Metric: redis-us/call, µs of Redis time per
// call; ns/op is not reported (the client side is not the point). The benchmark also logs the commands
// one admission and its refund issue with each variant.
//
//	go test -run '^$' -bench AdmitScriptCost -benchtime 2000x ./dataplane/admission/
//
// TOLLGATE_BENCH_PASS=admit (or refund) runs only that script's passes, for instruction counts of a
// redis-server run under callgrind with --toggle-collect=evalShaCommand (docs/benchmarks.md).
func BenchmarkAdmitScriptCost(b *testing.B) {
	bb := setup(b, admission.Options{Now: time.Now})
	ctx := context.Background()
	admitSHA, refundSHA := scriptSHA(readFile(b, "admit.lua")), scriptSHA(readFile(b, "refund.lua"))
	type variant struct {
		name string
		r    *evalRouter
		a    *admission.Admitter
	}
	var variants []variant
	for _, name := range []string{"before", "after"} {
		var s redis.Scripter = bb.rdb
		if name == "before" {
			s = newBeforeScripts(b, bb.rdb)
		}
		r := &evalRouter{Scripter: s, srcs: map[string]string{admitSHA: readFile(b, "admit.lua"), refundSHA: readFile(b, "refund.lua")}}
		prefix := bb.prefix + name + ":"
		variants = append(variants, variant{name, r, admission.New(r, admission.Options{Prefix: prefix, Now: time.Now, Timeout: 30 * time.Second})})
		// The mirror of the org's cost_used, as the forwarder keeps it.
		bb.rdb.Set(ctx, admission.Keys{Prefix: prefix}.Used(vocab.ScopeOrg, 1), "123456789", time.Hour)
	}
	pass := os.Getenv("TOLLGATE_BENCH_PASS")
	for _, v := range variants {
		if pass != "" {
			break // only the named pass's EVALSHAs
		}
		s0 := commandStats(b, bb.rdb)
		h, err := v.a.Admit(ctx, benchRequest())
		must(b, err)
		s1 := commandStats(b, bb.rdb)
		must(b, v.a.Refund(ctx, h))
		s2 := commandStats(b, bb.rdb)
		b.Logf("%s: admission issues %s; refund %s", v.name, s1.sub(s0).nested(), s2.sub(s1).nested())
	}
	passes := []string{"admit", "refund", "refuse"}
	if pass != "" {
		passes = []string{pass}
	}
	floor := redis.NewScript("return 1")
	for round := 1; round <= 3; round++ {
		b.Run(fmt.Sprintf("round=%d/floor", round), func(b *testing.B) {
			must(b, floor.Run(ctx, bb.rdb, nil).Err()) // loaded
			segments(b, bb.rdb, func() { must(b, floor.Run(ctx, bb.rdb, nil).Err()) })
		})
		for _, inflight := range []int{200, 20} {
			for _, pass := range passes {
				if pass == "refuse" && inflight != 200 {
					continue // nothing in flight matters to a refusal: one shape is enough
				}
				for _, v := range variants {
					b.Run(fmt.Sprintf("round=%d/inflight=%d/%s/%s", round, inflight, pass, v.name), func(b *testing.B) {
						// The other script goes as EVAL.
						v.r.eval = admitSHA
						if pass != "refund" {
							v.r.eval = refundSHA
						}
						if pass == "refuse" {
							// Refused: the org's quota is spent (402). Nothing is reserved.
							req := benchRequest()
							req.Scopes[0].SnapshotUsedMicros = req.Scopes[0].LimitMicros
							segments(b, bb.rdb, func() {
								if _, err := v.a.Admit(ctx, req); !errors.Is(err, admission.ErrQuotaExceeded) {
									b.Fatalf("Admit on a spent quota = %v", err)
								}
							})
							return
						}
						holds := make([]admission.Hold, 0, inflight+1)
						step := func() {
							h, err := v.a.Admit(ctx, benchRequest())
							must(b, err)
							holds = append(holds, h)
							if len(holds) > inflight {
								must(b, v.a.Refund(ctx, holds[0]))
								holds = append(holds[:0], holds[1:]...)
							}
						}
						for range inflight + 10 { // warm up: scripts loaded, holds in flight
							step()
						}
						segments(b, bb.rdb, step)
						for _, h := range holds {
							must(b, v.a.Refund(ctx, h))
						}
					})
				}
			}
		}
	}
}

func must(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

// evalRouter sends the script whose hash is eval as EVAL (its source from srcs), everything else as it
// comes.
type evalRouter struct {
	redis.Scripter
	srcs map[string]string
	eval string
}

func (r *evalRouter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if sha == r.eval {
		return r.Scripter.Eval(ctx, r.srcs[sha], keys, args...)
	}
	return r.Scripter.EvalSha(ctx, sha, keys, args...)
}

// benchRequest is deploy/loadgen's admitted request: its key has RPM and TPM limits, its org a quota.
func benchRequest() admission.Request {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return admission.Request{ID: "req_" + hex.EncodeToString(id[:]), OrgID: 1, KeyID: 1, RPMLimit: 1_000_000_000,
		TPMLimit: 1_000_000_000_000, EstimateTokens: 16, EstimateMicros: 40,
		Scopes: []admission.ScopeQuota{{Scope: vocab.ScopeOrg, ID: 1, LimitMicros: 1_000_000_000_000}}}
}

const segment = 100

// segments runs step (one EVALSHA) b.N times in segments of 100 and reports Redis's own time per EVALSHA
// from INFO commandstats, counting a segment only when it saw exactly its EVALSHAs.
func segments(b *testing.B, rdb *redis.Client, step func()) {
	var calls, usec int64
	dropped := 0
	for done := 0; done < b.N; {
		k := min(segment, b.N-done)
		s0 := commandStats(b, rdb)
		for range k {
			step()
		}
		d := commandStats(b, rdb).sub(s0)
		done += k
		if d["evalsha"].calls != int64(k) {
			dropped++
			continue
		}
		calls += d["evalsha"].calls
		usec += d["evalsha"].usec
	}
	b.ReportMetric(0, "ns/op")
	if calls > 0 {
		b.ReportMetric(float64(usec)/float64(calls), "redis-us/call")
	}
	b.ReportMetric(float64(dropped), "dropped-segments")
}

type cmdStat struct{ calls, usec int64 }

type cmdStats map[string]cmdStat

func (s cmdStats) sub(t cmdStats) cmdStats {
	d := cmdStats{}
	for name, c := range s {
		if dc := (cmdStat{c.calls - t[name].calls, c.usec - t[name].usec}); dc.calls != 0 {
			d[name] = dc
		}
	}
	return d
}

// nested lists the commands a script issued: every command but the script call and INFO.
func (s cmdStats) nested() string {
	var parts []string
	n := int64(0)
	for name, c := range s {
		if name == "evalsha" || name == "eval" || name == "info" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s×%d", strings.ToUpper(name), c.calls))
		n += c.calls
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d commands (%s)", n, strings.Join(parts, " "))
}

// commandStats parses INFO commandstats: "cmdstat_<name>:calls=<n>,usec=<n>,…".
func commandStats(b *testing.B, rdb *redis.Client) cmdStats {
	text, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	out := cmdStats{}
	for _, line := range strings.Split(text, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var c cmdStat
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				c.calls = n
			case "usec":
				c.usec = n
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = c
	}
	return out
}
