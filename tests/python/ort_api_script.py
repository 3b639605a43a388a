#!/usr/bin/python3
"""A script written for ONNX Runtime's Python API, nothing gearbox-specific in it: session
creation with options, input/output inspection, a run, output selection, and the errors a
caller handles. tests/python/test_ort_script.py runs it with gearbox in ONNX Runtime's place,
which is the one line `import gearbox as onnxruntime` (here: --runtime gearbox).

Usage: ort_api_script.py MODEL.onnx [--runtime onnxruntime|gearbox]
MODEL computes z = Relu(x + y) for float inputs x, y of shape [batch, 3] (the tests make it).
Prints one line per check and "ALL OK" at the end; exits 1 on the first failure.
"""
import argparse
import importlib
import sys

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("model")
p.add_argument("--runtime", default="onnxruntime")
a = p.parse_args()
onnxruntime = importlib.import_module(a.runtime)  # i.e. `import gearbox as onnxruntime`
from_state = onnxruntime.capi.onnxruntime_pybind11_state


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        sys.exit(1)


print("providers:", onnxruntime.get_available_providers())
check("CPUExecutionProvider" in onnxruntime.get_available_providers(), "CPU provider available")

opts = onnxruntime.SessionOptions()
opts.intra_op_num_threads = 2
opts.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
sess = onnxruntime.InferenceSession(a.model, sess_options=opts, providers=["CPUExecutionProvider"])

inputs = sess.get_inputs()
outputs = sess.get_outputs()
for i in inputs:
    print(f"input  {i.name} {i.type} {i.shape}")
for o in outputs:
    print(f"output {o.name} {o.type} {o.shape}")
check([i.name for i in inputs] == ["x", "y"], "input names")
check(all(i.type == "tensor(float)" for i in inputs), "input types")
check(inputs[0].shape[1] == 3 and isinstance(inputs[0].shape[0], str), "symbolic batch dim")

rng = np.random.default_rng(0)
feed = {i.name: rng.standard_normal((4, 3)).astype(np.float32) for i in inputs}
(z,) = sess.run([outputs[0].name], feed)
check(np.allclose(z, np.maximum(feed["x"] + feed["y"], 0)), "run(output_names, feed)")
all_out = sess.run(None, feed)
check(len(all_out) == 1 and np.array_equal(all_out[0], z), "run(None, feed)")
z[0, 0] = 123.0  # outputs are the caller's arrays
check(sess.run(None, feed)[0][0, 0] != 123.0, "outputs are not shared between runs")

try:
    sess.run(None, {"x": feed["x"]})
    check(False, "missing input raises")
except ValueError as e:
    check(True, f"missing input raises ValueError: {e}")
try:
    sess.run(None, {"x": feed["x"], "y": feed["y"].astype(np.float64)})
    check(False, "wrong dtype raises")
except from_state.InvalidArgument as e:
    check(True, f"wrong dtype raises InvalidArgument: {str(e)[:80]}")
try:
    sess.run(None, {"x": feed["x"], "y": feed["y"], "w": feed["y"]})
    check(False, "unknown input raises")
except from_state.InvalidArgument as e:
    check(True, f"unknown input raises InvalidArgument: {str(e)[:80]}")
try:
    onnxruntime.InferenceSession(a.model + ".does-not-exist")
    check(False, "missing file raises")
except from_state.NoSuchFile as e:
    check(True, f"missing file raises NoSuchFile: {str(e)[:80]}")
try:
    onnxruntime.InferenceSession(b"not a model")
    check(False, "bad bytes raise")
except (from_state.InvalidProtobuf, from_state.InvalidGraph, from_state.Fail) as e:
    check(True, f"bad model bytes raise {type(e).__name__}")
print("ALL OK")
