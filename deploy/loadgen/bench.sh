#!/usr/bin/env bash
# Request-path benchmark (docs/benchmarks.md, "Request path"). On loopback: the mock upstream, a bare
# httputil.ReverseProxy to it (the floor), and two real data planes with authentication, admission (the key
# has RPM/TPM limits and its org a quota: one Redis Lua call per request) and settlement (one Redis XADD per
# request) on:
#   dp      — its forwarder delivers every record to a SettlementService that acknowledges it (the whole
#             settlement path: outbox read, Settle RPC, refund + ack script);
#   dp-nofw — the control plane has no SettlementService, so its forwarder backs off and records stay in
#             the outbox: the request path alone.
# Prints one JSON line per measurement (loadgen run).
#
#   deploy/loadgen/bench.sh [duration [rounds [mode]]]   # default 10s per measurement, 1 round, mode all
#
# rounds repeats the one-connection floor / dp / dp-nofw trio, interleaved, so their CPU ratios can be
# taken from adjacent measurements on a machine whose load drifts. mode "transform" measures only translated
# requests at one connection (issue 14 item 4): a ~10 KB beta messages request (system prompt, one tool, 16
# turns with a tool call and its result) sent to dp, which translates it to alpha chat for the alpha mock and
# the answer back (transform_to), against the floor proxying the same body to the mock's beta endpoint,
# and dp passing the same conversation through as alpha chat (for scale), interleaved per round.
#
# With SMALL=1 (transform mode), each round also measures the small request of the default mode as a beta
# client sends it (translated by dp, like the 10 KB body) and as alpha chat (passthrough), each against the
# floor: the request-path harness with a translated request.
#
# With PPROF_DIR=<dir> (transform mode), dp serves net/http/pprof on 127.0.0.1:18070 (TOLLGATE_PPROF_ADDR)
# and each dp measurement also writes a CPU and an allocation profile of its run into <dir>
# (<label>-<round>.cpu.pprof, .allocs.pprof; read with `go tool pprof`). Profiling costs a little CPU.
#
# With OLD_DP=<path to another dataplane binary> (transform mode), that binary also runs, as dp-old (its
# own control plane and Redis prefix, settlement on like dp), and each round measures it right after dp on
# the same bodies (old-transform, old-passthrough-10k): an A/B of two builds in one session.
#
# Mode "memory" (issue 27 item 4) measures dp's memory at 128 connections: RSS idle, the plain small request
# then the small stream at 128 connections for the duration each (loadgen's RSS peak), and RSS every 10 s for
# 60 s after the load ended (labels mem-*). With OLD_DP, dp-old is measured the same way right after dp, so
# the two builds see the same machine. With PPROF_DIR, each measured data plane serves net/http/pprof (dp on
# 127.0.0.1:18070, dp-old on :18071) and <dir> gets <label>-peak.heap.pprof (taken 2 s before the stream
# load ends) and <label>-after60s.heap.pprof (after a forced collection: what is live once the load ended),
# each with its runtime.MemStats taken before it (<label>-*.memstats.txt); mem-*-after-gc is RSS 10 s after
# that collection. The heap profile at the peak is the live heap of the last collection before it.
#
# With NOADMIT=1 (transform mode), one more data plane runs, dp-noadmit: its key has no rate limits and its
# org no quota, so it makes no admission round trip to Redis (settlement on, as dp); each round measures it
# after dp on the same bodies (noadmit-transform, noadmit-passthrough-10k): what admission's round trip
# costs at one connection.
#
# Needs Redis on 127.0.0.1:6379 (keys under unique prefixes, deleted at the end). Only the processes this
# script starts are stopped, by pid.
set -euo pipefail
DUR=${1:-10s}
ROUNDS=${2:-1}
MODE=${3:-all}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(mktemp -d)
PREFIX="bench:$RANDOM$RANDOM:"
cd "$ROOT"
go build -o "$BIN/" ./deploy/loadgen ./deploy/mockupstream/cmd/mockupstream ./dataplane/cmd/dataplane

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for p in "${PREFIX}a:" "${PREFIX}b:" "${PREFIX}c:" "${PREFIX}d:"; do
    redis-cli -h 127.0.0.1 --scan --pattern "${p}*" | xargs -r redis-cli -h 127.0.0.1 del >/dev/null
  done
  rm -rf "$BIN"
}
trap cleanup EXIT

start_dp() { # name http-port cp-port prefix [pprof-addr [binary]]
  TOLLGATE_PPROF_ADDR=${5:-} TOLLGATE_DP_TOKEN=bench TOLLGATE_CP_ENDPOINTS=127.0.0.1:$3 TOLLGATE_DP_HTTP_ADDR=127.0.0.1:$2 \
    TOLLGATE_NODE_ID=$1 TOLLGATE_REDIS_KEY_PREFIX="$4" TOLLGATE_LOG_LEVEL=error "${6:-$BIN/dataplane}" serve 2>/dev/null &
  PIDS+=("$!")
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$2/readyz" >/dev/null && break; sleep 0.1; done
}

"$BIN/mockupstream" -addr 127.0.0.1:19999 2>/dev/null & MOCK=$!; PIDS+=("$MOCK")
"$BIN/loadgen" floor -listen 127.0.0.1:18090 -target http://127.0.0.1:19999 2>/dev/null & FLOOR=$!; PIDS+=("$FLOOR")
"$BIN/loadgen" snapshot -listen 127.0.0.1:19090 -upstream http://127.0.0.1:19999 -key tg-bench -admission 2>/dev/null &
PIDS+=("$!")
"$BIN/loadgen" snapshot -listen 127.0.0.1:19091 -upstream http://127.0.0.1:19999 -key tg-bench -admission -settlement=false 2>/dev/null &
PIDS+=("$!")
sleep 0.5
PPROF=${PPROF_DIR:+127.0.0.1:18070}
start_dp bench-dp 18080 19090 "${PREFIX}a:" "$PPROF"; DP=${PIDS[-1]}
start_dp bench-dp-nofw 18081 19091 "${PREFIX}b:"; NOFW=${PIDS[-1]}
if [ -n "${OLD_DP:-}" ]; then
  "$BIN/loadgen" snapshot -listen 127.0.0.1:19092 -upstream http://127.0.0.1:19999 -key tg-bench -admission 2>/dev/null &
  PIDS+=("$!")
  sleep 0.5
  OLD_PPROF=""; [ "$MODE" = memory ] && OLD_PPROF=${PPROF_DIR:+127.0.0.1:18071}
  start_dp bench-dp-old 18082 19092 "${PREFIX}c:" "$OLD_PPROF" "$OLD_DP"; OLD=${PIDS[-1]}
fi
if [ -n "${NOADMIT:-}" ]; then
  "$BIN/loadgen" snapshot -listen 127.0.0.1:19093 -upstream http://127.0.0.1:19999 -key tg-bench 2>/dev/null &
  PIDS+=("$!")
  sleep 0.5
  start_dp bench-dp-noadmit 18083 19093 "${PREFIX}d:"; NOADM=${PIDS[-1]}
fi
sleep 1
rss() { awk "/$2/ {printf \"%.1f\", \$2/1024}" "/proc/$1/status"; }
echo "{\"label\":\"idle\",\"dp_rss_mb\":$(rss "$DP" VmRSS),\"dp_nofw_rss_mb\":$(rss "$NOFW" VmRSS),\"floor_rss_mb\":$(rss "$FLOOR" VmRSS)${OLD:+,\"dp_old_rss_mb\":$(rss "${OLD:-}" VmRSS)}}"

BODY='{"model":"chat","messages":[{"role":"user","content":"hello"}]}'
SBODY='{"model":"chat","stream":true,"messages":[{"role":"user","content":"hello"}]}'
MBODY='{"model":"m-1","messages":[{"role":"user","content":"hello"}]}'
MSBODY='{"model":"m-1","stream":true,"messages":[{"role":"user","content":"hello"}]}'
# A stream whose request asks for the final usage chunk: the upstream reports usage, nothing is counted locally.
USBODY='{"model":"chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}'
MUSBODY='{"model":"m-1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}'
AUTH='Authorization: Bearer tg-bench'
URL=/v1/chat/completions
LG="$BIN/loadgen"

if [ "$MODE" = memory ]; then
  heap() { # pprof-addr file-prefix [gc]: the heap profile (after a forced collection with gc=1) and the
    # runtime's memory statistics (taken first: the collection changes them)
    [ -n "$1" ] || return 0
    mkdir -p "$PPROF_DIR"
    curl -sf "http://$1/debug/pprof/heap?debug=1" | sed -n '/^# runtime.MemStats/,$p' >"$PPROF_DIR/$2.memstats.txt"
    curl -sf -o "$PPROF_DIR/$2.heap.pprof" "http://$1/debug/pprof/heap?gc=${3:-0}"
  }
  memory() { # label pid port pprof-addr
    local s=${DUR%s}
    "$LG" run -label "mem-$1-128" -conns 128 -duration "$DUR" -url "http://127.0.0.1:$3$URL" -body "$BODY" -H "$AUTH" -pid "$2"
    ( sleep $((${s%.*} > 3 ? ${s%.*} - 2 : 1)); heap "$4" "$1-peak" ) &
    local pprof=$!
    "$LG" run -label "mem-$1-stream-128" -stream -conns 128 -duration "$DUR" -url "http://127.0.0.1:$3$URL" -body "$SBODY" -H "$AUTH" -pid "$2"
    wait "$pprof" || true
    echo "{\"label\":\"mem-$1-end\",\"rss_mb\":$(rss "$2" VmRSS),\"peak_rss_mb\":$(rss "$2" VmHWM)}"
    for t in 10 20 30 40 50 60; do
      sleep 10
      echo "{\"label\":\"mem-$1-after\",\"seconds\":$t,\"rss_mb\":$(rss "$2" VmRSS)}"
    done
    [ -n "$4" ] || return 0
    heap "$4" "$1-after60s" 1
    sleep 10
    echo "{\"label\":\"mem-$1-after-gc\",\"seconds\":70,\"rss_mb\":$(rss "$2" VmRSS)}"
  }
  memory dp "$DP" 18080 "$PPROF"
  [ -z "${OLD:-}" ] || memory dp-old "$OLD" 18082 "$OLD_PPROF"
  exit 0
fi

if [ "$MODE" = transform ]; then
  # ~10 KB conversations: beta messages (translated by dp) and the same turns as alpha chat (passthrough)
  P="The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. "
  SCHEMA='{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}'
  BM="" AM='{"role":"system","content":"You are terse."}'
  for i in $(seq 0 15); do
    BM="$BM${BM:+,}{\"role\":\"user\",\"content\":\"$i $P\"},{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"$P\"},{\"type\":\"tool_use\",\"id\":\"toolu_$i\",\"name\":\"get_weather\",\"input\":{\"city\":\"Oslo\",\"days\":3}}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_$i\",\"content\":\"{\\\"temp_c\\\":4}\"}]}"
    AM="$AM,{\"role\":\"user\",\"content\":\"$i $P\"},{\"role\":\"assistant\",\"content\":\"$P\",\"tool_calls\":[{\"id\":\"call_$i\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\",\\\"days\\\":3}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_$i\",\"content\":\"{\\\"temp_c\\\":4}\"}"
  done
  TBODY="{\"model\":\"chat\",\"max_tokens\":512,\"system\":\"You are terse.\",\"messages\":[$BM],\"tools\":[{\"name\":\"get_weather\",\"input_schema\":$SCHEMA}]}"
  FTBODY="${TBODY/\"model\":\"chat\"/\"model\":\"b-1\"}"
  PBODY="{\"model\":\"chat\",\"max_completion_tokens\":512,\"messages\":[$AM],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":$SCHEMA}}]}"
  echo "{\"label\":\"bodies\",\"beta_bytes\":${#TBODY},\"alpha_bytes\":${#PBODY}}"
  profile() { # label round: CPU and allocation profiles of dp over the next measurement (PPROF_DIR)
    [ -n "$PPROF" ] || return 0
    local s=${DUR%s}; s=$((${s%.*} > 2 ? ${s%.*} - 1 : 1))
    mkdir -p "$PPROF_DIR"
    curl -sf -o "$PPROF_DIR/$1-$2.cpu.pprof" "http://$PPROF/debug/pprof/profile?seconds=$s" & CURLS=("$!")
    curl -sf -o "$PPROF_DIR/$1-$2.allocs.pprof" "http://$PPROF/debug/pprof/allocs?seconds=$s" & CURLS+=("$!")
  }
  CURLS=()
  wait_profiles() { for p in "${CURLS[@]}"; do wait "$p" || true; done; CURLS=(); }
  # The request-path benchmark's own small request, as a beta client sends it (translated by dp like TBODY),
  # and as alpha chat (passthrough): the issue 6 harness with a translated request.
  SBETA='{"model":"chat","max_tokens":512,"messages":[{"role":"user","content":"hello"}]}'
  FSBETA="${SBETA/\"model\":\"chat\"/\"model\":\"b-1\"}"
  for r in $(seq "$ROUNDS"); do
    if [ -n "${SMALL:-}" ]; then
      "$LG" run -label floor-beta-small -duration "$DUR" -url "http://127.0.0.1:18090/v1/messages" -body "$FSBETA" -H "$AUTH" -H "anthropic-version: 2023-06-01" -pid "$FLOOR"
      "$LG" run -label dp-transform-small -duration "$DUR" -url "http://127.0.0.1:18080/v1/messages" -body "$SBETA" -H "$AUTH" -H "anthropic-version: 2023-06-01" -pid "$DP"
      "$LG" run -label floor-small -duration "$DUR" -url "http://127.0.0.1:18090$URL" -body "$MBODY" -H "$AUTH" -pid "$FLOOR"
      "$LG" run -label dp-passthrough-small -duration "$DUR" -url "http://127.0.0.1:18080$URL" -body "$BODY" -H "$AUTH" -pid "$DP"
    fi
    "$LG" run -label floor-beta -duration "$DUR" -url "http://127.0.0.1:18090/v1/messages" -body "$FTBODY" -H "$AUTH" -H "anthropic-version: 2023-06-01" -pid "$FLOOR"
    profile dp-transform "$r"
    "$LG" run -label dp-transform -duration "$DUR" -url "http://127.0.0.1:18080/v1/messages" -body "$TBODY" -H "$AUTH" -H "anthropic-version: 2023-06-01" -pid "$DP"
    wait_profiles
    profile dp-passthrough-10k "$r"
    "$LG" run -label dp-passthrough-10k -duration "$DUR" -url "http://127.0.0.1:18080$URL" -body "$PBODY" -H "$AUTH" -pid "$DP"
    wait_profiles
    if [ -n "${OLD:-}" ]; then
      "$LG" run -label old-transform -duration "$DUR" -url "http://127.0.0.1:18082/v1/messages" -body "$TBODY" -H "$AUTH" -H "anthropic-version: 2023-06-01" -pid "$OLD"
      "$LG" run -label old-passthrough-10k -duration "$DUR" -url "http://127.0.0.1:18082$URL" -body "$PBODY" -H "$AUTH" -pid "$OLD"
    fi
    if [ -n "${NOADM:-}" ]; then
      "$LG" run -label noadmit-transform -duration "$DUR" -url "http://127.0.0.1:18083/v1/messages" -body "$TBODY" -H "$AUTH" -H "anthropic-version: 2023-06-01" -pid "$NOADM"
      "$LG" run -label noadmit-passthrough-10k -duration "$DUR" -url "http://127.0.0.1:18083$URL" -body "$PBODY" -H "$AUTH" -pid "$NOADM"
    fi
  done
  exit 0
fi

"$LG" run -label direct -duration "$DUR" -url "http://127.0.0.1:19999$URL" -body "$MBODY" -H "$AUTH"
for _ in $(seq "$ROUNDS"); do # interleaved, so a load change on a shared machine hits all three alike
  "$LG" run -label floor -duration "$DUR" -url "http://127.0.0.1:18090$URL" -body "$MBODY" -H "$AUTH" -pid "$FLOOR"
  "$LG" run -label dp -duration "$DUR" -url "http://127.0.0.1:18080$URL" -body "$BODY" -H "$AUTH" -pid "$DP"
  "$LG" run -label dp-nofw -duration "$DUR" -url "http://127.0.0.1:18081$URL" -body "$BODY" -H "$AUTH" -pid "$NOFW"
done
"$LG" run -label direct-stream -stream -duration "$DUR" -url "http://127.0.0.1:19999$URL" -body "$MSBODY" -H "$AUTH"
"$LG" run -label floor-stream -stream -duration "$DUR" -url "http://127.0.0.1:18090$URL" -body "$MSBODY" -H "$AUTH" -pid "$FLOOR"
"$LG" run -label dp-stream -stream -duration "$DUR" -url "http://127.0.0.1:18080$URL" -body "$SBODY" -H "$AUTH" -pid "$DP"
"$LG" run -label dp-nofw-stream -stream -duration "$DUR" -url "http://127.0.0.1:18081$URL" -body "$SBODY" -H "$AUTH" -pid "$NOFW"
"$LG" run -label floor-stream-usage -stream -duration "$DUR" -url "http://127.0.0.1:18090$URL" -body "$MUSBODY" -H "$AUTH" -pid "$FLOOR"
"$LG" run -label dp-stream-usage -stream -duration "$DUR" -url "http://127.0.0.1:18080$URL" -body "$USBODY" -H "$AUTH" -pid "$DP"
for c in 32 128; do
  "$LG" run -label floor -conns $c -duration "$DUR" -url "http://127.0.0.1:18090$URL" -body "$MBODY" -H "$AUTH" -pid "$FLOOR" -pid "$MOCK"
  "$LG" run -label dp -conns $c -duration "$DUR" -url "http://127.0.0.1:18080$URL" -body "$BODY" -H "$AUTH" -pid "$DP" -pid "$MOCK"
  "$LG" run -label dp-nofw -conns $c -duration "$DUR" -url "http://127.0.0.1:18081$URL" -body "$BODY" -H "$AUTH" -pid "$NOFW" -pid "$MOCK"
  redis-cli -h 127.0.0.1 del "${PREFIX}b:settle:outbox" >/dev/null # dp-nofw's undelivered records
done
sleep 2
echo "{\"label\":\"end\",\"dp_rss_mb\":$(rss "$DP" VmRSS),\"dp_peak_rss_mb\":$(rss "$DP" VmHWM),\"dp_nofw_peak_rss_mb\":$(rss "$NOFW" VmHWM),\"floor_peak_rss_mb\":$(rss "$FLOOR" VmHWM),\"dp_outbox_len\":$(redis-cli -h 127.0.0.1 xlen "${PREFIX}a:settle:outbox")}"
