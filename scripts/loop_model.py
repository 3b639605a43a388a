"""The Loop model the cancellation tests run: y = x after M trips of x = x * 0.5 + 1, with the
trip count M an input, so M = 10^12 runs "forever" (run --timeout, serve deadlines, Python's
RunOptions). One definition for scripts/make_bad_inputs.py, tests/serve/make_serve_models.py
and tests/python/test_run_options.py.
"""
import numpy as np
from onnx import TensorProto, helper, numpy_helper


def halving_loop_model(opset):
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"], name="keep_going"),
         helper.make_node("Mul", ["x_in", "half"], ["a"], name="halve"),
         helper.make_node("Add", ["a", "one"], ["x_out"], name="add_one")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.array(0.5, np.float32), "half"),
         numpy_helper.from_array(np.array(1.0, np.float32), "one")])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "x"], ["y"], name="loop", body=body)], "loop",
        [helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def halving_loop_reference(x, trips):
    """numpy's y for `trips` trips, in float32 like the model."""
    y = x.copy()
    for _ in range(trips):
        y = y * np.float32(0.5) + np.float32(1.0)
    return y
