"""Stopping a run from Python: ONNX Runtime's RunOptions.terminate set from another thread, and
gearbox's RunOptions.timeout, on a Loop whose trip count M is an input (M = 10^12 runs for
hours). The session then runs a short loop whose result numpy computes. No timing is asserted:
ctest's timeout catches a run that does not stop."""
import threading
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import gearbox as ort
from conftest import OPSET, save

HUGE = 10**12


@pytest.fixture(scope="module")
def loop_model(tmp_path_factory):
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]),
         helper.make_node("Mul", ["x_in", "half"], ["a"]),
         helper.make_node("Add", ["a", "one"], ["x_out"])],
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
    return save(helper.make_model(graph, opset_imports=OPSET), tmp_path_factory.mktemp("loop") / "loop.onnx")


X = np.arange(6, dtype=np.float32).reshape(2, 3) * np.float32(0.25) - np.float32(0.5)


def expected(trips):
    y = X.copy()
    for _ in range(trips):
        y = y * np.float32(0.5) + np.float32(1.0)
    return y


def feeds(trips):
    return {"M": np.array(trips, np.int64), "x": X}


def test_terminate_from_another_thread(loop_model):
    s = ort.InferenceSession(loop_model)
    ro = ort.RunOptions()
    assert ro.terminate is False

    def cancel():
        time.sleep(0.2)
        ro.terminate = True

    t = threading.Thread(target=cancel)
    t.start()
    with pytest.raises(ort.Fail) as e:
        s.run(None, feeds(HUGE), ro)
    t.join()
    assert e.value.code == 4007 and e.value.name == "RUN_CANCELLED", str(e.value)
    with pytest.raises(ort.Fail):  # stays set, as ORT's
        s.run(None, feeds(2), ro)
    ro.terminate = False
    (y,) = s.run(None, feeds(5), ro)
    np.testing.assert_allclose(y, expected(5), rtol=1e-6)


def test_timeout(loop_model):
    s = ort.InferenceSession(loop_model)
    ro = ort.RunOptions()
    ro.timeout = 0.3
    with pytest.raises(ort.Fail) as e:
        s.run(None, feeds(HUGE), ro)
    assert e.value.code == 4008 and e.value.name == "RUN_DEADLINE_EXCEEDED", str(e.value)
    (y,) = s.run(["y"], feeds(4), ro)
    np.testing.assert_allclose(y, expected(4), rtol=1e-6)
    with pytest.raises(ort.InvalidArgument):
        ro.timeout = -1
    # gearbox's own Session takes the same control
    g = ort.Session(loop_model)
    with pytest.raises(ort.GearboxError) as e:
        g.run(feeds(HUGE), run_control=ro._control)
    assert e.value.code == 4008
    np.testing.assert_allclose(g.run(feeds(3))["y"], expected(3), rtol=1e-6)
