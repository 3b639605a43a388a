#!/usr/bin/python3
"""`gearbox bench --json` on a good model: the one JSON object's structure and what it claims.

Usage: check_bench_json.py --gearbox PATH --work-dir DIR

Builds z = x + y with x, y float ['N', 3] (a symbolic batch dim), then
  1. `bench --shape x:4,3 --shape y:4,3 --json --output-dir OUT`: stdout is exactly one JSON
     object with the documented keys and types; the inputs are [4,3] as --shape asked; the
     latency stats are ordered (min <= median <= max, min <= mean <= max, median <= p90 <= max)
     and agree with runs_ms (count = loop, min/max/median recomputed here); z.npy is [4,3].
  2. `bench --input x=X.npy --shape y:4,3 --output-dir OUT2`: z - x (numpy) is the random y,
     so it must lie in [-1, 1] (the documented range of random floats) and not be all zero.
  3. `bench --rounds-stdin` answers 'ready', then one {"times_ms"} line per 'W N' request with N
     numbers, and exits 0 at EOF.
No timing value is asserted, only structure and consistency.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, stdin=None):
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail(f"exit status {r.returncode}\nstderr:\n{r.stderr}")
    return r.stdout


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--work-dir", required=True)
    a = p.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 3])
    graph = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "add_dyn", [x, y], [z])
    model = os.path.join(a.work_dir, "add_dyn.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), model)

    # 1. Structure.
    out1 = os.path.join(a.work_dir, "out1")
    stdout = run([a.gearbox, "bench", model, "--shape", "x:4,3", "--shape", "y:4,3", "--loop", "7",
                  "--warmup", "2", "--threads", "1", "--json", "--output-dir", out1])
    lines = [l for l in stdout.splitlines() if l.strip()]
    if len(lines) != 1:
        fail(f"--json printed {len(lines)} lines, expected one JSON object:\n{stdout}")
    j = json.loads(lines[0])
    want = {"model": str, "engines": str, "threads": int, "inputs": list, "outputs": list, "load_ms": float,
            "first_run_ms": float, "warmup": int, "loop": int, "latency_ms": dict, "runs_ms": list}
    for k, t in want.items():
        if k not in j:
            fail(f"key '{k}' missing: {j}")
        if t is float and isinstance(j[k], int):
            continue
        if not isinstance(j[k], t):
            fail(f"'{k}' is {type(j[k]).__name__}, expected {t.__name__}")
    if set(j) != set(want):
        fail(f"unexpected keys {sorted(set(j) - set(want))}")
    if j["model"] != model or j["loop"] != 7 or j["warmup"] != 2 or j["threads"] != 1:
        fail(f"model/loop/warmup/threads do not echo the command line: {j}")
    ins = {i["name"]: i for i in j["inputs"]}
    if sorted(ins) != ["x", "y"] or any(ins[n]["shape"] != [4, 3] or ins[n]["dtype"] != "float32" for n in ins):
        fail(f"inputs should be x, y float32 [4,3]: {j['inputs']}")
    if j["outputs"] != [{"name": "z", "shape": [4, 3], "dtype": "float32"}]:
        fail(f"outputs: {j['outputs']}")
    lat, runs = j["latency_ms"], j["runs_ms"]
    if set(lat) != {"min", "median", "mean", "p90", "max"}:
        fail(f"latency_ms keys: {sorted(lat)}")
    if len(runs) != 7 or any(not isinstance(v, (int, float)) or v < 0 for v in runs):
        fail(f"runs_ms should hold 7 non-negative numbers: {runs}")
    if not (lat["min"] <= lat["median"] <= lat["p90"] <= lat["max"] and lat["min"] <= lat["mean"] <= lat["max"]):
        fail(f"latency stats out of order: {lat}")
    s = sorted(runs)
    if not (np.isclose(lat["min"], s[0]) and np.isclose(lat["max"], s[-1]) and np.isclose(lat["median"], s[3])
            and np.isclose(lat["mean"], sum(s) / 7)):
        fail(f"latency stats do not match runs_ms {runs}: {lat}")
    if j["load_ms"] <= 0 or j["first_run_ms"] <= 0:
        fail("load_ms and first_run_ms must be positive")
    z1 = np.load(os.path.join(out1, "z.npy"))
    if z1.shape != (4, 3) or z1.dtype != np.float32:
        fail(f"z.npy is {z1.dtype} {z1.shape}")

    # 2. Values: a file for x, random y; z - x is y.
    xv = (np.arange(12, dtype=np.float32).reshape(4, 3) * 10.0).astype(np.float32)
    xf = os.path.join(a.work_dir, "x.npy")
    np.save(xf, xv)
    out2 = os.path.join(a.work_dir, "out2")
    run([a.gearbox, "bench", model, "--input", f"x={xf}", "--shape", "y:4,3", "--loop", "1", "--output-dir", out2])
    yv = np.load(os.path.join(out2, "z.npy")) - xv
    if yv.shape != (4, 3) or np.abs(yv).max() > 1.0 + 1e-4 or not np.any(yv != 0):
        fail(f"z - x should be the random y in [-1, 1]: {yv}")

    # 3. The driver protocol.
    stdout = run([a.gearbox, "bench", model, "--shape", "x:2,3", "--shape", "y:2,3", "--threads", "1",
                  "--rounds-stdin"], stdin="0 3\n1 2\n")
    lines = [json.loads(l) for l in stdout.splitlines() if l.strip()]
    if len(lines) != 3 or lines[0].get("ready") is not True:
        fail(f"expected a ready line and two answers: {lines}")
    if [len(l["times_ms"]) for l in lines[1:]] != [3, 2]:
        fail(f"answers should hold 3 and 2 times: {lines[1:]}")
    print("PASS")


if __name__ == "__main__":
    main()
