#!/usr/bin/env bash
# Lines of the data plane's dialect wing (docs/benchmarks.md, "Dialect wing"): the non-test, non-generated Go
# files of the paths below that exist, so one command measures the wing before and after it is reorganised.
# A directory counts every .go file under it (subpackages included, testdata excluded); a file counts itself;
# shared/usage counts all but usage.go (the Usage type, which stays shared). Physical lines, as `wc -l`.
# Prints one line per existing path and the total; extra paths may be given as arguments.
#
#   deploy/loadgen/winglines.sh [extra path ...]
set -euo pipefail
cd "$(dirname "$0")/../.."

PATHS=(
  dataplane/jsonkit
  dataplane/canon
  dataplane/dialect
  dataplane/translate
  shared/vocab/jsonscan.go
  shared/vocab/validate.go
  shared/vocab/request.go
  shared/usage
  dataplane/httperr
  dataplane/proxy/localusage.go
  dataplane/tokencount
  "$@"
)

# wing_files path: the counted files of one path, one per line.
wing_files() {
  local p=$1
  if [ -d "$p" ]; then
    find "$p" -type d -name testdata -prune -o -type f -name '*.go' ! -name '*_test.go' -print
  elif [ -f "$p" ]; then
    echo "$p"
  fi | while read -r f; do
    [ "$f" = shared/usage/usage.go ] && continue
    # Generated files carry the standard marker (https://go.dev/s/generatedcode) before the package clause.
    sed -n '/^package /q;p' "$f" | grep -Eq '^// Code generated .* DO NOT EDIT\.$' && continue
    echo "$f"
  done | sort
}

total=0
for p in "${PATHS[@]}"; do
  [ -e "$p" ] || continue
  mapfile -t files < <(wing_files "$p")
  n=0
  [ "${#files[@]}" -gt 0 ] && n=$(cat "${files[@]}" | wc -l)
  printf '%7d  %s (%d files)\n' "$n" "$p" "${#files[@]}"
  total=$((total + n))
done
printf '%7d  total\n' "$total"
