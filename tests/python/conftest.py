"""Shared fixtures of the Python module's tests (tests/python, ctest label `python`).

ctest sets PYTHONPATH to the build tree's package (build/python), GEARBOX_BIN to the CLI and
GEARBOX_PARITY_MODEL_DIR to the exported parity models. The models the tests need besides are
built here with onnx.helper, so every expected value comes from numpy, not from gearbox.
"""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 13)]


def save(model, path):
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture(scope="session", autouse=True)
def gearbox_from_build_tree():
    import gearbox
    build_python = os.environ.get("GEARBOX_PYTHON_PATH")
    if build_python:  # the package under test, not an installed one
        assert os.path.dirname(os.path.dirname(gearbox.__file__)) == os.path.abspath(build_python), gearbox.__file__
    return gearbox


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    m = {}
    # z = Relu(x + y), x and y float [batch, 3]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 3])
    g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["s"], name="add"),
                           helper.make_node("Relu", ["s"], ["z"], name="relu")], "add_relu", [x, y], [z])
    m["add_relu"] = save(helper.make_model(g, opset_imports=OPSET), d / "add_relu.onnx")
    # Two outputs of different dtypes: a float sum and an int64 argmax.
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 4])
    total = helper.make_tensor_value_info("total", TensorProto.FLOAT, [2, 1])
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, [2, 1])
    g = helper.make_graph([helper.make_node("ReduceSum", ["a", "axes"], ["total"], keepdims=1),
                           helper.make_node("ArgMax", ["a"], ["idx"], axis=1, keepdims=1)], "two_outputs",
                          [a], [total, idx], [numpy_helper.from_array(np.array([1], np.int64), "axes")])
    m["two_outputs"] = save(helper.make_model(g, opset_imports=OPSET), d / "two_outputs.onnx")
    # out = Identity(x): the output is the input's tensor.
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5])
    oi = helper.make_tensor_value_info("out", TensorProto.FLOAT, [4, 5])
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["out"], name="identity")], "identity", [xi], [oi])
    m["identity"] = save(helper.make_model(g, opset_imports=OPSET), d / "identity.onnx")
    # An op ONNX does not have: loading it is OP_UNSUPPORTED (as in tests/bad_input).
    xs = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    ys = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    g = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["y"])], "unknown_op", [xs], [ys])
    unknown = helper.make_model(g, opset_imports=OPSET)
    unknown.ir_version = 8
    onnx.save(unknown, str(d / "unknown_op.onnx"))
    m["unknown_op"] = str(d / "unknown_op.onnx")
    # A chain of 24 MatMul+Tanh on [256, 512]: ~3 GFLOP, long enough that other Python threads
    # get the GIL while it runs (test_threads_gil.py).
    rng = np.random.default_rng(7)
    nodes, inits, prev = [], [], "x"
    for i in range(24):
        w = (rng.standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]), helper.make_node("Tanh", [f"m{i}"], [f"t{i}"])]
        prev = f"t{i}"
    nodes[-1].output[0] = "y"
    g = helper.make_graph(nodes, "matmul_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 512])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 512])], inits)
    m["matmul_chain"] = save(helper.make_model(g, opset_imports=OPSET), d / "matmul_chain.onnx")
    # A small CNN (Conv, BatchNorm folded away by the optimizer, Relu, pooling, Gemm) for the
    # threads test: several engines and kernels with OpenMP inside.
    c1 = (rng.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32)
    c2 = (rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)
    fc = (rng.standard_normal((10, 32)) * 0.2).astype(np.float32)
    inits = [numpy_helper.from_array(c1, "c1"), numpy_helper.from_array(c2, "c2"), numpy_helper.from_array(fc, "fc"),
             numpy_helper.from_array(np.linspace(-1, 1, 10).astype(np.float32), "fcb")]
    nodes = [helper.make_node("Conv", ["x", "c1"], ["a1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "c2"], ["a2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a2"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["logits"], transB=1),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=1)]
    g = helper.make_graph(nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 32, 32])],
                          [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [2, 10])], inits)
    m["small_cnn"] = save(helper.make_model(g, opset_imports=OPSET), d / "small_cnn.onnx")
    return m


def small_cnn_reference(x, model_path):
    """numpy's forward pass of the small CNN (weights read back from the file)."""
    w = {t.name: numpy_helper.to_array(t) for t in onnx.load(model_path).graph.initializer}

    def conv(x, k):
        n, c, h, wd = x.shape
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        cols = np.stack([xp[:, :, i:i + h, j:j + wd] for i in range(3) for j in range(3)], axis=2)  # n c 9 h w
        return np.einsum("nckhw,ock->nohw", cols, k.reshape(k.shape[0], k.shape[1], 9), optimize=True)

    a = np.maximum(conv(x.astype(np.float64), w["c1"].astype(np.float64)), 0)
    n, c, h, wd = a.shape
    a = a.reshape(n, c, h // 2, 2, wd // 2, 2).max(axis=(3, 5))
    a = np.maximum(conv(a, w["c2"].astype(np.float64)), 0).mean(axis=(2, 3))
    logits = a @ w["fc"].T.astype(np.float64) + w["fcb"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
