"""Zero-copy: a C-contiguous input's memory reaches the kernel unchanged, an output array is
the kernel's own buffer held by gearbox's capsule, and what cannot be shared is copied once.

The pointers come from Session._run_observed, a test hook that records, per node, the data
pointers of the tensors its kernel was handed and produced (a NodeObserver in the executor:
src/python/session_binding.cc)."""
import ctypes
import tracemalloc

import numpy as np

import gearbox

ctypes.pythonapi.PyCapsule_GetName.restype = ctypes.c_char_p
ctypes.pythonapi.PyCapsule_GetName.argtypes = [ctypes.py_object]


def capsule_name(obj):
    return ctypes.pythonapi.PyCapsule_GetName(obj).decode()


def nodes_by_name(records):
    return {r["node"]: r for r in records}


def test_contiguous_input_reaches_the_kernel_and_output_is_the_kernels_buffer(models):
    s = gearbox.Session(models["add_relu"], optimize=False)
    x = np.random.default_rng(1).standard_normal((64, 3)).astype(np.float32)
    y = np.random.default_rng(2).standard_normal((64, 3)).astype(np.float32)
    out, records = s._run_observed({"x": x, "y": y})
    n = nodes_by_name(records)
    assert n["add"]["inputs"] == [x.ctypes.data, y.ctypes.data]
    z = out["z"]
    np.testing.assert_array_equal(z, np.maximum(x + y, 0))
    # The array's memory is what the Relu kernel wrote, owned by gearbox's capsule.
    assert z.ctypes.data == n["relu"]["outputs"][0]
    assert type(z.base).__name__ == "PyCapsule" and capsule_name(z.base) == "gearbox.Tensor"
    assert not z.flags.owndata and z.flags.writeable and z.flags.c_contiguous
    z[...] = 7  # writable, and nobody else sees it
    again, _ = s._run_observed({"x": x, "y": y})
    np.testing.assert_array_equal(again["z"], np.maximum(x + y, 0))


def test_ort_run_outputs_are_capsules_too(models):
    s = gearbox.InferenceSession(models["add_relu"])
    x = np.ones((2, 3), np.float32)
    (z,) = s.run(None, {"x": x, "y": x})
    assert capsule_name(z.base) == "gearbox.Tensor"


def test_borrowed_input_stays_alive_and_unchanged(models):
    s = gearbox.Session(models["add_relu"])
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    before = x.copy()
    refs = __import__("sys").getrefcount(x)
    z = s.run({"x": x, "y": x})["z"]
    np.testing.assert_array_equal(x, before)  # kernels never write their inputs
    np.testing.assert_array_equal(z, 2 * before)
    assert __import__("sys").getrefcount(x) == refs  # the borrow was given back


def test_non_contiguous_input_is_copied_once(models):
    s = gearbox.Session(models["add_relu"], optimize=False)
    base = np.random.default_rng(3).standard_normal((512, 6)).astype(np.float32)
    x = base[:, ::2]  # a strided view: not C-contiguous
    y = np.asfortranarray(np.random.default_rng(4).standard_normal((512, 3)).astype(np.float32))
    assert not x.flags.c_contiguous and not y.flags.c_contiguous
    tracemalloc.start()
    try:
        out, records = s._run_observed({"x": x, "y": y})
        snap = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    add = nodes_by_name(records)["add"]
    # The kernel got gearbox's copies, not the views' memory ...
    assert add["inputs"][0] not in (x.ctypes.data, base.ctypes.data) and add["inputs"][1] != y.ctypes.data
    np.testing.assert_array_equal(out["z"], np.maximum(x + y, 0))
    # ... made straight into gearbox's tensor: numpy allocated no contiguous temporary on the
    # way (numpy reports its allocations to tracemalloc in its own domain).
    numpy_domain = tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)
    allocated = sum(st.size for st in snap.filter_traces([numpy_domain]).statistics("filename"))
    assert allocated < x.nbytes, f"numpy allocated {allocated} bytes while the inputs were converted"


def test_outputs_that_share_a_buffer_are_copied(models):
    # Identity returns its input's tensor: the array must not alias the caller's input, or a
    # write into the output would change it.
    s = gearbox.Session(models["identity"], optimize=False)
    x = np.random.default_rng(5).standard_normal((4, 5)).astype(np.float32)
    out, records = s._run_observed({"x": x})
    assert records[0]["outputs"][0] == x.ctypes.data  # inside gearbox the output is the input ...
    o = out["out"]
    assert not np.shares_memory(o, x)  # ... and the array handed out is a copy
    np.testing.assert_array_equal(o, x)
    assert o.base is None or capsule_name(o.base) != "gearbox.Tensor"


def test_misaligned_and_big_endian_inputs(models):
    s = gearbox.Session(models["add_relu"], optimize=False)
    raw = np.zeros(4 * 6 + 1, np.uint8)
    x = np.frombuffer(raw.data, dtype=np.float32, count=6, offset=1).reshape(2, 3)  # not 4-byte aligned
    assert not x.flags.aligned
    y = np.arange(6, dtype=">f4").reshape(2, 3)  # big-endian
    out, records = s._run_observed({"x": x, "y": y})
    np.testing.assert_array_equal(out["z"], np.maximum(x.astype(np.float32) + y.astype(np.float32), 0))
    assert nodes_by_name(records)["add"]["inputs"][0] != x.ctypes.data


def test_string_tensors_are_copied_both_ways(tmp_path):
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Identity", ["s"], ["t"])], "strings",
                          [helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
                          [helper.make_tensor_value_info("t", TensorProto.STRING, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "s.onnx"))
    s = gearbox.Session(str(tmp_path / "s.onnx"))
    assert s.inputs[0].type == "tensor(string)"
    t = s.run({"s": np.array(["héllo", "wörld"])})["t"]
    assert t.dtype == object and t.tolist() == ["héllo", "wörld"]
