"""The ONNX Runtime-compatible surface on the three parity models (ResNet-50, MobileNetV2,
BERT-base, exported by tests/parity's fixture into GEARBOX_PARITY_MODEL_DIR): the outputs are
bit for bit those of `gearbox run` on the same inputs (one thread on both sides, so no
reduction order can differ), and within tests/parity's bounds of PyTorch's own outputs."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import gearbox as onnxruntime

MODELS = ["resnet50", "mobilenet_v2", "bert"]
COMPARE = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "compare_npy.py")


@pytest.mark.parametrize("name", MODELS)
def test_parity_model_matches_the_cli(name, tmp_path):
    d = os.path.join(os.environ["GEARBOX_PARITY_MODEL_DIR"], name)
    model = os.path.join(d, "model.onnx")
    assert os.path.exists(model), f"{model} is missing: the parity export fixture did not run"
    npys = sorted(f for f in os.listdir(d) if f.endswith(".npy"))
    feeds = {f[:-4]: np.load(os.path.join(d, f)) for f in npys if not f.startswith("expected_")}
    expected = {f[len("expected_"):-4]: os.path.join(d, f) for f in npys if f.startswith("expected_")}

    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = 1
    sess = onnxruntime.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    assert {i.name for i in sess.get_inputs()} == set(feeds)
    names = [o.name for o in sess.get_outputs()]
    got = dict(zip(names, sess.run(None, feeds)))
    assert set(got) == set(expected)

    cmd = [os.environ["GEARBOX_BIN"], "run", model, "--threads", "1", "--output-dir", str(tmp_path), "--json"]
    for k in feeds:
        cmd += ["--input", f"{k}={os.path.join(d, k + '.npy')}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    listed = {o["name"]: o["file"] for o in json.loads(r.stdout)["outputs"]}
    for n in names:
        cli = np.load(listed[n])
        assert got[n].dtype == cli.dtype and got[n].shape == cli.shape, n
        np.testing.assert_array_equal(got[n], cli, err_msg=f"{name}: output {n} differs from gearbox run's")
        mine = tmp_path / (re.sub(r"[^A-Za-z0-9._-]", "_", n) + ".python.npy")
        np.save(mine, got[n])
        assert subprocess.run([sys.executable, COMPARE, expected[n], str(mine)]).returncode == 0, n
