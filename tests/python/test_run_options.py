"""Stopping a run from Python: ONNX Runtime's RunOptions.terminate set from another thread, and
gearbox's RunOptions.timeout, on a Loop whose trip count M is an input (M = 10^12 runs for
hours). The session then runs a short loop whose result numpy computes. No timing is asserted:
ctest's timeout catches a run that does not stop."""
import os
import sys
import threading
import time

import numpy as np
import pytest

import gearbox as ort
from conftest import OPSET, save

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from loop_model import halving_loop_model, halving_loop_reference  # noqa: E402  (scripts/ is not a package)

HUGE = 10**12


@pytest.fixture(scope="module")
def loop_model(tmp_path_factory):
    return save(halving_loop_model(OPSET[0].version), tmp_path_factory.mktemp("loop") / "loop.onnx")


X = np.arange(6, dtype=np.float32).reshape(2, 3) * np.float32(0.25) - np.float32(0.5)


def expected(trips):
    return halving_loop_reference(X, trips)


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
