#!/usr/bin/env bash
# `make fuzz`: every target of fuzz/targets.txt for SECONDS each, from a fresh copy of its seed
# corpus (BUILD/fuzz/work/TARGET); fails when any target found a crash, leak, sanitizer report
# or hang. Usage: fuzz/run_all.sh BUILD SECONDS
set -u
build=$1 seconds=$2
here=$(cd "$(dirname "$0")" && pwd)
failed=()
while read -r target; do
  [ -n "$target" ] || continue
  rm -rf "$build/fuzz/work/$target"
  bash "$here/run_one.sh" "$build" "$target" "$seconds" "$build/fuzz/work/$target" || failed+=("$target")
done <"$here/targets.txt"
if [ ${#failed[@]} -ne 0 ]; then
  echo "make fuzz: FAILED: ${failed[*]} (reproducers in $build/fuzz/crashes/; rerun one: $build/fuzz/fuzz_TARGET FILE)"
  exit 1
fi
echo "make fuzz: every target ran ${FUZZ_RUNS:+$FUZZ_RUNS inputs or }${seconds} s without a finding"
