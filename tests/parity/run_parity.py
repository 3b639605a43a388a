#!/usr/bin/python3
"""Run one exported model through `gearbox run` and compare every output with the framework's.

Usage: run_parity.py --gearbox BIN --model-dir DIR --out-dir DIR [--timeout S] [extra gearbox args]

DIR holds model.onnx, one <input_name>.npy per model input and expected_<output_name>.npy per
output (as written by scripts/export_models.py or scripts/make_bad_inputs.py). Every .npy that
is not expected_* is passed as --input NAME=FILE. The test fails when gearbox fails or is killed,
when its --json report does not list exactly the expected outputs with their shapes and dtypes,
or when scripts/compare_npy.py rejects any output.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, "..", "..", "scripts", "compare_npy.py")


def sanitize(name):
    # The CLI contract: every char outside [A-Za-z0-9._-] becomes '_' in the output file name.
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--model-dir", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--timeout", type=float, default=3000)
    a, extra = p.parse_known_args()

    import numpy as np  # after argparse so --help works anywhere

    model = os.path.join(a.model_dir, "model.onnx")
    npys = sorted(f for f in os.listdir(a.model_dir) if f.endswith(".npy"))
    inputs = [f for f in npys if not f.startswith("expected_")]
    expected = {f[len("expected_"):-len(".npy")]: f for f in npys if f.startswith("expected_")}
    if not os.path.exists(model) or not expected:
        print(f"FAIL: {a.model_dir} lacks model.onnx or expected_*.npy (export failed?)")
        return 1

    os.makedirs(a.out_dir, exist_ok=True)
    for f in os.listdir(a.out_dir):  # stale outputs from an earlier run must not pass this one
        if f.endswith(".npy"):
            os.remove(os.path.join(a.out_dir, f))

    cmd = [a.gearbox, "run", model]
    for f in inputs:
        cmd += ["--input", f"{f[:-len('.npy')]}={os.path.join(a.model_dir, f)}"]
    cmd += ["--output-dir", a.out_dir, "--json"] + extra
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        print(f"FAIL: gearbox run did not finish in {a.timeout:.0f}s")
        return 1
    wall = time.monotonic() - t0
    sys.stderr.write(r.stderr)
    print(f"gearbox run: exit {r.returncode}, wall {wall:.2f}s")
    if r.returncode != 0:
        why = f"killed by signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
        print(f"FAIL: gearbox run {why}\nstdout:\n{r.stdout}")
        return 1

    try:
        report = json.loads(r.stdout)
    except json.JSONDecodeError as e:
        print(f"FAIL: --json stdout is not one JSON object ({e}):\n{r.stdout}")
        return 1
    if "latency_ms" in report:
        print(f"latency_ms: {json.dumps(report['latency_ms'])}")

    ok = True
    listed = {o.get("name"): o for o in report.get("outputs", [])}
    if set(listed) != set(expected):
        print(f"FAIL: --json lists outputs {sorted(listed)}, expected {sorted(expected)}")
        ok = False
    for name, exp_file in sorted(expected.items()):
        exp_path = os.path.join(a.model_dir, exp_file)
        act_path = os.path.join(a.out_dir, sanitize(name))
        if name in listed:
            exp = np.load(exp_path)
            o = listed[name]
            if list(o.get("shape", [])) != list(exp.shape) or o.get("dtype") != str(exp.dtype):
                print(f"FAIL: --json says {name} is {o.get('dtype')} {o.get('shape')}, "
                      f"expected {exp.dtype} {list(exp.shape)}")
                ok = False
            if os.path.abspath(o.get("file", "")) != os.path.abspath(act_path):
                print(f"FAIL: --json names file {o.get('file')!r} for {name}, expected {act_path}")
                ok = False
        rc = subprocess.run([sys.executable, COMPARE, exp_path, act_path]).returncode
        ok = ok and rc == 0
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
