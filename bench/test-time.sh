#!/usr/bin/env bash
# Wall time of the README's test command (`cargo test --workspace --locked`) at an earlier
# commit and at this checkout's HEAD, on the same machine, runs alternating.
#
# Each tree is built first (`--no-run`, untimed, CARGO_INCREMENTAL=0 as in CI), so the timed
# runs measure the tests, not the compiler. Prints each run's wall seconds, then one line per
# test binary present in both trees whose time differs by more than 0.5 s (its tests and its
# own "finished in" seconds, from the last run of each), then the totals of binaries found in
# only one tree. Tests start their own loopback servers; nothing leaves 127.0.0.1.
#
# Usage: bash bench/test-time.sh BEFORE_REV [REPS]   (REPS default 2)
# The earlier tree is a git worktree in a temporary directory, removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
BEFORE=${1:?usage: bash bench/test-time.sh BEFORE_REV [REPS]}
REPS=${2:-2}
export CARGO_INCREMENTAL=0 CARGO_TERM_COLOR=never LC_ALL=C
T=$(mktemp -d)
trap 'git -C "$REPO" worktree remove --force "$T/before" 2>/dev/null || true; rm -rf "$T"' EXIT
git worktree add -q --detach "$T/before" "$BEFORE"

for tree in "$T/before" "$REPO"; do
  (cd "$tree" && cargo test -q --workspace --locked --no-run >/dev/null 2>&1)
done

# One timed run of TREE, its log kept as $T/LABEL.log.
timed() {
  local tree=$1 label=$2 start end
  start=$(date +%s.%N)
  (cd "$tree" && cargo test --workspace --locked >"$T/$label.log" 2>&1) ||
    { echo "test-time.sh: tests failed in $label; log follows" >&2; tail -40 "$T/$label.log" >&2; exit 1; }
  end=$(date +%s.%N)
  printf '%-7s %6.1f s  %s tests\n' "$label" "$(echo "$end - $start" | bc)" \
    "$(grep -o '[0-9]* passed' "$T/$label.log" | awk '{s += $1} END {print s}')"
}

for rep in $(seq 1 "$REPS"); do
  timed "$T/before" before
  timed "$REPO" after
done

# Per binary: "crate|path tests seconds", the crate taken from the unit-test binary that
# precedes a package's integration tests in cargo's output.
per_binary() {
  awk '
    /Running unittests/ { crate = $NF; sub(/^\(target\/debug\/deps\//, "", crate); sub(/-[0-9a-f]+\)$/, "", crate); key = crate "|" $3 }
    /Running tests\// { key = crate "|" $2 }
    /Doc-tests/ { key = "doc|" $2 }
    /test result: ok\./ { t = $NF; sub(/s$/, "", t); print key, $4, t }
  ' "$1" | sort
}
per_binary "$T/before.log" >"$T/b"
per_binary "$T/after.log" >"$T/a"
echo "binaries whose time moved by more than 0.5 s (before -> after):"
join -j1 "$T/b" "$T/a" |
  awk '{d = $5 - $3; if (d > 0.5 || d < -0.5) printf "  %-50s %4d tests %6.2f s -> %4d tests %6.2f s\n", $1, $2, $3, $4, $5}'
only() { join -v1 -j1 "$1" "$2" |
  awk '{n += $2; s += $3; if ($3 > 1) names = names " " $1} END {printf "%d tests %.1f s:%s\n", n, s, names}'; }
echo "only before: $(only "$T/b" "$T/a")"
echo "only after:  $(only "$T/a" "$T/b")"
