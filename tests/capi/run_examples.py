#!/usr/bin/env python3
"""Builds examples/ against the INSTALLED gearbox package and runs both programs.

1. cmake --install BUILD_DIR --prefix WORK/prefix
2. a separate CMake project (examples/) configured with CMAKE_PREFIX_PATH=WORK/prefix, so it
   finds gearbox only through find_package(gearbox) and the installed files
3. runs c_example and cpp_example on z = Relu(x + y) (x, y float [batch, 3]) and compares
   their printed outputs with numpy on the same input pattern
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

ap = argparse.ArgumentParser()
ap.add_argument("--build-dir", required=True)
ap.add_argument("--examples", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--cmake", default="cmake")
ap.add_argument("--generator", default="Ninja")
a = ap.parse_args()

shutil.rmtree(a.work, ignore_errors=True)
os.makedirs(a.work)
prefix = os.path.join(a.work, "prefix")


def sh(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, **kw)
    if p.returncode != 0:
        print("$", " ".join(cmd), "\n", p.stdout[-4000:], p.stderr[-4000:])
        sys.exit(f"command failed with exit {p.returncode}")
    return p


sh([a.cmake, "--install", a.build_dir, "--prefix", prefix])
for f in ["include/gearbox/gearbox.h", "include/gearbox/gearbox.hpp", "lib/cmake/gearbox/gearboxConfig.cmake"]:
    if not os.path.exists(os.path.join(prefix, f)):
        sys.exit(f"not installed: {f}")
build = os.path.join(a.work, "build")
# Nothing from the gearbox tree is visible to this project except the installed prefix.
sh([a.cmake, "-S", a.examples, "-B", build, "-G", a.generator, "-DCMAKE_BUILD_TYPE=Release",
    f"-DCMAKE_PREFIX_PATH={prefix}"])
sh([a.cmake, "--build", build])

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 3])
g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Relu", ["s"], ["z"])],
                      "add_relu", [x, y], [z])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
model = os.path.join(a.work, "add_relu.onnx")
onnx.save(m, model)


def pattern(i, n):  # what both examples write into input i
    return np.array([((e + 3 * i) % 7 - 3) * 0.5 for e in range(n)], dtype=np.float32)


want = np.maximum(pattern(0, 6) + pattern(1, 6), 0)
failures = 0
for prog in ["c_example", "cpp_example"]:
    p = subprocess.run([os.path.join(build, prog), model], capture_output=True, text=True, timeout=60)
    print(f"--- {prog} (exit {p.returncode})\n{p.stdout}{p.stderr}")
    if p.returncode != 0:
        failures += 1
        continue
    line = next((l for l in p.stdout.splitlines() if l.startswith("output z:")), None)
    got = np.array([float(v) for v in line.split(":")[1].split()], dtype=np.float32) if line else None
    if got is None or got.shape != want.shape or not np.allclose(got, want, atol=1e-6):
        print(f"{prog}: output {got} != numpy {want}")
        failures += 1
    expected_error = "4002" if prog == "c_example" else "4001"
    if f"status {expected_error}" not in p.stdout:
        print(f"{prog}: did not report error {expected_error}")
        failures += 1
sys.exit(1 if failures else 0)
