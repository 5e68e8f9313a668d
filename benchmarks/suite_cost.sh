#!/usr/bin/env bash
# Wall time and peak memory of the property suite under a Hypothesis profile (default: ci, then stress).
#   benchmarks/suite_cost.sh [PROFILE...]
# Peak memory is the largest resident set of any one process (GNU time's "Maximum resident set size";
# with -n 2 that is the controller or one worker, not their sum).
set -u
cd "$(dirname "$0")/.."
profiles=("$@")
[ ${#profiles[@]} -eq 0 ] && profiles=(ci stress)
printf '| profile | wall time | peak RSS (MB) | result |\n|---|---|---|---|\n'
for p in "${profiles[@]}"; do
  log=$(mktemp)
  /usr/bin/time -v .venv/bin/python -m pytest -q -n 2 --hypothesis-profile="$p" >"$log.out" 2>"$log"
  wall=$(grep 'Elapsed (wall clock)' "$log" | awk '{print $NF}')
  rss=$(grep 'Maximum resident set size' "$log" | awk '{printf "%.0f", $NF/1024}')
  res=$(grep -E '[0-9]+ (passed|failed)' "$log.out" | tail -1)
  printf '| %s | %s | %s | %s |\n' "$p" "$wall" "$rss" "$res"
  rm -f "$log" "$log.out"
done
