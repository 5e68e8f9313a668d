#!/usr/bin/env bash
# N stress runs (fresh random seeds) of the modules whose verdicts are asymptotic: Theorem 1, the automaton,
# Section 5 and the continuation's validity (issue 37's measurement).  One row per run: seed, wall time,
# pytest's result, examples judged of those generated and undecided verdicts (from the run's report,
# benchmarks/margins.py --properties), and the properties with an undecided verdict.
#   benchmarks/stress_theorems.sh [N] [extra pytest args...]
# FILES="..." replaces the test files (e.g. the Theorem 1 modules alone when only their decisions changed).
set -u
cd "$(dirname "$0")/.."
n=${1:-10}; shift || true
files=${FILES:-"properties/li2024/test_theorem1.py properties/li2024/test_automaton.py properties/li2024/test_section5.py properties/li2024/test_continuation.py"}
printf '| run | commit | seed | wall time | result | judged / generated | undecided | undecided in |\n|---|---|---|---|---|---|---|---|\n'
for i in $(seq 1 "$n"); do
  seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
  log=$(mktemp)
  start=$(date +%s)
  .venv/bin/python -m pytest -q -p no:randomly $files --hypothesis-profile=stress --hypothesis-seed="$seed" "$@" >"$log" 2>&1
  wall=$(( $(date +%s) - start ))
  res=$(grep -E '[0-9]+ (passed|failed)' "$log" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//')
  run=$(grep -oE 'HTML report: \S+/index.html' "$log" | tail -1 | sed 's/HTML report: //; s#/index.html##')
  table=$(.venv/bin/python benchmarks/margins.py --properties "$run" 2>/dev/null)
  all=$(printf '%s\n' "$table" | grep '^| all ')
  judged=$(printf '%s' "$all" | awk -F'|' '{gsub(/ /,"",$4); print $4}')
  undec=$(printf '%s' "$all" | awk -F'|' '{gsub(/ /,"",$5); print $5}')
  where=$(printf '%s\n' "$table" | awk -F'|' 'NR>2 && $2 !~ /all/ && $5+0 > 0 {gsub(/^ +| +$/,"",$2); printf "%s (%d) ", $2, $5}')
  printf '| %s | %s | %s | %d:%02d | %s | %s | %s | %s |\n' "$i" "$(git rev-parse --short HEAD)" "$seed" \
    $((wall / 60)) $((wall % 60)) "$res" "$judged" "$undec" "${where:-–}"
  if grep -qE '[0-9]+ failed' "$log"; then cp "$log" "reports/stress-failure-$seed.log"; fi
  rm -f "$log"
done
