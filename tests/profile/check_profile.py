#!/usr/bin/python3
"""Checks `gearbox profile` end to end on small models built here with onnx.helper.

Usage: check_profile.py --gearbox BIN --work-dir DIR

* trace.json is valid trace-event JSON (every event has the fields its phase needs) and the
  main-graph op slices of each run add up to at most the run's slice, and in the best of the 3
  runs to within 5% of it (one run can lose time to the OS on a shared machine);
* op_summary.csv's op-type totals agree with the trace's slices;
* FLOPs of Conv (fused and not), MatMul and Gemm equal the hand-computed 2*M*N*K-style counts;
* the advisor flags a planted problem for the rules that can be planted in a small model:
  copies (Transpose-dominated), preprocessing (Resize-dominated), unfused (conv_fusion
  switched off), memory-peak (a device pool smaller than the tensors), idle-gaps (hundreds of
  one-element ops), below-roofline (MatMulInteger on cpu.ref: a plain loop; the finding's
  figures recomputed from the trace and hand-computed FLOPs and bytes);
* memory.csv: the pool rows and peak; the arena plan's rows satisfy what any valid plan must.
"""
import argparse
import csv
import json
import os
import re
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


def check_arena(mem, op_names):
    """memory.csv's arena rows: the memory planner's placements, checked for what any valid
    plan must satisfy (independent of which passes ran): the graph outputs' sizes, lifetimes
    ending at the end of the graph, no two buffers live at once sharing bytes, the summary
    figures consistent with the rows."""
    arena = [x for x in mem if x["section"] == "arena"]
    summary = {x["value"]: int(x["bytes"]) for x in mem if x["section"] == "arena_summary"}
    want = {"planned_bytes", "naive_bytes", "lower_bound_bytes", "unsized_values", "run_arena_bytes",
            "run_arena_fallbacks"}
    check(len(arena) > 0 and set(summary) == want,
          f"memory.csv has arena rows ({len(arena)}) and the six arena_summary rows ({sorted(summary)})")
    if not arena or set(summary) != want:
        return
    # Every value this model computes is a graph output (y, m, q), and the executor's arena
    # leaves graph outputs to the buffer pool (runtime/arena.h): the profiled runs had no
    # intermediate to place, and profile says so instead of printing zeros.
    check(summary["run_arena_bytes"] == 0, f"the runs placed nothing in an arena ({summary['run_arena_bytes']} bytes)")
    reasons = [x["value"] for x in mem if x["section"] == "run_arena_not_made"]
    check(len(reasons) == 1 and "no intermediate" in reasons[0],
          f"one run_arena_not_made row naming the reason (got {reasons})")
    align = lambda n: (n + 63) // 64 * 64  # noqa: E731
    outputs = {"y": 64 * 56 * 56 * 4, "m": 64 * 96 * 4, "q": 8 * 128 * 4}
    rows = {x["value"]: x for x in arena}
    for name, nbytes in outputs.items():
        x = rows.get(name)
        check(x is not None and int(x["bytes"]) == align(nbytes) and x["last_node"] == "(end of graph)",
              f"arena row of graph output {name}: {align(nbytes)} bytes, lives to the end of the graph")
    check(all(x["first_node"] in op_names and (x["last_node"] in op_names or x["last_node"] == "(end of graph)")
              for x in arena), "every arena lifetime starts and ends at a node of the trace")
    # Buffers: a value written in place shares its input's bytes on purpose.
    group = {v: v for v in rows}

    def root(v):
        while group[v] != v:
            v = group[v]
        return v
    for v, x in rows.items():
        if x["in_place_of"] in rows:
            group[root(v)] = root(x["in_place_of"])
    bufs = {}
    for v, x in rows.items():
        b = bufs.setdefault(root(v), [int(x["offset"]), int(x["bytes"]), int(x["first"]), int(x["last"])])
        b[2], b[3] = min(b[2], int(x["first"])), max(b[3], int(x["last"]))
    clashes = [(a, b) for a in bufs for b in bufs if a < b
               and bufs[a][2] <= bufs[b][3] and bufs[b][2] <= bufs[a][3]
               and bufs[a][0] < bufs[b][0] + bufs[b][1] and bufs[b][0] < bufs[a][0] + bufs[a][1]]
    check(not clashes, f"no two buffers live at the same time share arena bytes ({clashes[:3]})")
    top = max(int(x["offset"]) + int(x["bytes"]) for x in arena)
    check(summary["planned_bytes"] == top, f"planned_bytes {summary['planned_bytes']} is the arena's top {top}")
    check(summary["naive_bytes"] == sum(int(x["bytes"]) for x in arena),
          "naive_bytes is the sum of the values' sizes")
    check(summary["lower_bound_bytes"] <= summary["planned_bytes"] <= summary["naive_bytes"],
          "lower bound <= planned <= naive")


def below_roofline_model(path):
    # MatMulInteger [128,256]x[256,128] (uint8 -> int32): a compute-heavy op whose reference
    # kernel is a plain loop, far below any roofline.
    rng = np.random.default_rng(4)
    b = numpy_helper.from_array(rng.integers(0, 255, (256, 128), dtype=np.uint8), "b")
    g = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"], name="mmi")], "slow",
                          [helper.make_tensor_value_info("a", TensorProto.UINT8, [128, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.INT32, [128, 128])], [b])
    return save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def check_below_roofline(r, out):
    """The below-roofline finding and its figures, recomputed here from the trace and the
    hand-computed FLOPs and bytes."""
    lines = [line for line in r.stdout.splitlines() if line.startswith("advisor [below-roofline]")]
    check(len(lines) == 1, f"advisor flags MatMulInteger below its roofline ({lines})")
    if len(lines) != 1:
        print(r.stdout)
        return
    m = re.match(r"advisor \[below-roofline\] (\S+) reaches ([\d.e+-]+) GFLOP/s, ([\d.e+-]+)% of the ([\d.]+) GFLOP/s its "
                 r"arithmetic intensity \(([\d.]+) FLOP/byte\) allows, and takes ([\d.]+)% of op time", lines[0])
    check(m is not None and m.group(1) == "MatMulInteger", f"the finding names MatMulInteger ({lines[0]})")
    if not m:
        return
    rate, pct, attainable, intensity, share = (float(m.group(i)) for i in range(2, 7))
    with open(os.path.join(out, "trace.json")) as f:
        ops = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X" and e.get("cat") != "run"]
    flops = 2 * 128 * 128 * 256
    nbytes = 128 * 256 + 256 * 128 + 128 * 128 * 4  # uint8 A and B read, int32 Y written
    mmi = [e for e in ops if e["name"] == "mmi"]
    hand_rate = len(mmi) * flops / (sum(e["dur"] for e in mmi) * 1e3)
    check(abs(rate - hand_rate) <= 0.01 * hand_rate,
          f"evidence rate {rate} GFLOP/s == hand FLOPs / trace time {hand_rate:.3f}")
    check(abs(intensity - flops / nbytes) < 0.05, f"evidence intensity {intensity} == hand {flops / nbytes:.2f} FLOP/byte")
    check(pct < 20 and abs(pct - 100 * rate / attainable) <= 0.01 * pct + 0.05,
          f"evidence: {pct}% of attainable, below 20% and consistent with {rate}/{attainable}")
    total = sum(e["dur"] for e in ops if e["args"]["depth"] == 0)
    check(abs(share - 100 * sum(e["dur"] for e in mmi) / total) < 0.1, f"evidence share of op time {share}%")
    with open(os.path.join(out, "op_summary.csv")) as f:
        row = [x for x in csv.DictReader(f) if x["kind"] == "op_type" and x["name"] == "MatMulInteger"]
    check(len(row) == 1 and row[0]["engine"] == "cpu.ref" and float(row[0]["pct_of_peak"]) < 20,
          "op_summary: MatMulInteger on cpu.ref, under 20% of its attainable rate")
    after = r.stdout.split(lines[0], 1)[1].splitlines()
    check(len(after) > 1 and after[1].strip().startswith("fix:") and "cpu.dnnl" in after[1],
          "the fix names a faster engine")


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
        coverage = []
        for run in runs:
            k = run["args"]["run"]
            s = sum(e["dur"] for e in ops if e["args"]["run"] == k and e["args"]["depth"] == 0)
            inside = all(run["ts"] <= e["ts"] and e["ts"] + e["dur"] <= run["ts"] + run["dur"] + 1e-3
                         for e in ops if e["args"]["run"] == k)
            check(inside, f"run {k}: every op slice lies inside the run slice")
            check(s <= run["dur"] * (1 + 1e-6), f"run {k}: op slices add up to {s:.1f} us, more than the run's "
                  f"{run['dur']:.1f} us")
            coverage.append((s / run["dur"], k, s, run["dur"]))
        # The gaps between op slices are the executor's own time, plus whatever the OS took from
        # the thread: on a shared 2-core machine running ctest -j2 one descheduling of a ~500 us
        # run broke a per-run bound (CI, 2026-12-07: 94.7%). So the best of the 3 runs must be
        # covered within 5%: the instrumentation misses nothing, and noise in one run is not a red.
        best = max(coverage)
        check(best[0] >= 0.95, f"run {best[1]} (the best covered): op slices add up to {best[2]:.1f} us of the "
              f"run's {best[3]:.1f} us (within 5%)")
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
        peak = [x for x in mem if x["section"] == "peak"]
        check(len(peak) == 1 and int(peak[0]["bytes_in_use"]) >= 64 * 56 * 56 * 4,
              "memory.csv has one peak row, at least the Conv output's bytes")
        pool = [x for x in mem if x["section"] == "pool"]
        check(len(pool) == len(ops) and max(int(x["bytes_in_use"]) for x in pool) == int(peak[0]["bytes_in_use"]),
              f"memory.csv has a pool row per op execution ({len(pool)} of {len(ops)}) and the peak is their maximum")
        check_arena(mem, {e["name"] for e in ops})
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
    # The optimizer cancels the transposes: one Relu whose 4 MiB output is the whole peak, in a
    # pool of exactly 4 MiB (so the run still fits when tensors come from the device pool).
    env = dict(os.environ, GEARBOX_DEVICE_MEMORY="4M")
    r = profile(a.gearbox, transpose_model(w("transpose.onnx")), w("memory"), env=env)
    check(r.returncode == 0 and "memory-peak" in rules(r.stdout), "advisor flags peak memory at a 4M device pool")
    r = profile(a.gearbox, tiny_ops_model(w("tiny.onnx")), w("tiny"), ["--disable-pass", "constant_folding"])
    check(r.returncode == 0 and "idle-gaps" in rules(r.stdout), "advisor flags idle gaps between 400 tiny ops")
    env = dict(os.environ, GEARBOX_ENGINES="cpu.ref")
    r = profile(a.gearbox, below_roofline_model(w("slow.onnx")), w("slow"), env=env)
    check(r.returncode == 0, "profile of the MatMulInteger model on cpu.ref exits 0")
    if r.returncode == 0:
        check_below_roofline(r, w("slow"))
    print("PASS" if not FAILS else f"FAILED: {len(FAILS)} check(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
