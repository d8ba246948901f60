#!/usr/bin/env bash
# Memory-bound measurement (docs/benchmarks.md "Memory under hostile clients and huge answers"). On loopback:
# the mock upstream, a minimal control plane (loadgen snapshot: key tg-bench, route chat → m-1) and one data
# plane with default settings; then, reading the data plane's RSS from /proc:
#   unauth   — N connections without a key, each declaring a 32 MiB body, sending 4 KiB, then a byte every 3 s;
#   auth     — the same with a valid key (the body is read: it must cost what arrived, and be cut after
#              TOLLGATE_BODY_READ_TIMEOUT, default 60 s — the hold is 70 s so the cut shows);
#   stream   — one 400 MB streamed answer (100,000 SSE events of 4 KiB words, no upstream usage requested:
#              the worst case, text kept for local counting);
#   body     — one 40 MB buffered answer, usage at its end.
# Prints one JSON line per measurement.
#
#   deploy/loadgen/hostile.sh [conns]          # default 1000
#   DP_BIN=/path/to/dataplane deploy/loadgen/hostile.sh   # measure another data-plane binary (e.g. older code)
#
# Needs Redis on 127.0.0.1:6379 (keys under a unique prefix, deleted at the end). Only the processes this
# script starts are stopped, by pid.
set -euo pipefail
CONNS=${1:-1000}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(mktemp -d)
PREFIX="hostile:$RANDOM$RANDOM:"
cd "$ROOT"
go build -o "$BIN/" ./deploy/loadgen ./deploy/mockupstream/cmd/mockupstream ./dataplane/cmd/dataplane
DP_BIN=${DP_BIN:-$BIN/dataplane}

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  redis-cli -h 127.0.0.1 --scan --pattern "${PREFIX}*" | xargs -r redis-cli -h 127.0.0.1 del >/dev/null
  rm -rf "$BIN"
}
trap cleanup EXIT

"$BIN/mockupstream" -addr 127.0.0.1:29999 2>/dev/null & PIDS+=("$!")
"$BIN/loadgen" snapshot -listen 127.0.0.1:29090 -upstream http://127.0.0.1:29999 -key tg-bench 2>/dev/null & PIDS+=("$!")
sleep 0.5
TOLLGATE_DP_TOKEN=bench TOLLGATE_CP_ENDPOINTS=127.0.0.1:29090 TOLLGATE_DP_HTTP_ADDR=127.0.0.1:28080 \
  TOLLGATE_NODE_ID=hostile TOLLGATE_REDIS_KEY_PREFIX="$PREFIX" TOLLGATE_LOG_LEVEL=error "$DP_BIN" serve 2>/dev/null &
DP=$!; PIDS+=("$DP")
for _ in $(seq 50); do curl -sf http://127.0.0.1:28080/readyz >/dev/null && break; sleep 0.1; done
sleep 1
rss() { awk "/$2/ {printf \"%.1f\", \$2/1024}" "/proc/$1/status"; }
echo "{\"label\":\"idle\",\"dp_rss_mb\":$(rss "$DP" VmRSS)}"
LG="$BIN/loadgen"
"$LG" hostile -label unauth -addr 127.0.0.1:28080 -conns "$CONNS" -hold 20s -pid "$DP"
sleep 2
echo "{\"label\":\"after-unauth\",\"dp_rss_mb\":$(rss "$DP" VmRSS)}"
"$LG" hostile -label auth -addr 127.0.0.1:28080 -conns "$CONNS" -key tg-bench -hold 70s -pid "$DP"
sleep 2
echo "{\"label\":\"after-auth\",\"dp_rss_mb\":$(rss "$DP" VmRSS)}"
AUTH='Authorization: Bearer tg-bench'
URL=http://127.0.0.1:28080/v1/chat/completions
"$LG" run -label stream-400MB -stream -warmup 0s -duration 1ms -url "$URL" -H "$AUTH" \
  -body '{"model":"chat","stream":true,"messages":[{"role":"user","content":"hello"}]}' \
  -H 'x-mock-chunks: 100000' -H 'x-mock-word-bytes: 4096' -pid "$DP"
"$LG" run -label body-40MB -warmup 0s -duration 1ms -url "$URL" -H "$AUTH" \
  -H 'x-mock-chunks: 10000' -H 'x-mock-word-bytes: 4096' -pid "$DP"
sleep 2
echo "{\"label\":\"end\",\"dp_rss_mb\":$(rss "$DP" VmRSS),\"dp_peak_rss_mb\":$(rss "$DP" VmHWM)}"
