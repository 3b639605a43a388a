#!/usr/bin/python3
"""Write the models and inputs that tests/serve feeds to `gearbox serve` and `gearbox run`.

Usage: make_serve_models.py OUT_DIR

Layout of OUT_DIR:
  mlp/model.onnx, x.npy     y = (relu(x @ W1 + b1)) @ W2 + b2, x float32 [N,4] (N symbolic, so
                            dynamic batching applies); outputs y [N,3] and h [N,8]
  dtypes/model.onnx, *.npy  one Identity per KServe datatype gearbox serves (in_<t> -> out_<t>),
                            shape [2,3], for the JSON and binary codecs of every datatype
  fixed/model.onnx          z = x + 1 with x float32 [2,2] (a fixed first dim: no batching)
  colsum/model.onnx         s = ReduceSum(x, axes=[0], keepdims=0), x float32 [N,4]: a symbolic
                            first dim, but the output [4] is not batched along dim 0
  loop/model.onnx           y = Loop M times (x = x * 0.5 + 1), M int64 scalar and x float32 [2,3]
                            inputs: M = 10^12 runs for hours (request deadlines, SIGTERM grace)
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, checker

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from loop_model import halving_loop_model  # noqa: E402  (scripts/ is not a package)

OPSET = 14
DTYPES = {  # suffix: (numpy dtype, ONNX type)
    "fp32": (np.float32, TensorProto.FLOAT),
    "fp64": (np.float64, TensorProto.DOUBLE),
    "fp16": (np.float16, TensorProto.FLOAT16),
    "int8": (np.int8, TensorProto.INT8),
    "int16": (np.int16, TensorProto.INT16),
    "int32": (np.int32, TensorProto.INT32),
    "int64": (np.int64, TensorProto.INT64),
    "uint8": (np.uint8, TensorProto.UINT8),
    "uint16": (np.uint16, TensorProto.UINT16),
    "uint32": (np.uint32, TensorProto.UINT32),
    "uint64": (np.uint64, TensorProto.UINT64),
    "bool": (np.bool_, TensorProto.BOOL),
}


def save(model, path):
    checker.check_model(model)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def mlp(out):
    rng = np.random.default_rng(7)
    w1 = rng.standard_normal((4, 8)).astype(np.float32)
    b1 = rng.standard_normal(8).astype(np.float32)
    w2 = rng.standard_normal((8, 3)).astype(np.float32)
    b2 = rng.standard_normal(3).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["m2"]),
        helper.make_node("Add", ["m2", "b2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("h", TensorProto.FLOAT, ["N", 8])],
        [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), os.path.join(out, "mlp/model.onnx"))
    np.save(os.path.join(out, "mlp/x.npy"), rng.standard_normal((2, 4)).astype(np.float32))


def dtypes(out):
    rng = np.random.default_rng(11)
    os.makedirs(os.path.join(out, "dtypes"), exist_ok=True)
    inputs, outputs, nodes = [], [], []
    for suffix, (np_t, onnx_t) in DTYPES.items():
        inputs.append(helper.make_tensor_value_info("in_" + suffix, onnx_t, [2, 3]))
        outputs.append(helper.make_tensor_value_info("out_" + suffix, onnx_t, [2, 3]))
        nodes.append(helper.make_node("Identity", ["in_" + suffix], ["out_" + suffix]))
        if np_t == np.bool_:
            a = rng.integers(0, 2, (2, 3)).astype(np.bool_)
        elif np.issubdtype(np_t, np.integer):
            info = np.iinfo(np_t)
            # the extremes of the type plus random values: the codec must carry them exactly
            a = rng.integers(max(info.min, -1000), min(info.max, 1000), (2, 3)).astype(np_t)
            a.flat[0], a.flat[1] = info.min, info.max
        else:
            a = (rng.standard_normal((2, 3)) * 10).astype(np_t)
        np.save(os.path.join(out, "dtypes", "in_" + suffix + ".npy"), a)
    graph = helper.make_graph(nodes, "dtypes", inputs, outputs)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), os.path.join(out, "dtypes/model.onnx"))


def fixed(out):
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["z"])], "fixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 2])],
        [numpy_helper.from_array(np.ones((1,), np.float32), "one")])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), os.path.join(out, "fixed/model.onnx"))


def colsum(out):
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0)], "colsum",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(np.array([0], np.int64), "axes")])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), os.path.join(out, "colsum/model.onnx"))


def loop(out):
    save(halving_loop_model(OPSET), os.path.join(out, "loop/model.onnx"))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    mlp(out)
    dtypes(out)
    fixed(out)
    colsum(out)
    loop(out)


if __name__ == "__main__":
    main()
