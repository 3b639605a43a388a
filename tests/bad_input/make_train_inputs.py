#!/usr/bin/python3
"""Models and data folders for `gearbox train`'s bad-input cases (tests/bad_input/CMakeLists.txt).

Usage: make_train_inputs.py OUT_DIR

Writes, with onnx and numpy only (no torch: a fixture that takes well under a second):
  mlp.onnx        x float[N,4] -> Gemm(W1,b1) -> Relu -> Reshape -> Gemm(W2,b2) -> logits [N,3];
                  the Reshape's shape comes from Shape of a float initializer "template", which
                  is therefore not trained
  sin.onnx        x -> Gemm(W) -> Sin -> y: Sin has no gradient in gearbox (OP_UNSUPPORTED)
  no_float.onnx   x -> Relu -> y, no initializer at all
  softmax_opset11.onnx  Gemm -> Reshape [N,2,3] -> Softmax(axis 1) at opset 11 (2-D coercion)
  good/           x.npy float32[10,4], labels.npy int64[10] (the control)
  no_input/       labels.npy only
  batch_mismatch/ x.npy [10,4], labels.npy [9]
  labels_float/   labels.npy float32[10]
  labels_2d/      labels.npy int64[10,1]
  x_float64/      x.npy float64
  x_wrong_shape/  x.npy float32[10,5]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save_model(path, nodes, inits, out_name="logits", out_dims=("N", 3)):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info(out_name, TensorProto.FLOAT, list(out_dims))
    g = helper.make_graph(nodes, "g", [x], [y], initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(m)
    onnx.save(m, path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    save_model(os.path.join(out, "mlp.onnx"), [
        helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        # Reshape to [-1, 8], the 8 read off a float initializer's shape: "template" feeds only a
        # shape computation, so it is not trained.
        helper.make_node("Shape", ["template"], ["tshape"], name="template_shape"),
        helper.make_node("Slice", ["tshape", "one", "two"], ["width"]),
        helper.make_node("Concat", ["minus_one", "width"], ["shape"], axis=0),
        helper.make_node("Reshape", ["r", "shape"], ["r2"]),
        helper.make_node("Gemm", ["r2", "W2", "b2"], ["logits"], transB=1),
    ], [("W1", f32(8, 4)), ("b1", f32(8)), ("template", f32(2, 8)), ("one", np.array([1], np.int64)),
        ("two", np.array([2], np.int64)), ("minus_one", np.array([-1], np.int64)), ("W2", f32(3, 8)),
        ("b2", f32(3))])
    save_model(os.path.join(out, "sin.onnx"), [
        helper.make_node("Gemm", ["x", "W"], ["h"], transB=1, name="fc"),
        helper.make_node("Sin", ["h"], ["y"], name="the_sine"),
    ], [("W", f32(3, 4))], out_name="y")
    # Softmax at opset 11 over [N, 2, 3] from axis 1: normalizes over both trailing axes.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 3])
    g = helper.make_graph([helper.make_node("Gemm", ["x", "W"], ["h"], transB=1),
                           helper.make_node("Reshape", ["h", "shape"], ["h3"]),
                           helper.make_node("Softmax", ["h3"], ["y"], axis=1, name="sm")], "g", [x], [y],
                          initializer=[numpy_helper.from_array(f32(6, 4), "W"),
                                       numpy_helper.from_array(np.array([-1, 2, 3], np.int64), "shape")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "softmax_opset11.onnx"))
    save_model(os.path.join(out, "no_float.onnx"), [helper.make_node("Relu", ["x"], ["y"])], [], out_name="y",
               out_dims=("N", 4))

    def folder(name, **arrays):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
        for k, a in arrays.items():
            np.save(os.path.join(d, k + ".npy"), a)

    x = f32(10, 4)
    labels = rng.integers(0, 3, 10).astype(np.int64)
    folder("good", x=x, labels=labels)
    folder("no_input", labels=labels)
    folder("batch_mismatch", x=x, labels=labels[:9])
    folder("labels_float", x=x, labels=labels.astype(np.float32))
    folder("labels_2d", x=x, labels=labels.reshape(10, 1))
    folder("x_float64", x=x.astype(np.float64), labels=labels)
    folder("x_wrong_shape", x=f32(10, 5), labels=labels)


if __name__ == "__main__":
    main()
