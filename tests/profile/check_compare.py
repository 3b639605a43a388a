#!/usr/bin/python3
"""Checks `gearbox compare MODEL --precision-mode MODE` (the precision debugger) end to end.

Usage: check_compare.py --gearbox BIN --work-dir DIR

A planted sensitive layer: x -> MatMul W1 ("ordinary") -> Add 1000 ("shift") -> MatMul W2
("sensitive", columns of W2 summing to zero) -> Relu. In bf16, values of mean 1000 are rounded
to multiples of 4, which the cancelling weights do not cancel: the node computing "sensitive"
must be the first jump, and keeping it in fp32 (--keep-dtype, by its model name) must remove
the jump and restore the output's cosine (computed here with numpy against fp32 numpy). Bad
uses are USAGE errors with exit 1 or 2. `compile --accuracy-budget` must keep exactly that layer
in fp32, and the .gbm must meet the budget against numpy on an input it never saw. Needs a CPU with bf16 arithmetic: exit 77 (skipped)
otherwise.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def planted(path):
    rng = np.random.default_rng(7)
    w1 = rng.uniform(-1, 1, (64, 64)).astype(np.float32)
    w2 = rng.uniform(-1, 1, (64, 16)).astype(np.float32)
    w2 -= w2.mean(axis=0, keepdims=True)
    shift = np.full((64,), 1000, np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="ordinary"),
             helper.make_node("Add", ["h", "shift"], ["hs"], name="shift"),
             helper.make_node("MatMul", ["hs", "w2"], ["z"], name="sensitive"),
             helper.make_node("Relu", ["z"], ["y"], name="act")]
    g = helper.make_graph(nodes, "planted", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
                           numpy_helper.from_array(shift, "shift")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, path)


def gearbox(args, *extra):
    return subprocess.run([args.gearbox, *extra], capture_output=True, text=True, timeout=120)


def cosine(a, b):
    return float(np.dot(a.ravel(), b.ravel()) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def check_budget(args, model, x, ref_of):
    """compile --accuracy-budget: the planted layer is the one kept in fp32, and the .gbm meets the budget."""
    calib = os.path.join(args.work_dir, "calibration")
    os.makedirs(calib, exist_ok=True)
    rng = np.random.default_rng(9)
    for i in range(3):
        np.save(os.path.join(calib, f"x{i}.npy"), rng.uniform(-1, 1, (4, 64)).astype(np.float32))
    mode = ["--precision-mode", "allow_mix_precision_bf16"]
    gbm = os.path.join(args.work_dir, "budget.gbm")
    rep = os.path.join(args.work_dir, "budget.json")
    c = gearbox(args, "compile", model, *mode, "--accuracy-budget", "cosine>=0.9999", "--calibration", calib,
                "-o", gbm, "--report", rep, "-q")
    check(c.returncode == 0, f"compile --accuracy-budget exits 0 ({c.returncode}: {c.stderr[-300:]})")
    b = json.load(open(rep))["accuracy_budget"] if c.returncode == 0 else {}
    kept = [[k["node"]] + k["from"] for k in b.get("kept_fp32", [])]
    check(b.get("samples") == 3, f"the three calibration files are the samples ({b.get('samples')})")
    check(b.get("without_fallback", {}).get("cosine", 1) < 0.9999,
          f"without fallback the mode misses the budget ({b.get('without_fallback')})")
    check(len(kept) == 1 and "sensitive" in kept[0], f"only the node computing 'sensitive' is kept in fp32 ({kept})")
    check(b.get("met") is True and b.get("achieved", {}).get("cosine", 0) >= 0.9999, f"the budget is met ({b})")
    check("kept in fp32: 1 of 2 lowered nodes" in c.stdout and "speed:" in c.stdout,
          f"the compile report says what was kept and the speed ({c.stdout[-400:]!r})")
    # The .gbm, run on an input the budget never saw, against numpy.
    xf = os.path.join(args.work_dir, "x_unseen.npy")
    xu = np.random.default_rng(10).uniform(-1, 1, (4, 64)).astype(np.float32)
    np.save(xf, xu)
    out = os.path.join(args.work_dir, "budget_out")
    r = gearbox(args, "run", gbm, "--input", f"x={xf}", "--output-dir", out)
    y = np.load(os.path.join(out, "y.npy")) if r.returncode == 0 else np.zeros((4, 16))
    cos = cosine(y, ref_of(xu))
    check(cos >= 0.9999, f"the compiled model meets the budget on an unseen input (cosine {cos:.7f})")
    rnd = gearbox(args, "compile", model, *mode, "--accuracy-budget", "top1>=0.99,cosine>=0.9999",
                  "--calibration-random", "4", "-o", gbm, "-q")
    check(rnd.returncode == 0 and "kept in fp32: 1 of 2" in rnd.stdout,
          f"--calibration-random 4 finds the same layer ({rnd.stdout[-300:]!r} {rnd.stderr[-200:]!r})")
    for extra, code, what in [
            (("--accuracy-budget", "cosine>0.9", "--calibration-random", "2"), "ACCURACY_BUDGET_INVALID",
             "a malformed budget"),
            (("--accuracy-budget", "cosine>=0.99"), "USAGE", "a budget without calibration"),
            (("--accuracy-budget", "cosine>=0.99", "--calibration", calib, "--calibration-random", "2"), "USAGE",
             "both calibration sources"),
            (("--calibration-random", "2"), "USAGE", "calibration without a budget"),
            (("--accuracy-budget", "cosine>=0.99", "--calibration", os.path.join(args.work_dir, "none")), "USAGE",
             "a calibration folder that does not exist")]:
        e = gearbox(args, "compile", model, *mode, *extra, "-o", gbm, "-q")
        check(e.returncode in (1, 2) and code in e.stderr, f"{what} is {code} ({e.returncode}: {e.stderr[:160]!r})")
    f = gearbox(args, "compile", model, "--accuracy-budget", "cosine>=0.99", "--calibration-random", "2", "-o", gbm)
    check(f.returncode in (1, 2) and "USAGE" in f.stderr, f"a budget under force_fp32 is USAGE ({f.stderr[:160]!r})")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--work-dir", required=True)
    args = p.parse_args()
    flags = open("/proc/cpuinfo").read()
    if "avx512_bf16" not in flags and "amx_bf16" not in flags:
        print("skipped: this CPU has no bf16 arithmetic")
        return 77
    os.makedirs(args.work_dir, exist_ok=True)
    model = os.path.join(args.work_dir, "planted.onnx")
    planted(model)
    x = np.random.default_rng(8).uniform(-1, 1, (4, 64)).astype(np.float32)
    xf = os.path.join(args.work_dir, "x.npy")
    np.save(xf, x)
    mode = ["--precision-mode", "allow_mix_precision_bf16"]

    r = gearbox(args, "compare", model, *mode, "--input", f"x={xf}", "--json")
    check(r.returncode == 0, f"compare exits 0 ({r.returncode}: {r.stderr[-300:]})")
    j = json.loads(r.stdout)
    nodes = {n["node"]: n for n in j["nodes"]}
    first = nodes.get(j["first_jump"]) if j["first_jump"] else None
    check(first is not None and "sensitive" in first["from"] + [first["node"]],
          f"the first jump is the node computing 'sensitive' (got {j['first_jump']})")
    check(first is not None and first["compute_dtype"] == "bfloat16", "it computed in bf16")
    ordinary = [n for n in j["nodes"] if "ordinary" in n["from"] + [n["node"]]]
    check(len(ordinary) == 1 and not ordinary[0]["jump"] and ordinary[0]["error"] > 0,
          "the ordinary bf16 MatMul has an error and no jump")
    check(j["outputs"][0]["cosine"] < 0.999, f"the output shows the loss (cosine {j['outputs'][0]['cosine']})")

    text = gearbox(args, "compare", model, *mode, "--input", f"x={xf}")
    check(text.returncode == 0 and "<- first jump" in text.stdout and "keep it in fp32" in text.stdout,
          "the table marks the first jump and says how to keep it in fp32")

    keep = os.path.join(args.work_dir, "keep.txt")
    with open(keep, "w") as f:
        f.write("sensitive\n")
    k = gearbox(args, "compare", model, *mode, "--keep-dtype", keep, "--input", f"x={xf}", "--json")
    kj = json.loads(k.stdout) if k.returncode == 0 else {}
    check(k.returncode == 0 and kj["first_jump"] is None, "kept in fp32 by its model name, it is no longer a jump")
    # The fp32 twin against numpy's float64 model: compare's reference is the model's fp32.
    ref = np.maximum((x.astype(np.float64) @ onnx.numpy_helper.to_array(onnx.load(model).graph.initializer[0])
                      + 1000) @ onnx.numpy_helper.to_array(onnx.load(model).graph.initializer[1]), 0)
    run = gearbox(args, "run", model, *mode, "--keep-dtype", keep, "--input", f"x={xf}", "--output-dir",
                  os.path.join(args.work_dir, "out"))
    y = np.load(os.path.join(args.work_dir, "out", "y.npy")) if run.returncode == 0 else np.zeros((4, 16))
    cos = float(np.dot(y.ravel(), ref.ravel()) / (np.linalg.norm(y) * np.linalg.norm(ref) + 1e-30))
    check(cos > 0.9999, f"with 'sensitive' kept, the run agrees with numpy (cosine {cos:.7f})")

    for extra, what in [((), "no --precision-mode"), (("--precision-mode", "bf16"), "an unknown mode")]:
        b = gearbox(args, "compare", model, *extra, "--input", f"x={xf}")
        check(b.returncode in (1, 2) and "GBX-E" in b.stderr, f"{what} is an error with a code ({b.stderr[:120]!r})")
    gbm = os.path.join(args.work_dir, "planted.gbm")
    c = gearbox(args, "compile", model, *mode, "-o", gbm)
    check(c.returncode == 0, f"compile --precision-mode writes a .gbm ({c.stderr[-200:]})")
    b = gearbox(args, "compare", gbm, *mode, "--input", f"x={xf}")
    check(b.returncode == 1 and "USAGE" in b.stderr and ".onnx" in b.stderr, "a .gbm is refused, naming the .onnx")
    check_budget(args, model, x, ref_of=lambda xs: np.maximum(
        (xs.astype(np.float64) @ onnx.numpy_helper.to_array(onnx.load(model).graph.initializer[0]) + 1000)
        @ onnx.numpy_helper.to_array(onnx.load(model).graph.initializer[1]), 0))
    print(f"{len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
