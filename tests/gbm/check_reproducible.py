"""Reproducible .gbm (issue 30 item 4): `gearbox compile` of the same model with the same options,
run twice in separate processes, must write byte-identical files, and so must a compile run
from another working directory, with another thread count, at another clock time
(SOURCE_DATE_EPOCH unset, then set), and with the model at another path (a copy in another folder).

The models: a small CNN (Conv+BatchNorm+Relu+Gemm: the optimizer's folding and fusion passes
run and the memory plan is made), a Loop whose body holds an If (subgraphs two deep) and a
model whose 1 MiB weight lives in an external data file.

Usage: check_reproducible.py --gearbox PATH --work-dir DIR
"""
import argparse
import filecmp
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def cnn_model():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "scale"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "bias"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "mean"),
             numpy_helper.from_array(rng.random(8).astype(np.float32) + 0.5, "var"),
             numpy_helper.from_array(rng.standard_normal((8 * 6 * 6, 10)).astype(np.float32), "fc_w"),
             numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fc_b"),
             numpy_helper.from_array(np.array([1, -1], np.int64), "flat")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["bn"], name="bn"),
             helper.make_node("Relu", ["bn"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "flat"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], name="fc")]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


def loop_if_model():
    """y = Loop M times over x: x = (sum(x) > 0 ? x * 0.5 : x + 1); the If inside the Loop body."""
    half = numpy_helper.from_array(np.full((2, 3), 0.5, np.float32), "half")
    one = numpy_helper.from_array(np.full((2, 3), 1.0, np.float32), "one")
    then_g = helper.make_graph([helper.make_node("Mul", ["x_in", "half"], ["t"], name="then_mul")], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])])
    else_g = helper.make_graph([helper.make_node("Add", ["x_in", "one"], ["e"], name="else_add")], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3])])
    zero = numpy_helper.from_array(np.array(0, np.float32), "zero")
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"], name="keep_going"),
         helper.make_node("ReduceSum", ["x_in"], ["s"], name="sum", keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["pos"], name="positive"),
         helper.make_node("If", ["pos"], ["x_out"], name="branch", then_branch=then_g, else_branch=else_g)],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [2, 3])],
        [zero])
    g = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "x"], ["y"], name="loop", body=body)], "loop_if",
        [helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [half, one])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


def external_model(folder):
    """y = MatMul(x, W) + b with W (512 x 512 float32, 1 MiB) in weights.bin beside the model."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((512, 512)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"), helper.make_node("Add", ["m", "b"], ["y"], name="add")],
        "external", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 512])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(rng.standard_normal(512).astype(np.float32), "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.save_model(m, os.path.join(folder, "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=1024)
    return os.path.join(folder, "model.onnx")


def compile_model(gearbox, model, out, cwd, env_extra, extra_args=()):
    env = dict(os.environ)
    env.pop("SOURCE_DATE_EPOCH", None)
    env.update(env_extra)
    cmd = [gearbox, "compile", model, "-o", out, "--quiet", *extra_args]
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stdout}{r.stderr}")


def first_difference(a, b):
    x, y = open(a, "rb").read(), open(b, "rb").read()
    for i in range(min(len(x), len(y))):
        if x[i] != y[i]:
            return f"first difference at byte {i} of {len(x)} / {len(y)}"
    return f"sizes {len(x)} and {len(y)}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gearbox", required=True)
    ap.add_argument("--work-dir", required=True)
    a = ap.parse_args()
    gearbox = os.path.abspath(a.gearbox)
    work = os.path.abspath(a.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    models = {}
    for name in ("cnn", "loop_if", "external"):
        os.makedirs(os.path.join(work, name, "src"))
    onnx.save(cnn_model(), os.path.join(work, "cnn", "src", "model.onnx"))
    models["cnn"] = os.path.join(work, "cnn", "src", "model.onnx")
    onnx.save(loop_if_model(), os.path.join(work, "loop_if", "src", "model.onnx"))
    models["loop_if"] = os.path.join(work, "loop_if", "src", "model.onnx")
    models["external"] = external_model(os.path.join(work, "external", "src"))

    failures = 0
    for name, model in models.items():
        d = os.path.join(work, name)
        # The same model at another path (its external data copied along).
        moved = os.path.join(d, "moved")
        shutil.copytree(os.path.dirname(model), moved)
        other_cwd = os.path.join(d, "elsewhere")
        os.makedirs(other_cwd)
        variants = [
            ("again", model, d, {"GEARBOX_NUM_THREADS": "2"}),
            ("other working directory", model, other_cwd, {"GEARBOX_NUM_THREADS": "2"}),
            ("1 thread", model, d, {"GEARBOX_NUM_THREADS": "1"}),
            ("SOURCE_DATE_EPOCH set", model, d, {"GEARBOX_NUM_THREADS": "2", "SOURCE_DATE_EPOCH": "1700000000"}),
            ("model at another path", os.path.join(moved, "model.onnx"), d, {"GEARBOX_NUM_THREADS": "2"}),
        ]
        ref = os.path.join(d, "ref.gbm")
        compile_model(gearbox, model, ref, d, {"GEARBOX_NUM_THREADS": "2"})
        for i, (what, m, cwd, env) in enumerate(variants):
            out = os.path.join(d, f"v{i}.gbm")
            compile_model(gearbox, m, out, cwd, env)
            if filecmp.cmp(ref, out, shallow=False):
                print(f"ok: {name}: {what}: identical ({os.path.getsize(out)} bytes)")
            else:
                failures += 1
                print(f"FAIL: {name}: {what}: {first_difference(ref, out)}")
        # The control: other options give another file (a comparison that cannot fail proves nothing).
        out = os.path.join(d, "generic.gbm")
        compile_model(gearbox, model, out, d, {"GEARBOX_NUM_THREADS": "2"}, ["--target", "generic"])
        if filecmp.cmp(ref, out, shallow=False) and name == "cnn":
            failures += 1
            print(f"FAIL: {name}: --target generic wrote the same bytes as --target native")
    if failures:
        sys.exit(f"{failures} compile(s) were not byte-identical")
    print("all compiles byte-identical")


if __name__ == "__main__":
    main()
