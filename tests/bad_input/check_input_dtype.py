#!/usr/bin/python3
"""A float .npy of another float dtype than its input's is converted, with a warning (issue 23).

The model is y = x * x + b in float16 (input, initializer, output). Fed a float32 .npy, `gearbox
run` converts it to float16 with a warning naming the input and --strict-input-dtype, and the
output equals numpy's float16 computation on the rounded input; with --strict-input-dtype the
same file is INPUT_DTYPE_MISMATCH (exit 1); a float64 .npy for a float32 input converts too;
an int32 .npy for a float16 input is never converted (INPUT_DTYPE_MISMATCH).

Usage: check_input_dtype.py --gearbox PATH --work-dir DIR
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def model(path, elem, np_type):
    b = np.array([0.5, -1.25, 3.0, 0.0], np_type)
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["xx"], name="square"),
         helper.make_node("Add", ["xx", "b"], ["y"], name="shift")],
        "input_dtype", [helper.make_tensor_value_info("x", elem, [2, 4])],
        [helper.make_tensor_value_info("y", elem, [2, 4])], [numpy_helper.from_array(b, "b")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return b


def run(a, *args):
    return subprocess.run([a.gearbox, "run", *args], capture_output=True, text=True, timeout=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gearbox", required=True)
    ap.add_argument("--work-dir", required=True)
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    f16 = os.path.join(a.work_dir, "f16.onnx")
    b16 = model(f16, TensorProto.FLOAT16, np.float16)
    x = np.random.default_rng(3).uniform(-4, 4, (2, 4)).astype(np.float32)
    x32 = os.path.join(a.work_dir, "x32.npy")
    np.save(x32, x)
    out = os.path.join(a.work_dir, "out16")
    r = run(a, f16, "--input", f"x={x32}", "--output-dir", out)
    check(r.returncode == 0, f"float32 data for a float16 input runs ({r.returncode}: {r.stderr[-300:]})")
    check("input 'x' is float16" in r.stderr and "--strict-input-dtype" in r.stderr,
          f"a warning names the input, its dtype and the strict flag ({r.stderr[-300:]!r})")
    if r.returncode == 0:
        y = np.load(os.path.join(out, "y.npy"))
        xh = x.astype(np.float16)
        want = xh * xh + b16  # numpy in float16, element by element, like the model
        check(y.dtype == np.float16, f"the output stays float16 ({y.dtype})")
        # Within one float16 rounding of numpy's (a fused Mul+Add may round once, not twice).
        diff = np.abs(y.astype(np.float64) - want.astype(np.float64))
        check(np.all(diff <= np.abs(want.astype(np.float64)) * 2.0**-10 + 2.0**-14),
              f"the output is numpy's float16 result (max diff {diff.max()})")
    s = run(a, f16, "--input", f"x={x32}", "--strict-input-dtype")
    check(s.returncode == 1 and "INPUT_DTYPE_MISMATCH" in s.stderr,
          f"--strict-input-dtype refuses it with INPUT_DTYPE_MISMATCH ({s.returncode}: {s.stderr[-200:]!r})")
    xi = os.path.join(a.work_dir, "xi.npy")
    np.save(xi, x.astype(np.int32))
    i = run(a, f16, "--input", f"x={xi}")
    check(i.returncode == 1 and "INPUT_DTYPE_MISMATCH" in i.stderr,
          f"int32 data for a float16 input is not converted ({i.returncode}: {i.stderr[-200:]!r})")

    f32 = os.path.join(a.work_dir, "f32.onnx")
    b32 = model(f32, TensorProto.FLOAT, np.float32)
    x64 = os.path.join(a.work_dir, "x64.npy")
    np.save(x64, x.astype(np.float64))
    out = os.path.join(a.work_dir, "out32")
    d = run(a, f32, "--input", f"x={x64}", "--output-dir", out)
    check(d.returncode == 0, f"float64 data for a float32 input runs ({d.stderr[-200:]!r})")
    if d.returncode == 0:
        y = np.load(os.path.join(out, "y.npy"))
        check(np.allclose(y, x * x + b32, rtol=1e-6, atol=0), "and gives numpy's float32 result")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
