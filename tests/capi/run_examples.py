#!/usr/bin/env python3
"""Builds examples/ against a gearbox package, the way a user would, and runs both programs.

Where gearbox comes from (one of):
  --install-from BUILD   cmake --install BUILD --prefix WORK/prefix, then that prefix
  --prefix PATH          an existing prefix (the build tree itself: find_package(gearbox) from the
                         build tree; or the usr/ of a .deb unpacked by dpkg -x)
How the examples are built:
  * always: a separate CMake project (examples/) configured with CMAKE_PREFIX_PATH=<prefix>, so it
    finds gearbox only through find_package(gearbox)
  * with --pkg-config DIR: also compiled directly with `pkg-config --cflags --libs gearbox`
    (PKG_CONFIG_PATH=DIR), nothing else on the command line
Each program runs on z = Relu(x + y) (x, y float [batch, 3]); its printed outputs are compared
with numpy on the same input pattern, and its error report with the expected code. The network
API's examples built with find_package (train_mlp in eager mode, train_cnn in graph mode, both
on libgearbox_nn.so) train on sklearn's digits (scripts/export_digits.py) and must reach the
held-out accuracy the in-tree examples' tests ask (chance is 10%): the MLP, 20 epochs, 85%
(it reaches ~91%); the CNN, 2 epochs, 90% (~96%).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

ap = argparse.ArgumentParser()
src = ap.add_mutually_exclusive_group(required=True)
src.add_argument("--install-from", metavar="BUILD")
src.add_argument("--prefix")
ap.add_argument("--examples", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--pkg-config", metavar="DIR")
ap.add_argument("--cmake", default="cmake")
ap.add_argument("--generator", default="Ninja")
a = ap.parse_args()

shutil.rmtree(a.work, ignore_errors=True)
os.makedirs(a.work)


def sh(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    if p.returncode != 0:
        print("$", " ".join(cmd), "\n", p.stdout[-4000:], p.stderr[-4000:])
        sys.exit(f"command failed with exit {p.returncode}")
    return p


if a.install_from:
    prefix = os.path.join(a.work, "prefix")
    sh([a.cmake, "--install", a.install_from, "--prefix", prefix])
    for f in ["include/gearbox/gearbox.h", "include/gearbox/gearbox.hpp", "lib/cmake/gearbox/gearboxConfig.cmake",
              "lib/pkgconfig/gearbox.pc"]:
        if not os.path.exists(os.path.join(prefix, f)):
            sys.exit(f"not installed: {f}")
else:
    prefix = os.path.abspath(a.prefix)

programs = {}  # "how built / name" -> path
build = os.path.join(a.work, "build")
# Nothing from the gearbox tree is visible to this project except what the prefix holds.
sh([a.cmake, "-S", a.examples, "-B", build, "-G", a.generator, "-DCMAKE_BUILD_TYPE=Release",
    f"-DCMAKE_PREFIX_PATH={prefix}"])
sh([a.cmake, "--build", build])
for prog in ["c_example", "cpp_example"]:
    programs[f"find_package/{prog}"] = os.path.join(build, prog)

env = dict(os.environ)
if a.pkg_config:
    env["PKG_CONFIG_PATH"] = os.path.abspath(a.pkg_config)
    env.pop("PKG_CONFIG_LIBDIR", None)
    flags = sh(["pkg-config", "--cflags", "--libs", "gearbox"], env).stdout.split()
    print("pkg-config --cflags --libs gearbox:", " ".join(flags))
    libdir = next(f[2:] for f in flags if f.startswith("-L"))
    # The programs find libgearbox where pkg-config said it is (not on the default path for an
    # unpacked .deb).
    env["LD_LIBRARY_PATH"] = libdir + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    pc = os.path.join(a.work, "pkg-config")
    os.makedirs(pc)
    for prog, compiler, source, std in [("c_example", "cc", "c_example.c", "-std=c11"),
                                        ("cpp_example", "c++", "cpp_example.cc", "-std=c++17")]:
        out = os.path.join(pc, prog)
        sh([compiler, std, "-O1", os.path.join(a.examples, source), "-o", out] + flags, env)
        programs[f"pkg-config/{prog}"] = out

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 3])
g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Relu", ["s"], ["z"])],
                      "add_relu", [x, y], [z])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
model = os.path.join(a.work, "add_relu.onnx")
digits = os.path.join(a.work, "digits")
onnx.save(m, model)


def pattern(i, n):  # what both examples write into input i
    return np.array([((e + 3 * i) % 7 - 3) * 0.5 for e in range(n)], dtype=np.float32)


want = np.maximum(pattern(0, 6) + pattern(1, 6), 0)
failures = 0
for label, path in programs.items():
    p = subprocess.run([path, model], capture_output=True, text=True, timeout=60, env=env)
    print(f"--- {label} (exit {p.returncode})\n{p.stdout}{p.stderr}")
    if p.returncode != 0:
        failures += 1
        continue
    line = next((l for l in p.stdout.splitlines() if l.startswith("output z:")), None)
    got = np.array([float(v) for v in line.split(":")[1].split()], dtype=np.float32) if line else None
    if got is None or got.shape != want.shape or not np.allclose(got, want, atol=1e-6):
        print(f"{label}: output {got} != numpy {want}")
        failures += 1
    expected_error = "4002" if label.endswith("c_example") else "4001"
    if f"status {expected_error}" not in p.stdout:
        print(f"{label}: did not report error {expected_error}")
        failures += 1
# (program, arguments, the held-out accuracy tests/examples asks of the in-tree build)
trainers = {f"find_package/{prog}": ([os.path.join(build, prog), digits] + args, bar)
            for prog, args, bar in [("train_mlp", [], 85), ("train_cnn", ["2", "graph"], 90)]}
sh([sys.executable, os.path.join(a.examples, "..", "scripts", "export_digits.py"), digits])
for label, (cmd, bar) in trainers.items():
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    print(f"--- {label} (exit {p.returncode})\n{p.stdout[-1500:]}{p.stderr[-1500:]}")
    m = re.search(r"held-out accuracy: ([0-9.]+)%", p.stdout)
    if p.returncode != 0 or not m or float(m.group(1)) < bar:
        print(f"{label}: no held-out accuracy of {bar}% or more")
        failures += 1
print(f"{len(programs) + len(trainers) - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
