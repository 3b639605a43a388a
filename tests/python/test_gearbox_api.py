"""gearbox's own Python API: Session options, run() returning a dict, profile(), compile(),
explain(), smi(), doctor()."""
import json
import subprocess
import os

import numpy as np
import pytest

import gearbox


def test_session_run_returns_dict(models):
    s = gearbox.Session(models["two_outputs"], engines="cpu.ref", threads=1, plan_cache_size=2)
    assert s.engines == "cpu.ref"
    assert [(i.name, i.dtype, i.shape) for i in s.inputs] == [("a", np.dtype("float32"), [2, 4])]
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = s.run({"a": a})
    assert list(out) == ["total", "idx"]
    np.testing.assert_array_equal(out["total"], a.sum(axis=1, keepdims=True))
    assert list(s.run({"a": a}, outputs=["idx"])) == ["idx"]
    st = s.plan_cache_stats()
    assert (st["capacity"], st["prepared"], st["reused"]) == (2, 1, 1)
    assert s.partition["node_counts"] == {"cpu.ref": 2}


def test_session_options_reach_the_session(models):
    with pytest.raises(gearbox.GearboxError) as e:
        gearbox.Session(models["add_relu"], engine_overrides=["Add=cpu.nope"])
    assert e.value.name == "ENGINE_UNKNOWN"
    with pytest.raises(gearbox.GearboxError) as e:
        gearbox.Session(models["add_relu"], disabled_passes=["no_such_pass"])
    assert e.value.name == "PASS_UNKNOWN"
    with pytest.raises(gearbox.GearboxError) as e:
        gearbox.Session(models["add_relu"], precision="int4")
    assert e.value.name == "USAGE" and "precision" in str(e.value)
    assert gearbox.Session(models["add_relu"], precision="fp32").outputs[0].name == "z"
    s = gearbox.Session(models["small_cnn"], engine_overrides=["Gemm=cpu.ref"], optimize=False)
    assert "cpu.ref" in s.partition["node_counts"]


def test_profile_returns_op_summary(models):
    s = gearbox.Session(models["add_relu"])
    x = np.ones((4, 3), np.float32)
    rows = s.profile({"x": x, "y": x}, loop=3, warmup=1)
    by_type = {r["op_type"]: r for r in rows if r["kind"] == "op_type"}
    assert set(by_type) == {"Add", "Relu"}
    assert all(r["calls"] == 3 for r in by_type.values())
    nodes = {r["name"] for r in rows if r["kind"] == "node"}
    assert nodes == {"add", "relu"}
    assert by_type["Add"]["flops"] == 3 * 12  # one add per element, three runs
    with pytest.raises(gearbox.GearboxError):
        s.profile({"x": x, "y": x}, loop=0)


def test_explain():
    e = gearbox.explain(4002)
    assert e["name"] == "INPUT_UNKNOWN" and e["fix"]
    assert gearbox.explain("GBX-E4002") == e == gearbox.explain("INPUT_UNKNOWN")
    assert gearbox.explain("ENGINE_UNKNOWN")["code"] == 6010
    with pytest.raises(gearbox.GearboxError) as err:
        gearbox.explain("NOPE")
    assert err.value.name == "UNKNOWN_ERROR_CODE"
    assert gearbox.explain(err.value)["name"] == "UNKNOWN_ERROR_CODE"


def test_smi_and_doctor_match_the_cli(models):
    smi = gearbox.smi()
    cli = json.loads(subprocess.run([os.environ["GEARBOX_BIN"], "smi", "--json"], capture_output=True,
                                    text=True, check=True).stdout)
    assert [d["name"] for d in smi["devices"]] == [d["name"] for d in cli["devices"]]
    assert smi["devices"][0]["logical_cores"] == cli["devices"][0]["logical_cores"]
    doc = gearbox.doctor(models["add_relu"])
    names = [c["name"] for c in doc["checks"]]
    cli = json.loads(subprocess.run([os.environ["GEARBOX_BIN"], "doctor", models["add_relu"], "--json"],
                                    capture_output=True, text=True).stdout)
    assert names == [c["name"] for c in cli["checks"]]
    assert doc["summary"]["pass"] > 0


def test_compile_errors_raise(models, tmp_path):
    with pytest.raises(gearbox.GearboxError) as e:
        gearbox.compile(models["add_relu"], tmp_path / "o.gbm", input_shapes={"nope": [1]})
    assert e.value.name == "USAGE" and "nope" in str(e.value)
    with pytest.raises(gearbox.NoSuchFile):
        gearbox.compile(tmp_path / "missing.onnx", tmp_path / "o.gbm")
