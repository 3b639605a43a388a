#!/usr/bin/env bash
# Runs one libFuzzer target for SECONDS over WORK_CORPUS (created; the seeds of
# fuzz/corpus/TARGET and the inputs that once crashed it, fuzz/regressions/TARGET, are read
# from, never written to) and prints one summary line:
#   fuzz TARGET: ok|CRASH|FAILED (exit N) execs E (E/s), cov C ft F, corpus N units / B bytes, crashes K
# Exit status: the fuzzer's (0: no crash, leak, sanitizer report or timeout).
# FUZZ_RUNS=N stops after N inputs (SECONDS still caps it) and FUZZ_SEED=S fixes libFuzzer's
# random seed: together the same inputs on every run, as CI wants (a red there reproduces).
# Usage: fuzz/run_one.sh BUILD TARGET SECONDS WORK_CORPUS
set -u
build=$1 target=$2 seconds=$3 work=$4
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$build/fuzz/fuzz_$target
crashes=$build/fuzz/crashes
log=$build/fuzz/$target.log
[ -x "$bin" ] || { echo "fuzz $target: $bin is not built (make fuzz)" >&2; exit 2; }
mkdir -p "$work" "$crashes"
# -timeout: one input taking longer is a hang and fails; -rss_limit_mb: a run using more is a
# finding too (an allocation sized by the input, unchecked). detect_leaks: libFuzzer's default.
"$bin" -max_total_time="$seconds" ${FUZZ_RUNS:+-runs=$FUZZ_RUNS} ${FUZZ_SEED:+-seed=$FUZZ_SEED} -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$crashes/$target-" "$work" "$root/fuzz/corpus/$target" \
  $( [ -d "$root/fuzz/regressions/$target" ] && echo "$root/fuzz/regressions/$target" ) >"$log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1)
cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$last")
units=$(find "$work" -type f | wc -l)
bytes=$(du -sb "$work" | cut -f1)
# crash-, leak-, timeout- and oom- files; slow-unit- files (an input over 10 s, which on a loaded
# machine can be any input) are kept for a look but are not findings.
found=$(find "$crashes" -type f \( -name "$target-crash-*" -o -name "$target-leak-*" -o -name "$target-timeout-*" \
  -o -name "$target-oom-*" \) | wc -l)
if [ $rc -eq 0 ]; then verdict=ok; elif grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY: UndefinedBehaviorSanitizer' "$log"; then verdict=CRASH; else verdict=FAILED; fi
echo "fuzz $target: $verdict (exit $rc) execs ${execs:-?} (${rate:-?}/s), cov ${cov:-?} ft ${ft:-?}, corpus $units units / $bytes bytes, crashes $found"
if [ $rc -ne 0 ]; then
  echo "---- the end of $log:"
  tail -50 "$log"
fi
exit $rc
