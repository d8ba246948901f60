package admission_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// beforeScripts runs an Admitter on the scripts of the release before the admission script was made
// cheaper (testdata/admit_before.lua, testdata/refund_before.lua): a Scripter that swaps the current
// admit.lua and refund.lua for them, and admit.lua's arguments for their layout (no ARGV[9]).
// The Go side — which keys and arguments a call sends — is the current code's, so the benchmark and the
// equivalence test compare the scripts alone.
type beforeScripts struct {
	redis.Scripter
	// by current script hash: the old script's source and hash, and whether the keys need converting.
	swap map[string]beforeScript
}

type beforeScript struct {
	src, sha string
	admit    bool
}

func scriptSHA(src string) string {
	h := sha1.Sum([]byte(src))
	return hex.EncodeToString(h[:])
}

func readFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newBeforeScripts(t testing.TB, rdb redis.Scripter) *beforeScripts {
	t.Helper()
	s := &beforeScripts{Scripter: rdb, swap: map[string]beforeScript{}}
	for _, f := range []struct {
		cur, old string
		admit    bool
	}{{"admit.lua", "testdata/admit_before.lua", true}, {"refund.lua", "testdata/refund_before.lua", false}} {
		old := readFile(t, f.old)
		s.swap[scriptSHA(readFile(t, f.cur))] = beforeScript{src: old, sha: scriptSHA(old), admit: f.admit}
	}
	return s
}

// oldArgs converts the arguments to the old script's: ARGV 1-4 (limiters, tokens, estimate, pending TTL),
// the window TTL and the marker's TTL (0 without a marker), now, the member, then the limits.
func oldArgs(args []any) []any {
	mark := "0"
	if args[5] != "" {
		mark = "604800"
	}
	return append(append([]any(nil), args[0], args[1], args[2], args[3], "120", mark, args[4], args[5]), args[7:]...)
}

// oldReply converts the old admission script's reply {outcome, index} to the current one's number,
// 100 × outcome + index.
func oldReply(ctx context.Context, cmd *redis.Cmd) *redis.Cmd {
	out := redis.NewCmd(ctx)
	r, err := cmd.Int64Slice()
	if err == nil && len(r) != 2 {
		err = fmt.Errorf("old admission script answered %v", r)
	}
	if err != nil {
		out.SetErr(err)
		return out
	}
	out.SetVal(r[0]*100 + r[1])
	return out
}

func (s *beforeScripts) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if o, ok := s.swap[sha]; ok {
		if o.admit {
			return oldReply(ctx, s.Scripter.EvalSha(ctx, o.sha, keys, oldArgs(args)...))
		}
		return s.Scripter.EvalSha(ctx, o.sha, keys, args...)
	}
	return s.Scripter.EvalSha(ctx, sha, keys, args...)
}

func (s *beforeScripts) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	if o, ok := s.swap[scriptSHA(src)]; ok {
		if o.admit {
			return oldReply(ctx, s.Scripter.Eval(ctx, o.src, keys, oldArgs(args)...))
		}
		return s.Scripter.Eval(ctx, o.src, keys, args...)
	}
	return s.Scripter.Eval(ctx, src, keys, args...)
}
