#!/usr/bin/env python3
"""Runs one example (or `gearbox demo --json`) and checks its result:

  check_example.py [--min-accuracy PCT] -- PROGRAM ARGS...
      exit status 0 and, with --min-accuracy, the first "accuracy: X%" it prints >= PCT
  check_example.py --demo -- GEARBOX demo --json ...
      the JSON's .gbm accuracy >= 95% (the issue's bar for make demo) and the .gbm's predictions
      equal to the trained network's on every held-out digit
"""
import argparse
import json
import re
import subprocess
import sys

p = argparse.ArgumentParser()
p.add_argument("--min-accuracy", type=float)
p.add_argument("--demo", action="store_true")
p.add_argument("command", nargs=argparse.REMAINDER)
a = p.parse_args()
cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
print(r.stdout)
if r.returncode != 0:
    sys.exit(f"FAIL: {cmd[0]} exited {r.returncode}")
if a.min_accuracy is not None:
    m = re.search(r"accuracy: ([0-9.]+)%", r.stdout)
    if not m:
        sys.exit("FAIL: no 'accuracy: X%' line")
    if float(m.group(1)) < a.min_accuracy:
        sys.exit(f"FAIL: accuracy {m.group(1)}% < {a.min_accuracy}%")
if a.demo:
    j = json.loads(r.stdout.strip().splitlines()[-1])
    if j["gbm_accuracy"] < 95:
        sys.exit(f"FAIL: the .gbm's held-out accuracy {j['gbm_accuracy']}% < 95%")
    if j["predictions_equal"] != j["test_digits"] or j["max_abs_logit_diff"] > 1e-4:
        sys.exit(f"FAIL: .gbm vs trained network: {j['predictions_equal']} of {j['test_digits']} equal, "
                 f"max |logit difference| {j['max_abs_logit_diff']}")
    # The accuracy is recomputed from the labels by the demo; check it agrees with its own eager run.
    if abs(j["gbm_accuracy"] - j["eager_accuracy"]) > 1e-9:
        sys.exit("FAIL: .gbm and trained network accuracies differ although their predictions are equal")
print("PASS")
