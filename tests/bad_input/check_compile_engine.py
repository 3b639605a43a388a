#!/usr/bin/python3
"""`gearbox compile --engine Conv=cpu.ref --report r.json` reports the forced placement.

Builds x -> Conv -> Neg -> Conv (float [1,4,8,8], 3x3 pads 1) with onnx, compiles it twice
with the layout pass off (it would turn Conv into com.gearbox.NhwcConv) and GEARBOX_ENGINES
unset, so the default list applies:
  * without --engine: both Convs on cpu.dnnl (the first engine of the list that has Conv);
  * with --engine Conv=cpu.ref: both on cpu.ref, forced_nodes 2, and the regions the
    report lists cover every node once, in order, with the engine counts adding up;
and checks that the forced .gbm runs and gives the default .gbm's output (fp tolerance).

Usage: check_compile_engine.py --gearbox PATH --work-dir DIR
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(path):
    rng = np.random.default_rng(3)
    w0 = numpy_helper.from_array(rng.uniform(-1, 1, (4, 4, 3, 3)).astype(np.float32), "w0")
    w1 = numpy_helper.from_array(rng.uniform(-1, 1, (4, 4, 3, 3)).astype(np.float32), "w1")
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["a"], name="conv0", pads=[1, 1, 1, 1]),
        helper.make_node("Neg", ["a"], ["b"], name="neg"),
        helper.make_node("Conv", ["b", "w1"], ["y"], name="conv1", pads=[1, 1, 1, 1]),
    ]
    g = helper.make_graph(nodes, "conv_neg_conv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
                          [w0, w1])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)
    np.save(os.path.join(os.path.dirname(path), "x.npy"), rng.uniform(-1, 1, (1, 4, 8, 8)).astype(np.float32))


def compile_model(gbx, work, name, extra, env):
    out = os.path.join(work, name + ".gbm")
    rep = os.path.join(work, name + ".json")
    cmd = [gbx, "compile", os.path.join(work, "model.onnx"), "-o", out, "--report", rep,
           "--disable-pass", "layout_nhwc"] + extra
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    print(r.stdout + r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: compile exited {r.returncode}")
    with open(rep) as f:
        return out, json.load(f)["partition"]


ORDER = ["conv0", "neg", "conv1"]  # the optimized graph's execution order (no pass applies)


def node_engines(part):
    """Each node's engine, from the regions (first..last node, node count) over ORDER."""
    engines = {}
    for r in part["regions"]:
        i, j = ORDER.index(r["first_node"]), ORDER.index(r["last_node"])
        assert j - i + 1 == r["nodes"], r
        for n in ORDER[i:j + 1]:
            assert n not in engines, (n, part)
            engines[n] = r["engine"]
    assert sorted(engines) == sorted(ORDER), part
    return engines


def check_consistent(part):
    assert part["nodes"] == sum(part["node_counts"].values()), part
    assert part["nodes"] == sum(r["nodes"] for r in part["regions"]), part
    for i, r in enumerate(part["regions"]):
        assert r["id"] == i and r["graph"] == "conv_neg_conv", r
        assert r["engine"] in part["node_counts"], r
    # Maximal: two neighbouring regions never share an engine.
    for a, b in zip(part["regions"], part["regions"][1:]):
        assert a["engine"] != b["engine"], (a, b)


def run(gbx, model, work, name, env):
    out_dir = os.path.join(work, "out_" + name)
    cmd = [gbx, "run", model, "--input", "x=" + os.path.join(work, "x.npy"), "--output-dir", out_dir]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    print("$ " + " ".join(cmd) + "\n" + r.stdout + r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: run exited {r.returncode}")
    return np.load(os.path.join(out_dir, "y.npy"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--work-dir", required=True)
    a = p.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    build(os.path.join(a.work_dir, "model.onnx"))
    env = {k: v for k, v in os.environ.items() if k != "GEARBOX_ENGINES"}

    default_gbm, default = compile_model(a.gearbox, a.work_dir, "default", [], env)
    forced_gbm, forced = compile_model(a.gearbox, a.work_dir, "forced", ["--engine", "Conv=cpu.ref"], env)
    print("default:", json.dumps(default))
    print("forced:", json.dumps(forced))
    check_consistent(default)
    check_consistent(forced)
    # The default list (runtime/session.h kDefaultEngines): every engine, cpu.dnnl before cpu.ref.
    engines = default["engines"]
    assert sorted(engines) == ["cpu.dnnl", "cpu.ref", "cpu.simd"], engines
    assert engines.index("cpu.dnnl") < engines.index("cpu.ref"), engines
    assert default["forced_nodes"] == 0, default
    d = node_engines(default)
    assert d["conv0"] == d["conv1"] == "cpu.dnnl", d
    assert forced["forced_nodes"] == 2, forced
    f = node_engines(forced)
    assert f["conv0"] == f["conv1"] == "cpu.ref", f
    assert f["neg"] == d["neg"], (f, d)  # the unforced node is placed as before

    want = run(a.gearbox, default_gbm, a.work_dir, "default", env)
    got = run(a.gearbox, forced_gbm, a.work_dir, "forced", env)
    err = float(np.max(np.abs(want - got)))
    print(f"max abs difference default vs forced: {err:.3g}")
    assert np.allclose(want, got, rtol=1e-4, atol=1e-4), err
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
