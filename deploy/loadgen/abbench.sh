#!/usr/bin/env bash
# Interleaved A/B of Go benchmarks between two test binaries of one package (docs/benchmarks.md, "Dialect wing"):
# on a shared machine whose load drifts, only old and new measured in turn compare. Each round runs the old binary
# then the new one, the order swapped every other round; each run is one -test.count, from the package's directory
# (benchmarks that read ../shared data find it from there). Results go to <out>/old.txt and <out>/new.txt; then
# benchstat (the golang.org/x/perf version in the module cache) compares them, every unit the benchmarks report
# (ns/op, B/op, allocs/op and their own, e.g. cpu-ns/event).
#
#   deploy/loadgen/abbench.sh <package dir> <bench regexp> <old test binary> <new test binary> [rounds [benchtime]]
#   deploy/loadgen/abbench.sh dataplane/proxy 'PassthroughStream' /work/bin/proxy-base.test /tmp/proxy-new.test 6
#
# Build a binary with `go test -c -o <file> ./<package dir>/` in each tree. OUT=<dir> keeps the results
# (default: a new temporary directory, printed).
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
PKG=$1 BENCH=$2 OLD=$(realpath "$3") NEW=$(realpath "$4") ROUNDS=${5:-6} BENCHTIME=${6:-1s}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
: >"$OUT/old.txt"
: >"$OUT/new.txt"
cd "$ROOT/$PKG"
run() { # label binary
  "$2" -test.run '^$' -test.bench "$BENCH" -test.benchtime "$BENCHTIME" -test.benchmem >>"$OUT/$1.txt"
}
for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  if [ $((r % 2)) = 1 ]; then run old "$OLD"; run new "$NEW"; else run new "$NEW"; run old "$OLD"; fi
done
echo "results in $OUT" >&2
cd "$ROOT"
go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da "$OUT/old.txt" "$OUT/new.txt"
