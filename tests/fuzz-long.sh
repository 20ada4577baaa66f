#!/usr/bin/env bash
# The parsers' long fuzzing mode: every property of tests/fuzz_parsers.rs, one at a time, for
# at least MINUTES each (default 10), with as many cases as fit (doubling until the time is
# spent). Prints each property's cases, time and verdict; exits 1 on the first finding.
#
#   bash tests/fuzz-long.sh            # 10 minutes per property
#   MINUTES=1 bash tests/fuzz-long.sh sse chunked
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${MINUTES:-10}
properties=("$@")
if [ ${#properties[@]} -eq 0 ]; then
  properties=(sse_events chunked_data chunked_garbage http1_responses importers capacity_tables scenarios catalog_files)
fi
# The test binary, copied: the sources may be rebuilt while this runs.
built=$(cargo test --test fuzz_parsers --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$built" "$work/fuzz_parsers"
log="$work/log"
for property in "${properties[@]}"; do
  cases=1000
  spent=0
  total=0
  while [ "$total" -eq 0 ] || [ "$spent" -lt $((minutes * 60)) ]; do
    start=$(date +%s)
    if ! PROPTEST_CASES=$cases "$work/fuzz_parsers" -q "$property" >"$log" 2>&1; then
      cat "$log"
      echo "$property: FINDING after $total cases"
      exit 1
    fi
    spent=$((spent + $(date +%s) - start))
    total=$((total + cases))
    cases=$((cases * 2))
  done
  echo "$property: $total cases in ${spent} s, no finding"
done
