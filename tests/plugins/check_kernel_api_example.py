#!/usr/bin/python3
"""The out-of-tree plugin example (examples/plugin_kernel_api: com.example.SwiGLU and
com.example.RotaryEmbedding written with the kernel API), end to end (tests/plugins/CMakeLists.txt):

  check_kernel_api_example.py --source DIR --gearbox G --work W (--package-dir D | --install-from BUILD)

1. configures and builds the example with its own CMakeLists.txt and find_package(gearbox):
   from the build tree's package (--package-dir BUILD) or from a `cmake --install` of the build
   tree into W/prefix (--install-from BUILD; then that prefix's bin/gearbox runs the steps below);
2. exports the torch model that uses the two ops (export_model.py: torch.onnx.export with custom
   symbolics) and numpy's answer;
3. runs it with the plugin found through GEARBOX_OP_PATH (its folder) against numpy;
4. profiles it: the plugin's nodes run on plugin.example_ops with the FLOPs of its cost
   functions and a roofline classification (op_summary.csv), and the roofline plot names them;
5. compiles it to .gbm and runs that (numpy again).
"""
import argparse
import csv
import os
import shutil
import subprocess
import sys

import numpy as np


def sh(cmd, env=None, what=None):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"FAIL: {what or cmd[0]} exited {p.returncode}: {' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def check(y, want, what):
    err = float(np.max(np.abs(y - want)))
    if y.shape != want.shape or not np.allclose(y, want, rtol=1e-4, atol=1e-5):
        sys.exit(f"FAIL: {what}: y {y.dtype}{y.shape} differs from numpy {want.shape} (max abs error {err})")
    print(f"PASS: {what} matches numpy (max abs error {err:.3g})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--gearbox", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--python", default=sys.executable)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--package-dir")
    g.add_argument("--install-from")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)

    # 1. the plugin, built out of tree
    if a.install_from:
        prefix = os.path.join(a.work, "prefix")
        sh(["cmake", "--install", a.install_from, "--prefix", prefix], what="cmake --install")
        package = ["-DCMAKE_PREFIX_PATH=" + prefix]
        a.gearbox = os.path.join(prefix, "bin", "gearbox")  # the installed gearbox runs it too
    else:
        package = ["-Dgearbox_DIR=" + a.package_dir]
    build = os.path.join(a.work, "build")
    sh(["cmake", "-S", a.source, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"] + package,
       what="configuring the example")
    sh(["cmake", "--build", build], what="building the example")
    ops = os.path.join(a.work, "ops")
    os.makedirs(ops)
    shutil.copy(os.path.join(build, "libexample_ops.so"), ops)
    print(f"PASS: the example builds with find_package(gearbox) ({'install' if a.install_from else 'build tree'})")

    # 2. the model
    data = os.path.join(a.work, "data")
    sh([a.python, os.path.join(a.source, "export_model.py"), data], what="export_model.py")
    model, xfile = os.path.join(data, "model.onnx"), os.path.join(data, "x.npy")
    want = np.load(os.path.join(data, "y_ref.npy"))
    env = dict(os.environ, GEARBOX_OP_PATH=ops)

    # 3. run through the op path
    out = os.path.join(a.work, "run")
    sh([a.gearbox, "run", model, "--input", "x=" + xfile, "--output-dir", out], env=env, what="gearbox run")
    check(np.load(os.path.join(out, "y.npy")), want, "the ONNX model run with the plugin from GEARBOX_OP_PATH")

    # 4. profile
    prof = os.path.join(a.work, "profile")
    sh([a.gearbox, "profile", model, "--input", "x=" + xfile, "--output-dir", prof, "--loop", "2", "--warmup", "0"],
       env=env, what="gearbox profile")
    with open(os.path.join(prof, "op_summary.csv")) as f:
        rows = {r["op_type"]: r for r in csv.DictReader(f) if r["kind"] == "node"}
    # The cost functions (example_ops.cc): SwiGLU 5 FLOPs per output element of [2, 6, 32];
    # RotaryEmbedding 3 per element + 40 per pair of [2, 6, 32].
    n = 2 * 6 * 32
    for op, flops in [("SwiGLU", 5 * n), ("RotaryEmbedding", 3 * n + 20 * n)]:
        r = rows.get("com.example." + op)
        if not r or r["engine"] != "plugin.example_ops":
            sys.exit(f"FAIL: no {op} node on plugin.example_ops in op_summary.csv: {r}")
        if float(r["flops"]) != int(r["calls"]) * flops:
            sys.exit(f"FAIL: the profile counts {r['flops']} FLOPs for {op}, its cost function {int(r['calls']) * flops}")
        if not float(r["arithmetic_intensity"]) > 0 or r["bound"] not in ("memory", "compute", "unknown"):
            sys.exit(f"FAIL: {op}'s roofline columns are empty: {r}")
    with open(os.path.join(prof, "report.html")) as f:
        html = f.read()
    roofline = html[html.find("<h2>Roofline</h2>"):]
    for op in ("SwiGLU", "RotaryEmbedding"):
        if op not in roofline:
            sys.exit(f"FAIL: the roofline plot of report.html does not show {op}")
    print("PASS: the profile shows both plugin ops with their cost functions' FLOPs on the roofline")

    # 5. compile to .gbm and run it
    gbm = os.path.join(a.work, "model.gbm")
    sh([a.gearbox, "compile", model, "-o", gbm], env=env, what="gearbox compile")
    out = os.path.join(a.work, "run_gbm")
    sh([a.gearbox, "run", gbm, "--input", "x=" + xfile, "--output-dir", out], env=env, what="gearbox run (.gbm)")
    check(np.load(os.path.join(out, "y.npy")), want, "the compiled .gbm")


if __name__ == "__main__":
    main()
