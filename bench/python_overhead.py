#!/usr/bin/python3
"""What the Python module costs, and what Python threads gain (not a test: it prints figures).

Usage (from the repository root, after the build):
  PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--rounds 7] [--calls 2000]
      [--runs 40] [--json-out FILE]

1. Overhead per call. A tiny model (z = Relu(x + y) on [1, 16] floats) on one session, one
   thread: each round times CALLS calls of the C++ Session::run on feeds converted once
   (Session._time_cpp_runs, the GIL released, as a C++ caller pays it) and CALLS calls of
   gearbox.Session.run from Python (dict in, numpy arrays borrowed, outputs wrapped in
   capsules, dict out) and of InferenceSession.run (ONNX Runtime's API); the two sides alternate,
   the order swapped every round. Overhead = median(Python) - median(C++) per round.
   Target (issue 29): <= 10 us.
2. Threads. A conv net that takes a few ms per run on one session with one OpenMP thread per
   run: the time for RUNS runs from one Python thread and for 2 x RUNS runs from two Python
   threads, alternating; throughput ratio = (2 RUNS / t2) / (RUNS / t1). Target: >= 1.6x on
   2 cores. The same ratio for the runs made from C++ threads (Session._time_cpp_runs, no
   Python between runs) is what the host allows at that moment: on a machine shared with other
   work, neither reaches 2x, and the Python ratio is to be read against that one.
The host is shared with other work: every figure is shown per round, with its spread; read the
medians, and distrust a round whose spread is wide. One JSON line "SUMMARY_JSON {...}" ends the
output.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import gearbox


def tiny_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 16])
    g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Relu", ["s"], ["z"])],
                          "tiny", [x, y], [z])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def conv_model(path):
    rng = np.random.default_rng(0)
    inits, nodes, prev, c = [], [], "x", 3
    for i, out in enumerate([32, 32, 64, 64]):
        inits.append(numpy_helper.from_array((rng.standard_normal((out, c, 3, 3)) * 0.1).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        prev, c = f"r{i}", out
    nodes.append(helper.make_node("GlobalAveragePool", [prev], ["y"]))
    g = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 64, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 1, 1])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def per_call(fn, calls):
    times = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - t0) * 1e-9)
    return times


def spread(values):
    return f"median {statistics.median(values):.3g}, min {min(values):.3g}, max {max(values):.3g}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--runs", type=int, default=40)
    p.add_argument("--json-out")
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="gearbox-pybench-")
    tiny, convs = os.path.join(tmp, "tiny.onnx"), os.path.join(tmp, "convs.onnx")
    tiny_model(tiny)
    conv_model(convs)
    print(f"gearbox {gearbox.__version__} from {gearbox.__file__}; CPU: {cpu_name()}; load: {os.getloadavg()}")

    s = gearbox.Session(tiny, threads=1)
    ort = gearbox.InferenceSession(tiny, gearbox.SessionOptions())
    feeds = {"x": np.ones((1, 16), np.float32), "y": np.ones((1, 16), np.float32)}
    s._time_cpp_runs(feeds, 200)
    per_call(lambda: s.run(feeds), 200)
    over, over_ort, cpp_med = [], [], []
    for r in range(a.rounds):
        sides = [("cpp", lambda: s._time_cpp_runs(feeds, a.calls)),
                 ("py", lambda: per_call(lambda: s.run(feeds), a.calls)),
                 ("ort", lambda: per_call(lambda: ort.run(None, feeds), a.calls))]
        if r % 2:
            sides.reverse()
        med = {name: statistics.median(fn()) for name, fn in sides}
        over.append((med["py"] - med["cpp"]) * 1e6)
        over_ort.append((med["ort"] - med["cpp"]) * 1e6)
        cpp_med.append(med["cpp"] * 1e6)
        print(f"round {r}: C++ run {med['cpp'] * 1e6:.2f} us, Session.run {med['py'] * 1e6:.2f} us, "
              f"InferenceSession.run {med['ort'] * 1e6:.2f} us -> overhead {over[-1]:.2f} / {over_ort[-1]:.2f} us")
    print(f"overhead per call, Session.run: {spread(over)} us; InferenceSession.run: {spread(over_ort)} us "
          f"(C++ run itself: {spread(cpp_med)} us; target <= 10 us)")

    c = gearbox.Session(convs, threads=1)
    x = {"x": np.random.default_rng(1).standard_normal((1, 3, 64, 64)).astype(np.float32)}
    for _ in range(5):
        c.run(x)

    def timed_threads(n, cpp=False):
        barrier = threading.Barrier(n + 1)

        def work():
            barrier.wait()
            if cpp:  # the ceiling: the same runs from C++, the GIL released for all of them
                c._time_cpp_runs(x, a.runs)
                return
            for _ in range(a.runs):
                c.run(x)

        ts = [threading.Thread(target=work) for _ in range(n)]
        for t in ts:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in ts:
            t.join()
        return time.perf_counter() - t0

    ratios, ceilings = [], []
    for r in range(a.rounds):
        order = [(1, False), (2, False), (1, True), (2, True)]
        if r % 2:
            order.reverse()
        t = {k: timed_threads(*k) for k in order}
        ratios.append((2 * a.runs / t[(2, False)]) / (a.runs / t[(1, False)]))
        ceilings.append((2 * a.runs / t[(2, True)]) / (a.runs / t[(1, True)]))
        print(f"round {r}: Python threads: 1 {a.runs / t[(1, False)]:.1f} runs/s, 2 {2 * a.runs / t[(2, False)]:.1f} "
              f"runs/s -> {ratios[-1]:.2f}x; the same from C++ threads: {ceilings[-1]:.2f}x")
    print(f"2 Python threads vs 1 on one session: {spread(ratios)}x (target >= 1.6x on 2 cores); "
          f"C++ threads on this host now: {spread(ceilings)}x (what the machine allows)")
    summary = {"overhead_us": statistics.median(over), "overhead_ort_us": statistics.median(over_ort),
               "overhead_us_rounds": over, "cpp_run_us": statistics.median(cpp_med),
               "threads_2_vs_1": statistics.median(ratios), "threads_rounds": ratios,
               "cpp_threads_2_vs_1": statistics.median(ceilings), "cpp_threads_rounds": ceilings,
               "load": os.getloadavg()}
    print("SUMMARY_JSON " + json.dumps(summary))
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(summary, f, indent=2)


def cpu_name():
    try:
        return next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
