#!/usr/bin/python3
"""Custom-op plugin tests (tests/plugins/CMakeLists.txt): models using the test plugins' ops,
run through `gearbox run` and checked against numpy.

  check_plugins.py generate DIR                 the models and inputs
  check_plugins.py run --gearbox G --data DIR [--env-op-path P | --op-path P] [--beta B]
                                                run swiglu.onnx (or swiglu_beta.onnx), compare to numpy
  check_plugins.py doctor --gearbox G --data DIR --op-path P
                                                doctor MODEL lists the op path and the plugin's ops
  check_plugins.py unsupported --gearbox G --data DIR --op-path P
                                                OP_UNSUPPORTED lists the op path and the loaded plugins
  check_plugins.py gbm --gearbox G --data DIR --op-path P
                                                compile to .gbm with the plugin, run it (numpy), and
                                                without the plugin: PLUGIN_MISSING naming it and the version it was compiled with
  check_plugins.py profile --gearbox G --data DIR --op-path P
                                                the profile counts the plugin's cost function's FLOPs
"""
import csv
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper


def save(model, path):
    onnx.checker.check_model(model)
    onnx.save(model, path)


def unary_model(op, domain, x_dims, y_dims, dtype=TensorProto.FLOAT, **attrs):
    node = helper.make_node(op, ["x"], ["y"], name=op.lower() + "_0", domain=domain, **attrs)
    graph = helper.make_graph([node], op.lower(), [helper.make_tensor_value_info("x", dtype, x_dims)],
                              [helper.make_tensor_value_info("y", dtype, y_dims)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(domain, 1)])


def swiglu_ref(x, beta=1.0):
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    return a / (1 + np.exp(-beta * a)) * b


def generate(d):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(7)
    save(unary_model("SwiGLU", "com.example", [3, 5, 8], [3, 5, 4]), os.path.join(d, "swiglu.onnx"))
    save(unary_model("SwiGLU", "com.example", [4, 6], [4, 3], TensorProto.DOUBLE, beta=1.5),
         os.path.join(d, "swiglu_beta.onnx"))
    # An odd last dim: the plugin's shape function refuses it.
    save(unary_model("SwiGLU", "com.example", [2, 7], [2, 3]), os.path.join(d, "swiglu_odd.onnx"))
    save(unary_model("Twice", "com.example", [2, 3], [2, 3]), os.path.join(d, "twice.onnx"))
    np.save(os.path.join(d, "x.npy"), rng.standard_normal((3, 5, 8)).astype(np.float32))
    np.save(os.path.join(d, "x_beta.npy"), rng.standard_normal((4, 6)))
    np.save(os.path.join(d, "x_odd.npy"), rng.standard_normal((2, 7)).astype(np.float32))
    np.save(os.path.join(d, "x_twice.npy"), rng.standard_normal((2, 3)).astype(np.float32))


def gearbox(cmd, env_op_path=None):
    env = dict(os.environ)
    env.pop("GEARBOX_OP_PATH", None)
    if env_op_path is not None:
        env["GEARBOX_OP_PATH"] = env_op_path
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if p.returncode < 0 or p.returncode >= 128:
        sys.exit(f"FAIL: {cmd} was killed (status {p.returncode}):\n{p.stderr}")
    return p


def check_y(y, x, beta=1.0):
    want = swiglu_ref(x, beta)
    if y.shape != want.shape or y.dtype != x.dtype:
        sys.exit(f"FAIL: y is {y.dtype}{y.shape}, numpy gives {want.dtype}{want.shape}")
    tol = 1e-12 if x.dtype == np.float64 else 1e-5
    err = np.max(np.abs(y - want))
    if not np.allclose(y, want, rtol=tol, atol=tol):
        sys.exit(f"FAIL: max |y - numpy| = {err}")
    return err


def run(a):
    beta = a.beta is not None
    model = os.path.join(a.data, "swiglu_beta.onnx" if beta else "swiglu.onnx")
    xfile = os.path.join(a.data, "x_beta.npy" if beta else "x.npy")
    with tempfile.TemporaryDirectory() as out:
        cmd = [a.gearbox, "run", model, "--input", "x=" + xfile, "--output-dir", out]
        if a.op_path:
            cmd += ["--op-path", a.op_path]
        p = gearbox(cmd, a.env_op_path)
        if p.returncode != 0:
            sys.exit(f"FAIL: gearbox run exited {p.returncode}:\n{p.stderr}")
        y = np.load(os.path.join(out, "y.npy"))
    err = check_y(y, np.load(xfile), a.beta if beta else 1.0)
    print(f"PASS: {os.path.basename(model)} matches numpy (max abs error {err:.3g})")


def doctor(a):
    model = os.path.join(a.data, "swiglu.onnx")
    p = gearbox([a.gearbox, "doctor", model, "--op-path", a.op_path])
    out = p.stdout + p.stderr
    for want in ["op path searched: " + a.op_path, "swiglu 1.2.0", "com.example.SwiGLU (opset 1+)",
                 "engine plugin.swiglu"]:
        if want not in out:
            sys.exit(f"FAIL: doctor's output lacks '{want}':\n{out}")
    line = [l for l in out.splitlines() if "model.partition" in l]
    if not line or "PASS" not in line[0]:
        sys.exit(f"FAIL: doctor does not PASS the model's partition with the plugin:\n{out}")
    if "no custom-op plugin loader" in out:
        sys.exit(f"FAIL: doctor still says nothing loads GEARBOX_OP_PATH:\n{out}")
    print("PASS: doctor lists the op path and the plugin's ops")


def unsupported(a):
    # twice.onnx needs com.example.Twice, which the swiglu plugin on the path lacks.
    p = gearbox([a.gearbox, "run", os.path.join(a.data, "twice.onnx"), "--input",
                 "x=" + os.path.join(a.data, "x_twice.npy"), "--op-path", a.op_path])
    for want in ["OP_UNSUPPORTED", "operator Twice (domain com.example, opset 1)", "op path searched: " + a.op_path,
                 "plugins loaded: swiglu 1.2.0 (com.example.SwiGLU (opset 1+))"]:
        if want not in p.stderr:
            sys.exit(f"FAIL: the error lacks '{want}' (exit {p.returncode}):\n{p.stderr}")
    if p.returncode == 0:
        sys.exit("FAIL: gearbox run succeeded without a kernel for com.example.Twice")
    print("PASS: OP_UNSUPPORTED lists the op path and the loaded plugins")


def gbm(a):
    xfile = os.path.join(a.data, "x.npy")
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "swiglu.gbm")
        p = gearbox([a.gearbox, "compile", os.path.join(a.data, "swiglu.onnx"), "-o", model, "--op-path", a.op_path])
        if p.returncode != 0:
            sys.exit(f"FAIL: gearbox compile exited {p.returncode}:\n{p.stderr}")
        p = gearbox([a.gearbox, "run", model, "--input", "x=" + xfile, "--output-dir", work, "--op-path", a.op_path])
        if p.returncode != 0:
            sys.exit(f"FAIL: gearbox run of the .gbm exited {p.returncode}:\n{p.stderr}")
        err = check_y(np.load(os.path.join(work, "y.npy")), np.load(xfile))
        p = gearbox([a.gearbox, "run", model, "--input", "x=" + xfile])
        for want in ["PLUGIN_MISSING", "'swiglu' 1.2.0 (com.example.SwiGLU)"]:
            if want not in p.stderr:
                sys.exit(f"FAIL: the .gbm's load without its plugin lacks '{want}' (exit {p.returncode}):\n{p.stderr}")
        if p.returncode == 0:
            sys.exit("FAIL: the .gbm ran without its plugin")
    print(f"PASS: the .gbm runs with its plugin (max abs error {err:.3g}) and names it when it is missing")


def profile(a):
    loops = 3
    with tempfile.TemporaryDirectory() as work:
        p = gearbox([a.gearbox, "profile", os.path.join(a.data, "swiglu.onnx"), "--input",
                     "x=" + os.path.join(a.data, "x.npy"), "--op-path", a.op_path, "--output-dir", work,
                     "--loop", str(loops), "--warmup", "0"])
        if p.returncode != 0:
            sys.exit(f"FAIL: gearbox profile exited {p.returncode}:\n{p.stderr}")
        with open(os.path.join(work, "op_summary.csv")) as f:
            rows = [r for r in csv.DictReader(f) if r["kind"] == "node" and r["name"] == "swiglu_0"]
    if not rows or rows[0]["engine"] != "plugin.swiglu":
        sys.exit(f"FAIL: no node row for swiglu_0 on plugin.swiglu: {rows}")
    # The plugin's cost function: 5 FLOPs per output element; y is [3, 5, 4].
    want = int(rows[0]["calls"]) * 5 * 3 * 5 * 4
    if float(rows[0]["flops"]) != want:
        sys.exit(f"FAIL: the profile counts {rows[0]['flops']} FLOPs, the plugin's cost function gives {want}")
    print(f"PASS: the profile counts the plugin's {want} FLOPs")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["generate", "run", "doctor", "unsupported", "gbm", "profile"])
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--gearbox")
    ap.add_argument("--data")
    ap.add_argument("--op-path")
    ap.add_argument("--env-op-path")
    ap.add_argument("--beta", type=float)
    a = ap.parse_args()
    if a.what == "generate":
        generate(a.dir)
    else:
        {"run": run, "doctor": doctor, "unsupported": unsupported, "gbm": gbm, "profile": profile}[a.what](a)


if __name__ == "__main__":
    main()
