#!/usr/bin/python3
"""`gearbox run` accepts ONNX Runtime's one input leniency and nothing more (issue 25).

The model is y = s * v + x with s declared as a scalar [], v declared [1] and x [3]. Feeding
s a one-element 1-D array and v a scalar runs and gives numpy's s * v + x; feeding s a [2]
array, v a [1,1] array, or x a scalar still ends in INPUT_SHAPE_MISMATCH.

Usage: check_scalar_leniency.py --gearbox PATH --work-dir DIR
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gearbox", required=True)
    ap.add_argument("--work-dir", required=True)
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    graph = helper.make_graph(
        [helper.make_node("Mul", ["s", "v"], ["sv"], name="mul"),
         helper.make_node("Add", ["sv", "x"], ["y"], name="add")],
        "scalar_inputs",
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [1]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model_path = os.path.join(a.work_dir, "scalar_inputs.onnx")
    onnx.save(model, model_path)

    def npy(name, arr):
        path = os.path.join(a.work_dir, name + ".npy")
        np.save(path, np.asarray(arr, dtype=np.float32))
        return path

    s1 = npy("s_1", [2.5])        # [1] for the declared scalar
    v0 = npy("v_0", 4.0)          # scalar for the declared [1]
    x = npy("x", [1.0, -2.0, 3.0])
    out_dir = os.path.join(a.work_dir, "out")

    def run(s, v, xx, out=None):
        cmd = [a.gearbox, "run", model_path, "--input", "s=" + s, "--input", "v=" + v, "--input", "x=" + xx]
        if out:
            cmd += ["--output-dir", out]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    r = run(s1, v0, x, out_dir)
    check(r.returncode == 0, "[1] for a scalar and a scalar for [1] run (rc %d: %s)" % (r.returncode, r.stderr.strip()))
    if r.returncode == 0:
        y = np.load(os.path.join(out_dir, "y.npy"))
        want = np.float32(2.5) * np.float32(4.0) + np.load(x)
        check(y.shape == (3,) and np.array_equal(y, want), "y = s * v + x: got %s, want %s" % (y, want))

    for what, args in (("[2] for the scalar s", (npy("s_2", [1.0, 2.0]), v0, x)),
                       ("[1,1] for the [1] input v", (s1, npy("v_11", [[4.0]]), x)),
                       ("a scalar for the [3] input x", (s1, v0, npy("x_0", 1.0)))):
        r = run(*args)
        check(r.returncode != 0 and "INPUT_SHAPE_MISMATCH" in r.stderr,
              "%s is refused with INPUT_SHAPE_MISMATCH (rc %d: %s)" % (what, r.returncode, r.stderr.strip()))
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
