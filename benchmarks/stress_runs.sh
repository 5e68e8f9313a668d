#!/usr/bin/env bash
# N runs of the main job (stress profile) with fresh random seeds; one table row per run: seed, wall time,
# peak RSS of any one process, result.  A failing run keeps its log and report under reports/, a run with
# warnings its warnings summary (reports/stress-warnings-SEED.log).
#   benchmarks/stress_runs.sh [N]
set -u
cd "$(dirname "$0")/.."
n=${1:-10}
printf '| run | commit | seed | wall time | peak RSS (MB) | result |\n|---|---|---|---|---|---|\n'
for i in $(seq 1 "$n"); do
  seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
  log=$(mktemp)
  /usr/bin/time -v .venv/bin/python -m pytest -q -n 2 --hypothesis-profile=stress --hypothesis-seed="$seed" >"$log.out" 2>"$log"
  wall=$(grep 'Elapsed (wall clock)' "$log" | awk '{print $NF}')
  rss=$(grep 'Maximum resident set size' "$log" | awk '{printf "%.0f", $NF/1024}')
  res=$(grep -E '[0-9]+ (passed|failed)' "$log.out" | tail -1)
  printf '| %s | %s | %s | %s | %s | %s |\n' "$i" "$(git rev-parse --short HEAD)" "$seed" "$wall" "$rss" "$res"
  if grep -qE '[0-9]+ failed' "$log.out"; then cp "$log.out" "reports/stress-failure-$seed.log"
  elif tail -1 "$log.out" | grep -qE '[0-9]+ warnings?'; then
    sed -n '/warnings summary/,$p' "$log.out" > "reports/stress-warnings-$seed.log"  # what warned, and where
  fi
  rm -f "$log" "$log.out"
done
