"""The ONNX Runtime-compatible surface: InferenceSession, run, get_inputs/get_outputs,
SessionOptions, providers and the exception classes, on small models whose outputs numpy
computes."""
import os
import json
import warnings

import numpy as np
import pytest

import gearbox as ort


def pattern(shape, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def test_run_and_inspection(models):
    s = ort.InferenceSession(models["add_relu"])
    ins, outs = s.get_inputs(), s.get_outputs()
    assert [(i.name, i.type, i.shape) for i in ins] == [("x", "tensor(float)", ["batch", 3]),
                                                       ("y", "tensor(float)", ["batch", 3])]
    assert [(o.name, o.type, o.shape) for o in outs] == [("z", "tensor(float)", ["batch", 3])]
    assert isinstance(ins[0], ort.NodeArg)
    x, y = pattern((5, 3), 1), pattern((5, 3), 2)
    for names in (None, [], ["z"]):
        (z,) = s.run(names, {"x": x, "y": y})
        np.testing.assert_array_equal(z, np.maximum(x + y, 0))
        assert z.dtype == np.float32 and z.shape == (5, 3)
    assert s.get_providers() == ["CPUExecutionProvider"]
    assert ort.get_available_providers() == ["CPUExecutionProvider"]


def test_output_selection_and_dtypes(models):
    s = ort.InferenceSession(models["two_outputs"])
    assert [(o.name, o.type) for o in s.get_outputs()] == [("total", "tensor(float)"), ("idx", "tensor(int64)")]
    a = pattern((2, 4), 3)
    idx, total = s.run(["idx", "total"], {"a": a})
    np.testing.assert_allclose(total, a.sum(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(idx, a.argmax(axis=1)[:, None])
    assert idx.dtype == np.int64
    # The same output twice: two arrays, not one buffer twice.
    t1, t2 = s.run(["total", "total"], {"a": a})
    np.testing.assert_array_equal(t1, t2)
    assert not np.shares_memory(t1, t2)


def test_model_from_bytes_and_pathlike(models, tmp_path):
    import pathlib
    data = open(models["add_relu"], "rb").read()
    x, y = pattern((2, 3), 4), pattern((2, 3), 5)
    want = np.maximum(x + y, 0)
    for source in (data, bytearray(data), pathlib.Path(models["add_relu"])):
        (z,) = ort.InferenceSession(source).run(None, {"x": x, "y": y})
        np.testing.assert_array_equal(z, want)
    with pytest.raises(TypeError, match="Unable to load from type"):
        ort.InferenceSession(42)


def test_session_options(models, tmp_path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    with pytest.raises(AttributeError):  # a misspelt option is an error, as in ONNX Runtime
        so.intra_op_num_thread = 1
    s = ort.InferenceSession(models["add_relu"], sess_options=so, providers=["CPUExecutionProvider"])
    assert s.get_session_options() is so
    x = pattern((3, 3), 6)
    np.testing.assert_array_equal(s.run(None, {"x": x, "y": x})[0], np.maximum(2 * x, 0))
    # The optimizer off means no pass ran.
    report = json.loads(s._sess._optimizer_report_json)
    assert not any(p["ran"] for p in report["passes"])
    on = ort.InferenceSession(models["small_cnn"])
    assert any(p["ran"] for p in json.loads(on._sess._optimizer_report_json)["passes"])


def test_providers(models):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = ort.InferenceSession(models["add_relu"], providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert any("CUDAExecutionProvider" in str(x.message) for x in w)
    assert s.get_providers() == ["CPUExecutionProvider"]


def test_profiling(models, tmp_path):
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "prof")
    s = ort.InferenceSession(models["add_relu"], so)
    x = pattern((2, 3), 7)
    for _ in range(3):
        s.run(None, {"x": x, "y": x})
    path = s.end_profiling()
    assert path.startswith(str(tmp_path / "prof")) and path.endswith(".json")
    lines = open(path).read().splitlines()
    assert lines[0] == "[" and lines[-1] == "]"  # ONNX Runtime's layout: an array, an event a line
    events = json.load(open(path))
    ops = [e for e in events if e.get("ph") == "X" and e.get("name") in ("add", "relu")]
    assert len(ops) == 6, ops  # two nodes x three runs
    assert all(k in ops[0] for k in ("pid", "tid", "ts", "dur", "name"))
    assert s.end_profiling() == ""  # profiling ended with the first call, as in ONNX Runtime


def test_errors_carry_code_and_ort_class(models, tmp_path):
    s = ort.InferenceSession(models["add_relu"])
    x = pattern((2, 3), 8)
    with pytest.raises(ValueError, match=r"Required inputs \(\['y'\]\) are missing"):
        s.run(None, {"x": x})
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument) as e:
        s.run(None, {"x": x, "y": x, "nope": x})
    assert (e.value.code, e.value.name) == (4002, "INPUT_UNKNOWN") and "nope" in str(e.value)
    assert isinstance(e.value, ort.GearboxError) and e.value.fix
    with pytest.raises(ort.InvalidArgument) as e:
        s.run(None, {"x": x.astype(np.float64), "y": x})
    assert e.value.name == "INPUT_DTYPE_MISMATCH" and "float64" in str(e.value)
    with pytest.raises(ort.InvalidArgument) as e:
        s.run(None, {"x": pattern((2, 4), 1), "y": x})
    assert e.value.name == "INPUT_SHAPE_MISMATCH"
    with pytest.raises(ort.InvalidArgument) as e:
        s.run(["zz"], {"x": x, "y": x})
    assert (e.value.code, e.value.name) == (4009, "OUTPUT_UNKNOWN") and "not an output" in str(e.value) and "'z'" in str(e.value)
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.NoSuchFile) as e:
        ort.InferenceSession(str(tmp_path / "missing.onnx"))
    assert e.value.code == 1001
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x01garbage that is not a model")
    with pytest.raises(ort.InvalidProtobuf):
        ort.InferenceSession(str(tmp_path / "junk.onnx"))
    with pytest.raises(ort.NotImplemented) as e:
        ort.InferenceSession(models["unknown_op"])
    assert e.value.name == "OP_UNSUPPORTED" and "NoSuchOp" in str(e.value)


def test_gbm_from_path_and_bytes(models, tmp_path):
    gbm = tmp_path / "add_relu.gbm"
    report = ort.compile(models["add_relu"], gbm, input_shapes={"x": [2, 3], "y": [2, 3]})
    assert report["gbm_bytes"] == os.path.getsize(gbm) and report["partition"]["nodes"] >= 1
    x, y = pattern((2, 3), 9), pattern((2, 3), 10)
    for source in (str(gbm), gbm.read_bytes()):
        (z,) = ort.InferenceSession(source).run(None, {"x": x, "y": y})
        np.testing.assert_array_equal(z, np.maximum(x + y, 0))


def test_sequences_in_and_out(tmp_path):
    import onnx
    from onnx import TensorProto, helper
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, ["rows", 3])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("SequenceLength", ["s"], ["n"]),
                           helper.make_node("ConcatFromSequence", ["s"], ["c"], axis=0),
                           helper.make_node("SequenceConstruct", ["x", "x"], ["q"])], "seq", [seq, x],
                          [helper.make_tensor_value_info("n", TensorProto.INT64, []),
                           helper.make_tensor_value_info("c", TensorProto.FLOAT, ["total", 3]),
                           helper.make_tensor_sequence_value_info("q", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "seq.onnx"))
    s = ort.InferenceSession(str(tmp_path / "seq.onnx"))
    assert s.get_inputs()[0].type == "seq(tensor(float))" and s.get_outputs()[2].type == "seq(tensor(float))"
    parts = [pattern((1, 3), 1), pattern((2, 3), 2)]
    xv = pattern((2, 3), 3)
    n, c, q = s.run(None, {"s": parts, "x": xv})
    assert n == 2 and n.dtype == np.int64
    np.testing.assert_array_equal(c, np.concatenate(parts))
    assert isinstance(q, list) and len(q) == 2
    for t in q:
        np.testing.assert_array_equal(t, xv)
    with pytest.raises(ort.InvalidArgument) as e:
        s.run(None, {"s": parts[0], "x": xv})
    assert "list of arrays" in str(e.value)
