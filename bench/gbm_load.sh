#!/usr/bin/env bash
# End to end: `gearbox run` (process start, load, one inference) of an .onnx against the
# .gbm that `gearbox compile` makes of it, alternating, N rounds. Prints wall seconds and the
# inference latency the run reports, so load time = wall - inference is visible.
# Usage: bench/gbm_load.sh [MODEL.onnx] [ROUNDS] [BUILD_DIR]
set -euo pipefail
MODEL=${1:-/tmp/gbx_models/resnet50/model.onnx}
ROUNDS=${2:-3}
BUILD=${3:-build}
G=$BUILD/gearbox
GBM=$(mktemp --suffix=.gbm)
trap 'rm -f "$GBM"' EXIT
$G compile "$MODEL" -o "$GBM" >/dev/null
echo "file wall_s inference_ms"
for i in $(seq "$ROUNDS"); do
  for f in "$MODEL" "$GBM"; do
    s=$(date +%s.%N)
    ms=$($G run "$f" --random-inputs --json 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["latency_ms"]["median"])')
    e=$(date +%s.%N)
    echo "$(basename "$f") $(echo "$e - $s" | bc) $ms"
  done
done
