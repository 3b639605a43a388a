#!/usr/bin/python3
"""Checks `gearbox profile` end to end on small models built here with onnx.helper.

Usage: check_profile.py --gearbox BIN --work-dir DIR

* trace.json is valid trace-event JSON (every event has the fields its phase needs) and the
  main-graph op slices of each run add up to within 5% of the run's slice;
* op_summary.csv's op-type totals agree with the trace's slices;
* FLOPs of Conv (fused and not), MatMul and Gemm equal the hand-computed 2*M*N*K-style counts;
* the advisor flags a planted problem for the rules that can be planted in a small model:
  copies (Transpose-dominated), preprocessing (Resize-dominated), unfused (conv_fusion
  switched off), memory-peak (a device pool smaller than the tensors), idle-gaps (hundreds of
  one-element ops).
"""
import argparse
import csv
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


def save(model, path):
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def init(name, shape, seed):
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)


def compute_model(path):
    # Conv 64->64, 3x3, pad 1 on 1x64x56x56 (milliseconds even on oneDNN, so the run is not
    # dominated by per-run fixed costs); MatMul [1,64,128]x[128,96]; Gemm [8,256]x[256,128].
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
        helper.make_node("MatMul", ["a", "b"], ["m"], name="matmul"),
        helper.make_node("Gemm", ["g", "h"], ["q"], name="gemm"),
    ]
    g = helper.make_graph(
        nodes, "compute",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 56, 56]),
         helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 64, 128]),
         helper.make_tensor_value_info("g", TensorProto.FLOAT, [8, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 56, 56]),
         helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, 64, 96]),
         helper.make_tensor_value_info("q", TensorProto.FLOAT, [8, 128])],
        [init("w", (64, 64, 3, 3), 1), init("b", (128, 96), 2), init("h", (256, 128), 3)])
    return save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def transpose_model(path):
    nodes = []
    prev = "x"
    for i in range(6):
        nodes.append(helper.make_node("Transpose", [prev], [f"t{i}"], name=f"transpose{i}", perm=[0, 2, 3, 1]
                                      if i % 2 == 0 else [0, 3, 1, 2]))
        prev = f"t{i}"
    nodes.append(helper.make_node("Relu", [prev], ["y"], name="relu"))
    g = helper.make_graph(nodes, "transposes",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 128, 128])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 128, 128])])
    return save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def resize_model(path):
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["r"], name="resize", mode="linear"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "resize",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 256, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 512, 512])],
                          [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")])
    return save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def tiny_ops_model(path):
    nodes = []
    prev = "x"
    for i in range(400):
        nodes.append(helper.make_node("Neg", [prev], [f"n{i}"], name=f"neg{i}"))
        prev = f"n{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    return save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def profile(gearbox, model, out, extra=(), env=None):
    cmd = [gearbox, "profile", model, "--random-inputs", "--loop", "3", "--output-dir", out] + list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    print("$ " + " ".join(cmd) + f"  -> exit {r.returncode}")
    if r.returncode != 0:
        print(r.stdout, r.stderr)
    return r


def rules(stdout):
    return {line.split("[", 1)[1].split("]", 1)[0] for line in stdout.splitlines() if line.startswith("advisor [")}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--work-dir", required=True)
    a = p.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    w = lambda *parts: os.path.join(a.work_dir, *parts)  # noqa: E731

    # ---- trace, summary and FLOPs on the compute model ----
    out = w("compute")
    r = profile(a.gearbox, compute_model(w("compute.onnx")), out)
    check(r.returncode == 0, "profile of the compute model exits 0")
    if r.returncode == 0:
        with open(os.path.join(out, "trace.json")) as f:
            trace = json.load(f)
        events = trace["traceEvents"]
        need = {"X": {"name", "ph", "ts", "dur", "pid", "tid"}, "C": {"name", "ph", "ts", "pid", "args"},
                "M": {"name", "ph", "pid", "args"}}
        check(all(e["ph"] in need and need[e["ph"]] <= set(e) for e in events),
              "every trace event has the fields of its phase (X, C, M)")
        runs = [e for e in events if e["ph"] == "X" and e.get("cat") == "run"]
        ops = [e for e in events if e["ph"] == "X" and e.get("cat") != "run"]
        check(len(runs) == 3, f"3 run slices (got {len(runs)})")
        for run in runs:
            k = run["args"]["run"]
            s = sum(e["dur"] for e in ops if e["args"]["run"] == k and e["args"]["depth"] == 0)
            inside = all(run["ts"] <= e["ts"] and e["ts"] + e["dur"] <= run["ts"] + run["dur"] + 1e-3
                         for e in ops if e["args"]["run"] == k)
            check(inside, f"run {k}: every op slice lies inside the run slice")
            check(abs(run["dur"] - s) <= 0.05 * run["dur"],
                  f"run {k}: op slices add up to {s:.1f} us of the run's {run['dur']:.1f} us (within 5%)")
        with open(os.path.join(out, "op_summary.csv")) as f:
            rows = list(csv.DictReader(f))
        type_total_ms = sum(float(x["total_ms"]) for x in rows if x["kind"] == "op_type")
        trace_ms = sum(e["dur"] for e in ops if e["args"]["depth"] == 0) / 1e3
        check(abs(type_total_ms - trace_ms) <= 1e-3 * max(trace_ms, 1e-9) + 1e-3,
              f"op_summary op-type total {type_total_ms:.4f} ms equals the trace's {trace_ms:.4f} ms")
        # The optimizer fuses conv+relu into com.gearbox.FusedConv: find rows by op type.
        node = {x["op_type"].split(".")[-1]: x for x in rows if x["kind"] == "node"}
        hand = {"FusedConv": 2 * 1 * 64 * 56 * 56 * (64 * 3 * 3),
                "MatMul": 2 * 64 * 96 * 128,
                "Gemm": 2 * 8 * 128 * 256}
        for op, flops in hand.items():
            got = float(node[op]["flops"]) / int(node[op]["calls"]) if op in node else -1
            check(got == flops, f"{op} FLOPs per call {got:.0f} == hand-computed {flops}")
        check(all(int(node[n]["calls"]) == 3 for n in hand if n in node), "each node is called once per run")
        with open(os.path.join(out, "memory.csv")) as f:
            mem = list(csv.DictReader(f))
        check(mem and mem[-1]["run"] == "peak" and int(mem[-1]["bytes_in_use"]) >= 64 * 56 * 56 * 4,
              "memory.csv ends with the peak, at least the Conv output's bytes")
        html = open(os.path.join(out, "report.html")).read()
        check("<svg" in html and "http://" not in html.replace("http://www.w3.org", "") and "<script src" not in html,
              "report.html is self-contained (inline SVG, no network references)")

    # ---- the plain Conv's FLOPs, with fusion off; and the advisor names the switched-off pass ----
    r = profile(a.gearbox, w("compute.onnx"), w("compute_unfused"), ["--disable-pass", "conv_fusion"])
    check(r.returncode == 0, "profile with conv_fusion off exits 0")
    if r.returncode == 0:
        with open(w("compute_unfused", "op_summary.csv")) as f:
            rows = {x["name"]: x for x in csv.DictReader(f) if x["kind"] == "node"}
        flops = 2 * 1 * 64 * 56 * 56 * (64 * 3 * 3)
        got = float(rows["conv"]["flops"]) / int(rows["conv"]["calls"]) if "conv" in rows else -1
        check(got == flops, f"Conv FLOPs per call {got:.0f} == hand-computed {flops}")
        check("unfused" in rules(r.stdout), "advisor flags the Conv+Relu left unfused by --disable-pass conv_fusion")

    # ---- advisor: planted problems ----
    r = profile(a.gearbox, transpose_model(w("transpose.onnx")), w("transpose"),
                ["--disable-pass", "transpose_reshape_cancel"])
    check(r.returncode == 0 and "copies" in rules(r.stdout), "advisor flags Transpose-dominated time (copies)")
    r = profile(a.gearbox, resize_model(w("resize.onnx")), w("resize"))
    check(r.returncode == 0 and "preprocessing" in rules(r.stdout), "advisor flags Resize-dominated time (preprocessing)")
    env = dict(os.environ, GEARBOX_DEVICE_MEMORY="1M")
    r = profile(a.gearbox, transpose_model(w("transpose.onnx")), w("memory"), env=env)
    check(r.returncode == 0 and "memory-peak" in rules(r.stdout), "advisor flags peak memory near a 1M device pool")
    r = profile(a.gearbox, tiny_ops_model(w("tiny.onnx")), w("tiny"), ["--disable-pass", "constant_folding"])
    check(r.returncode == 0 and "idle-gaps" in rules(r.stdout), "advisor flags idle gaps between 400 tiny ops")
    print("PASS" if not FAILS else f"FAILED: {len(FAILS)} check(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
