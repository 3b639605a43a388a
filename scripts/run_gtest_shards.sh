#!/usr/bin/env bash
# Runs a GoogleTest binary as N shards in parallel, each one process (GTEST_TOTAL_SHARDS /
# GTEST_SHARD_INDEX), and fails if any shard fails, printing that shard's failures and the end
# of its log. `make test-asan` runs the unit tests this way: under ASan each process start
# costs about a second, so ctest's one process per test (~480 of them) took ~7 minutes of the
# CI budget where the tests themselves take about one.
# Usage: scripts/run_gtest_shards.sh BINARY SHARDS [gtest arguments...]
set -u
bin=$1 shards=$2
shift 2
[ -x "$bin" ] || { echo "run_gtest_shards: $bin is not built" >&2; exit 2; }
logdir=$(mktemp -d)
pids=()
for ((i = 0; i < shards; ++i)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$bin" "$@" >"$logdir/shard$i.log" 2>&1 &
  pids+=($!)
done
failed=0
for ((i = 0; i < shards; ++i)); do
  if wait "${pids[$i]}"; then
    echo "$(basename "$bin") shard $((i + 1))/$shards: $(grep -E '^\[  PASSED  \]' "$logdir/shard$i.log")"
  else
    failed=1
    echo "$(basename "$bin") shard $((i + 1))/$shards FAILED; its failures and the end of its log:"
    grep -A6 -E 'Failure$|ERROR: (Address|Leak)Sanitizer|runtime error:' "$logdir/shard$i.log" | head -80
    tail -n 60 "$logdir/shard$i.log"
  fi
done
rm -rf "$logdir"
exit $failed
