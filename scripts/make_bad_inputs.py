#!/usr/bin/python3
"""Write the malformed models and inputs that tests/bad_input feeds to `gearbox run`.

Usage: make_bad_inputs.py OUT_DIR

Every bad file is built from a known-good one and then checked here, with Python's protobuf and
numpy, to really be bad in the intended way (e.g. the truncated model must not parse), so a test
cannot pass or fail because the fixture is not what its name says.

Layout of OUT_DIR:
  add/model.onnx, x.npy, y.npy, expected_z.npy   a valid model: z = x + y, float [2,3]
  empty.onnx                                     0 bytes
  truncated.onnx                                 first half of a valid model with an initializer
  random.onnx                                    random bytes that are not protobuf
  tensor.onnx                                    a serialized TensorProto (valid protobuf, no graph)
  unknown_op.onnx                                node 'NoSuchOp' in the default domain
  opset99.onnx, opset3.onnx                      Add under ai.onnx opset 99, and under 3 with
                                                 broadcast and an axis over inputs of unknown rank
  npy/x_3x2.npy, x_f64.npy                       wrong shape, wrong dtype for input x
  npy/extra.npy                                  a well-formed input for a name the model lacks
  npy/x_bad_header.npy, x_bad_magic.npy, x_short_data.npy   malformed .npy files
  extdata/model.onnx + outside.bin               initializer stored in '../outside.bin'
  extdata_abs/model.onnx                         initializer stored at an absolute path
  cycle.onnx                                     n1 -> n2 -> n1: a cycle
  init/*.onnx                                    z = x + W with W's data not matching its dims
  loop/model.onnx, x.npy, m_huge.npy, m_5.npy, expected_y_5.npy
                                                 y = Loop M times (x = x * 0.5 + 1), M an input:
                                                 10^12 trips never end (gearbox run --timeout)
  nested_ok/model.onnx, x.npy, y.npy, expected_z.npy   z = x + y inside 32 levels of graphs (the limit)
  nested_deep.onnx                               the same 500 levels deep
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from loop_model import halving_loop_model, halving_loop_reference

OPSET = 14


def add_model(opset=OPSET, op="Add", domain=""):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])
    node = helper.make_node(op, ["x", "y"], ["z"], domain=domain)
    graph = helper.make_graph([node], "add", [x, y], [z])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def add_const_model(weight):
    """z = x + W with W an initializer; used for truncation and external data."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(weight.shape))
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, list(weight.shape))
    init = numpy_helper.from_array(weight, "W")
    node = helper.make_node("Add", ["x", "W"], ["z"])
    graph = helper.make_graph([node], "add_const", [x], [z], initializer=[init])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def nested_if_model(depth):
    """z = x + y computed `depth` graph levels deep: the main graph holds an If whose then-branch
    holds an If ... (depth - 1 Ifs); every else-branch computes x - y, and the condition is true."""
    def level(k):
        out = "z" if k == 1 else f"z{k}"
        if k == depth:
            return helper.make_node("Add", ["x", "y"], [out])
        inner = level(k + 1)
        then_g = helper.make_graph([inner], f"then{k}", [],
                                   [helper.make_tensor_value_info(inner.output[0], TensorProto.FLOAT, [2, 3])])
        else_g = helper.make_graph([helper.make_node("Sub", ["x", "y"], [f"e{k}"])], f"else{k}", [],
                                   [helper.make_tensor_value_info(f"e{k}", TensorProto.FLOAT, [2, 3])])
        return helper.make_node("If", ["c"], [out], then_branch=then_g, else_branch=else_g)
    c = helper.make_node("Constant", [], ["c"], value=helper.make_tensor("cv", TensorProto.BOOL, [], [True]))
    vals = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("x", "y")]
    graph = helper.make_graph([c, level(1)], "nested", vals, [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def parses_as_model(data):
    m = onnx.ModelProto()
    try:
        m.ParseFromString(data)
    except Exception:
        return None
    return m


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def with_external(model, location):
    """Mark initializer W as external data at `location` (offset 0, its full length)."""
    w = model.graph.initializer[0]
    nbytes = len(w.raw_data)
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(nbytes))):
        e = w.external_data.add()
        e.key, e.value = k, v
    return model


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(1234)

    # ---- the good model and its inputs ----------------------------------------------------
    good = add_model()
    onnx.checker.check_model(good, full_check=True)
    write(os.path.join(out, "add", "model.onnx"), good.SerializeToString())
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y = rng.standard_normal((2, 3)).astype(np.float32)
    np.save(os.path.join(out, "add", "x.npy"), x)
    np.save(os.path.join(out, "add", "y.npy"), y)
    np.save(os.path.join(out, "add", "expected_z.npy"), x + y)  # numpy is the oracle

    # ---- unreadable model files -----------------------------------------------------------
    write(os.path.join(out, "empty.onnx"), b"")

    full = add_const_model(rng.standard_normal((16, 16)).astype(np.float32)).SerializeToString()
    truncated = full[: len(full) // 2]  # cuts W's raw_data in the middle: cannot parse
    assert parses_as_model(full) is not None
    assert parses_as_model(truncated) is None, "truncated model unexpectedly parses"
    write(os.path.join(out, "truncated.onnx"), truncated)

    # 0xFF 0xFF ...: a varint tag that never ends within 10 bytes, so no protobuf parser
    # accepts it, whatever random bytes follow.
    junk = b"\xff" * 16 + rng.integers(0, 256, 512, dtype=np.uint8).tobytes()
    assert parses_as_model(junk) is None, "random bytes unexpectedly parse"
    write(os.path.join(out, "random.onnx"), junk)

    # A TensorProto with only dims, data_type and raw_data: these reuse ModelProto field
    # numbers 1 (ir_version), 2 (wire-type clash: kept as an unknown field) and 9 (unused),
    # so it parses as a ModelProto - with no graph. (A name, field 8, would clash with
    # opset_import and could make it unparsable, so there is none.)
    t = numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32))
    t.ClearField("name")
    tbytes = t.SerializeToString()
    m = parses_as_model(tbytes)
    assert m is not None and not m.HasField("graph"), "TensorProto must parse, without a graph"
    write(os.path.join(out, "tensor.onnx"), tbytes)

    # ---- models gearbox must refuse -------------------------------------------------------
    write(os.path.join(out, "unknown_op.onnx"), add_model(op="NoSuchOp").SerializeToString())
    write(os.path.join(out, "opset99.onnx"), add_model(opset=99).SerializeToString())
    # Add-3 with broadcast and an axis between inputs of unknown rank: the legacy form gearbox
    # rewrites at import needs the ranks to place B (graph/legacy_opsets.h).
    legacy = add_model(opset=3)
    legacy.graph.node[0].attribute.extend([helper.make_attribute("broadcast", 1), helper.make_attribute("axis", 0)])
    for v in legacy.graph.input:
        v.type.tensor_type.ClearField("shape")
    write(os.path.join(out, "opset3.onnx"), legacy.SerializeToString())

    # ---- bad inputs for the good model ----------------------------------------------------
    npy = os.path.join(out, "npy")
    os.makedirs(npy, exist_ok=True)
    np.save(os.path.join(npy, "x_3x2.npy"), x.reshape(3, 2))
    np.save(os.path.join(npy, "x_f64.npy"), x.astype(np.float64))
    np.save(os.path.join(npy, "extra.npy"), x)

    good_npy = open(os.path.join(out, "add", "x.npy"), "rb").read()
    # Break the header dict's syntax without changing its length.
    header_end = good_npy.index(b"\n") + 1
    header = good_npy[:header_end]
    broken = header.replace(b"'shape': (2, 3)", b"'shape': (2, 3 ")
    assert broken != header and len(broken) == len(header)
    write(os.path.join(npy, "x_bad_header.npy"), broken + good_npy[header_end:])
    write(os.path.join(npy, "x_bad_magic.npy"), b"\x93NUMPX" + good_npy[6:])
    write(os.path.join(npy, "x_short_data.npy"), good_npy[:-8])  # 2 of 6 floats missing
    for f in ("x_bad_header.npy", "x_bad_magic.npy", "x_short_data.npy"):
        try:
            np.load(os.path.join(npy, f))
        except Exception:
            continue
        raise AssertionError(f"{f} unexpectedly loads with numpy")

    # ---- initializers whose data does not match their dims (TENSOR_DATA_SIZE) -------------
    # W of z = x + W is float [2,3] (24 bytes); each variant keeps the dims and changes the data,
    # or keeps the data and changes the dims. numpy_helper.to_array is the oracle that each is bad.
    def bad_init(name, mutate):
        m = add_const_model(rng.standard_normal((2, 3)).astype(np.float32))
        mutate(m.graph.initializer[0])
        try:
            numpy_helper.to_array(m.graph.initializer[0]).reshape(2, 3)
        except Exception:
            write(os.path.join(out, "init", name + ".onnx"), m.SerializeToString())
            return
        raise AssertionError(f"initializer {name} unexpectedly converts with numpy_helper")

    bad_init("raw_short", lambda w: setattr(w, "raw_data", w.raw_data[:-8]))
    bad_init("raw_long", lambda w: setattr(w, "raw_data", w.raw_data + b"\0" * 4))

    def huge_dims(w):  # 4 bytes of data for 2^40 x 2^20 floats: not an allocation request
        w.ClearField("dims")
        w.dims.extend([1 << 40, 1 << 20])

    bad_init("huge_dims", huge_dims)

    def zero_dim(w):  # a [0,3] tensor that still stores 24 bytes
        w.ClearField("dims")
        w.dims.extend([0, 3])

    bad_init("zero_dim", zero_dim)

    def float_data_short(w):
        values = np.frombuffer(w.raw_data, dtype=np.float32)[:5]
        w.ClearField("raw_data")
        w.float_data.extend(values.tolist())

    bad_init("float_data_short", float_data_short)

    # ---- a graph cycle (GRAPH_CYCLE): n1 reads b, which n2 computes from n1's output ----------
    vx = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    vz = helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])
    cyc = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["b"], name="n2"),
         helper.make_node("Relu", ["a"], ["z"], name="n3")], "cycle", [vx], [vz]),
        opset_imports=[helper.make_opsetid("", OPSET)])
    try:
        onnx.checker.check_model(cyc)
        raise AssertionError("the cycle model unexpectedly passes the ONNX checker")
    except onnx.checker.ValidationError:
        pass
    write(os.path.join(out, "cycle.onnx"), cyc.SerializeToString())

    # ---- subgraphs nested past protobuf's limit (MODEL_NESTING_TOO_DEEP), and at it ----------
    # Protobuf is the oracle for both: the model at the limit parses, the deep one does not.
    ok = nested_if_model(32)
    onnx.checker.check_model(ok)
    nested_dir = os.path.join(out, "nested_ok")
    write(os.path.join(nested_dir, "model.onnx"), ok.SerializeToString())
    xv, yv = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    np.save(os.path.join(nested_dir, "x.npy"), xv)
    np.save(os.path.join(nested_dir, "y.npy"), yv)
    np.save(os.path.join(nested_dir, "expected_z.npy"), xv + yv)  # the true branch all the way down
    deep = nested_if_model(500).SerializeToString()
    if parses_as_model(deep) is not None:
        raise AssertionError("the 500-deep model unexpectedly parses")
    write(os.path.join(out, "nested_deep.onnx"), deep)

    # ---- external data that points outside the model's folder ----------------------------
    w = rng.standard_normal((2, 3)).astype(np.float32)
    # The target exists and holds the right bytes: the only fault is where it lies.
    write(os.path.join(out, "outside.bin"), w.tobytes())
    ext = with_external(add_const_model(w), "../outside.bin")
    write(os.path.join(out, "extdata", "model.onnx"), ext.SerializeToString())
    ext_abs = with_external(add_const_model(w), os.path.abspath(os.path.join(out, "outside.bin")))
    write(os.path.join(out, "extdata_abs", "model.onnx"), ext_abs.SerializeToString())

    # ---- a Loop whose trip count is an input: 10^12 trips run "forever" (--timeout) ---------
    loop = halving_loop_model(OPSET)
    onnx.checker.check_model(loop)
    write(os.path.join(out, "loop", "model.onnx"), loop.SerializeToString())
    lx = rng.standard_normal((2, 3)).astype(np.float32)
    np.save(os.path.join(out, "loop", "x.npy"), lx)
    np.save(os.path.join(out, "loop", "m_huge.npy"), np.array(10**12, np.int64))
    np.save(os.path.join(out, "loop", "m_5.npy"), np.array(5, np.int64))
    np.save(os.path.join(out, "loop", "expected_y_5.npy"), halving_loop_reference(lx, 5))  # numpy: the oracle

    print(f"[make_bad_inputs] wrote test files under {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
