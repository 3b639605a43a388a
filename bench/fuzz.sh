#!/usr/bin/env bash
# A long libFuzzer campaign on one target: bench/fuzz.sh TARGET HOURS [BUILD]
# (targets: fuzz/targets.txt; BUILD: the GEARBOX_FUZZ tree `make fuzz` builds, build-fuzz).
# The corpus grows in bench/.work/fuzz/TARGET and is kept between campaigns, so a second
# campaign starts where the first stopped. Prints execs, execs/s, coverage (libFuzzer's cov:
# edges, ft: features), the corpus size and the crashes found (reproducers in
# BUILD/fuzz/crashes/; a crash stops the campaign, as libFuzzer does). Run it under nice on a
# shared machine. To add what a campaign found to the committed seeds, minimize first:
#   BUILD/fuzz/fuzz_TARGET -merge=1 fuzz/corpus/TARGET bench/.work/fuzz/TARGET
set -u
target=${1:?usage: bench/fuzz.sh TARGET HOURS [BUILD]} hours=${2:?usage: bench/fuzz.sh TARGET HOURS [BUILD]}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${3:-$root/build-fuzz}
seconds=$(awk -v h="$hours" 'BEGIN { printf "%d", h * 3600 }')
[ "$seconds" -ge 1 ] || { echo "HOURS must be > 0" >&2; exit 2; }
grep -qx "$target" "$root/fuzz/targets.txt" || { echo "unknown target '$target'; the targets: $(tr '\n' ' ' <"$root/fuzz/targets.txt")" >&2; exit 2; }
echo "fuzzing $target for $seconds s ($(date -u +%FT%TZ)); log: $build/fuzz/$target.log"
bash "$root/fuzz/run_one.sh" "$build" "$target" "$seconds" "$root/bench/.work/fuzz/$target"
