#!/usr/bin/python3
"""The oracle suite's cases (issue 25 item 2): small models Debian's onnx 1.12 cannot judge.

Writes OUT/<case>/model.onnx, OUT/<case>/inputs/<input>.npy and OUT/<case>/case.json
({"inputs": [...], "outputs": [...], "rtol", "atol"}) for:
  - ONNX Runtime's contrib operators (com.microsoft, and the two it registers in the ONNX
    domain at opset 1), each in the forms exporters and ORT's transformer optimizer write;
  - ai.onnx operators new or changed at opsets 18 to 21.
Models are built with onnx's helper without its checker (onnx 1.12 stops at opset 17), from a
fixed seed, so the same cases come out on every run. The expected outputs are ONNX Runtime's
(ort_expected.js); check_oracle.py runs gearbox on them against a committed baseline.

Usage: make_cases.py OUT_DIR
"""
import json
import os
import shutil
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64
U8 = TensorProto.UINT8
I8 = TensorProto.INT8
MS = "com.microsoft"

NP_OF = {F: np.float32, I64: np.int64, U8: np.uint8, I8: np.int8, TensorProto.INT32: np.int32,
         TensorProto.BOOL: np.bool_}


class Cases:
    def __init__(self, out):
        self.out = out
        self.names = set()
        self.rng = np.random.default_rng(2025)

    def add(self, name, nodes, inputs, outputs, opset=17, inits=(), ms=False, rtol=1e-4, atol=1e-5):
        """inputs: [(name, elem_type, array)]; outputs: [(name, elem_type)]."""
        assert name not in self.names, name
        self.names.add(name)
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, t, a.shape) for n, t, a in inputs],
                              [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                              initializer=[v if isinstance(v, TensorProto) else numpy_helper.from_array(np.asarray(v), k)
                                           for k, v in inits])
        ops = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(MS, 1)] if ms else [])
        m = helper.make_model(g, opset_imports=ops, producer_name="gearbox-oracle")
        m.ir_version = 10 if opset >= 21 else 9 if opset >= 19 else 8
        d = os.path.join(self.out, name)
        os.makedirs(os.path.join(d, "inputs"))
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(m.SerializeToString())
        for n, t, a in inputs:
            np.save(os.path.join(d, "inputs", n + ".npy"), np.asarray(a, NP_OF[t]))
        with open(os.path.join(d, "case.json"), "w") as f:
            json.dump({"inputs": [n for n, _, _ in inputs], "outputs": [n for n, _ in outputs],
                       "rtol": rtol, "atol": atol}, f)

    def f32(self, *shape, lo=-2.0, hi=2.0):
        return self.rng.uniform(lo, hi, shape).astype(np.float32)

    def u8(self, *shape):
        return self.rng.integers(0, 256, shape, dtype=np.uint8)

    def i8(self, *shape):
        return self.rng.integers(-128, 128, shape, dtype=np.int8)


UINT4, INT4 = 21, 22  # onnx 1.16's TensorProto.UINT4 / INT4; Debian's onnx 1.12 has no names for them


def four_bit(name, values, signed, as_int32_data=False):
    """A 4-bit initializer as ONNX stores it: two elements per byte, the lower index in the lower
    nibble, in raw_data or (one packed byte per entry) in int32_data."""
    v = np.asarray(values)
    lo, hi = (-8, 7) if signed else (0, 15)
    assert v.min() >= lo and v.max() <= hi, (name, v.min(), v.max())
    flat = (v.reshape(-1).astype(np.int64) & 0xF).tolist()
    if len(flat) % 2:
        flat.append(0)
    packed = [flat[i] | (flat[i + 1] << 4) for i in range(0, len(flat), 2)]
    t = TensorProto()
    t.name = name
    t.data_type = INT4 if signed else UINT4
    t.dims.extend(v.shape)
    if as_int32_data:
        t.int32_data.extend(packed)
    else:
        t.raw_data = bytes(packed)
    return t


def int4_family(c):
    """int4/uint4 (opset 21) where ONNX Runtime's CPU kernels take them: weight-only quantized
    MatMuls (blocked and per-axis DequantizeLinear), Transpose of a packed weight, a Constant,
    and QuantizeLinear to 4 bits, which saturates to the 4-bit range."""
    def ints(signed, *shape):
        return c.rng.integers(-8, 8, shape) if signed else c.rng.integers(0, 16, shape)

    def dq_matmul(name, w, s, z, k, n, **dq):
        inits = [("w", w), ("s", s)] + ([("z", z)] if z is not None else [])
        c.add(name, [helper.make_node("DequantizeLinear", ["w", "s"] + (["z"] if z is not None else []), ["wf"],
                                      name="dq", **dq),
                     helper.make_node("MatMul", ["a", "wf"], ["y"], name="mm")],
              [("a", F, c.f32(3, k))], [("y", F)], opset=21, inits=inits, rtol=1e-4, atol=1e-4)

    # Blocked along K (block 4), int4 weights and zero points: the weight-only quantized MatMul.
    dq_matmul("op21_int4_DequantizeLinear_blocked_MatMul", four_bit("w", ints(True, 16, 6), True),
              c.f32(4, 6, lo=0.01, hi=0.1), four_bit("z", ints(True, 4, 6), True), 16, 6, axis=0, block_size=4)
    dq_matmul("op21_uint4_DequantizeLinear_blocked_MatMul", four_bit("w", ints(False, 16, 6), False),
              c.f32(4, 6, lo=0.01, hi=0.1), four_bit("z", ints(False, 4, 6), False), 16, 6, axis=0, block_size=4)
    # Per-axis, an odd element count (the last byte holds one element), no zero point.
    dq_matmul("op21_uint4_DequantizeLinear_per_axis_odd", four_bit("w", ints(False, 7, 5), False),
              c.f32(5, lo=0.01, hi=0.1), four_bit("z", ints(False, 5), False), 7, 5, axis=1)
    dq_matmul("op21_int4_DequantizeLinear_per_tensor_no_zp", four_bit("w", ints(True, 9, 3), True),
              np.float32(0.05), None, 9, 3)
    dq_matmul("op21_int4_DequantizeLinear_int32_data", four_bit("w", ints(True, 5, 3), True, as_int32_data=True),
              np.float32(0.1), four_bit("z", np.array(-3), True, as_int32_data=True), 5, 3)
    # Transpose of the packed weight before the DequantizeLinear.
    c.add("op21_int4_Transpose_DequantizeLinear",
          [helper.make_node("Transpose", ["w"], ["wt"], name="t", perm=[1, 0]),
           helper.make_node("DequantizeLinear", ["wt", "s", "z"], ["wf"], name="dq"),
           helper.make_node("MatMul", ["a", "wf"], ["y"], name="mm")],
          [("a", F, c.f32(2, 8))], [("y", F)], opset=21,
          inits=[("w", four_bit("w", ints(True, 4, 8), True)), ("s", np.float32(0.07)),
                 ("z", four_bit("z", np.array(1), True))], rtol=1e-4, atol=1e-4)
    # A Constant holding a uint4 tensor.
    c.add("op21_uint4_Constant_DequantizeLinear",
          [helper.make_node("Constant", [], ["w"], name="const", value=four_bit("value", ints(False, 3, 4), False)),
           helper.make_node("DequantizeLinear", ["w", "s"], ["wf"], name="dq"),
           helper.make_node("Add", ["a", "wf"], ["y"], name="add")],
          [("a", F, c.f32(3, 4))], [("y", F)], opset=21, inits=[("s", np.float32(0.5))])
    # QuantizeLinear to 4 bits: x spans twice the 4-bit range, so both ends saturate.
    x = c.f32(2, 3, 8, lo=-4, hi=4)
    for signed in (True, False):
        tag = "int4" if signed else "uint4"
        c.add("op21_%s_QuantizeLinear_saturates" % tag,
              [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
               helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq")],
              [("x", F, x)], [("y", F)], opset=21,
              inits=[("s", np.float32(0.25)), ("z", four_bit("z", np.array(-1 if signed else 7), signed))])
        c.add("op21_%s_QuantizeLinear_blocked" % tag,
              [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q", axis=2, block_size=4),
               helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq", axis=2, block_size=4)],
              [("x", F, x)], [("y", F)], opset=21,
              inits=[("s", c.f32(2, 3, 2, lo=0.2, hi=0.6)), ("z", four_bit("z", ints(signed, 2, 3, 2), signed))])
    c.add("op21_uint4_QuantizeLinear_output_dtype",
          [helper.make_node("QuantizeLinear", ["x", "s"], ["q"], name="q", output_dtype=UINT4),
           helper.make_node("DequantizeLinear", ["q", "s"], ["y"], name="dq")],
          [("x", F, c.f32(2, 3, 8, lo=-1, hi=5))], [("y", F)], opset=21, inits=[("s", np.float32(0.25))])


def ms_node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, name=op.lower(), domain=MS, **attrs)


def gelu_family(c):
    for shape in ((2, 3, 8), (4, 16)):
        tag = "x".join(map(str, shape))
        x = c.f32(*shape, lo=-4, hi=4)
        c.add("ms_Gelu_" + tag, [ms_node("Gelu", ["x"], ["y"])], [("x", F, x)], [("y", F)], ms=True)
        c.add("ms_FastGelu_" + tag, [ms_node("FastGelu", ["x"], ["y"])], [("x", F, x)], [("y", F)], ms=True)
        b = c.f32(shape[-1])
        c.add("ms_FastGelu_bias_" + tag, [ms_node("FastGelu", ["x", "b"], ["y"])], [("x", F, x)], [("y", F)],
              inits=[("b", b)], ms=True)
        c.add("ms_BiasGelu_" + tag, [ms_node("BiasGelu", ["x", "b"], ["y"])], [("x", F, x)], [("y", F)],
              inits=[("b", b)], ms=True)
        c.add("ms_QuickGelu_" + tag, [ms_node("QuickGelu", ["x"], ["y"])], [("x", F, x)], [("y", F)], ms=True)
        c.add("ms_QuickGelu_alpha_" + tag, [ms_node("QuickGelu", ["x"], ["y"], alpha=1.0)], [("x", F, x)],
              [("y", F)], ms=True)
    x = c.f32(2, 4, 10)
    c.add("ms_BiasSplitGelu", [ms_node("BiasSplitGelu", ["x", "b"], ["y"])], [("x", F, x)], [("y", F)],
          inits=[("b", c.f32(10))], ms=True)
    c.add("ms_BiasAdd", [ms_node("BiasAdd", ["x", "b", "s"], ["y"])], [("x", F, c.f32(2, 3, 8)), ("s", F, c.f32(2, 3, 8))],
          [("y", F)], inits=[("b", c.f32(8))], ms=True)


def matmul_family(c):
    for ta, tb, alpha in ((0, 0, 1.0), (1, 0, 1.0), (0, 1, 0.5), (1, 1, 2.0)):
        a = c.f32(2, 5, 4) if ta else c.f32(2, 4, 5)
        b = c.f32(2, 6, 5) if tb else c.f32(2, 5, 6)
        c.add("ms_FusedMatMul_tA%d_tB%d_alpha%g" % (ta, tb, alpha),
              [ms_node("FusedMatMul", ["a", "b"], ["y"], transA=ta, transB=tb, alpha=alpha)],
              [("a", F, a), ("b", F, b)], [("y", F)], ms=True)
    c.add("ms_FusedMatMul_2d_weight", [ms_node("FusedMatMul", ["a", "w"], ["y"], transB=1, alpha=0.125)],
          [("a", F, c.f32(3, 7, 16))], [("y", F)], inits=[("w", c.f32(8, 16))], ms=True)
    c.add("ms_FusedMatMul_transBatchA", [ms_node("FusedMatMul", ["a", "b"], ["y"], transBatchA=1)],
          [("a", F, c.f32(4, 2, 3)), ("b", F, c.f32(2, 3, 5))], [("y", F)], ms=True)
    # Integer matmuls: uint8 activations, int8 or uint8 weights, per-tensor and per-column.
    for wt, w in (("u8", c.u8(8, 6)), ("i8", c.i8(8, 6))):
        wtype = U8 if wt == "u8" else I8
        zp_w = np.array(3 if wt == "u8" else -2, dtype=np.uint8 if wt == "u8" else np.int8)
        c.add("ms_MatMulIntegerToFloat_%s" % wt,
              [ms_node("MatMulIntegerToFloat", ["a", "w", "sa", "sw", "za", "zw", "bias"], ["y"])],
              [("a", U8, c.u8(2, 3, 8))], [("y", F)],
              inits=[("w", w), ("sa", np.float32(0.02)), ("sw", np.float32(0.05)), ("za", np.uint8(128)),
                     ("zw", zp_w), ("bias", c.f32(6))], ms=True)
        c.add("ms_MatMulIntegerToFloat_%s_no_zp" % wt,
              [ms_node("MatMulIntegerToFloat", ["a", "w", "sa", "sw"], ["y"])], [("a", U8, c.u8(4, 8))], [("y", F)],
              inits=[("w", w), ("sa", np.float32(0.01)), ("sw", c.f32(6, lo=0.01, hi=0.1))], ms=True)
        c.add("ms_DynamicQuantizeMatMul_%s" % wt,
              [ms_node("DynamicQuantizeMatMul", ["a", "w", "sw", "zw", "bias"], ["y"])],
              [("a", F, c.f32(2, 3, 8))], [("y", F)],
              inits=[("w", w), ("sw", np.float32(0.03)), ("zw", zp_w), ("bias", c.f32(6))], ms=True, rtol=1e-3,
              atol=1e-3)
        c.add("ms_DynamicQuantizeMatMul_%s_per_column" % wt,
              [ms_node("DynamicQuantizeMatMul", ["a", "w", "sw"], ["y"])], [("a", F, c.f32(5, 8))], [("y", F)],
              inits=[("w", w), ("sw", c.f32(6, lo=0.01, hi=0.1))], ms=True, rtol=1e-3, atol=1e-3)


def matmul_nbits_family(c):
    # 4-bit blockwise weights: B uint8 [N, blocks, block_size / 2], two values per byte.
    for k, n, block, zp_kind, bias in ((32, 6, 16, "none", False), (40, 5, 16, "u8", False), (64, 3, 32, "u8", True),
                                       (32, 4, 16, "float", False)):
        blocks = (k + block - 1) // block
        b = c.u8(n, blocks, block // 2)
        scales = c.f32(n * blocks, lo=0.01, hi=0.2)
        ins = ["a", "b", "s"]
        inits = [("b", b), ("s", scales)]
        if zp_kind == "u8":
            inits.append(("zp", c.u8(n * ((blocks + 1) // 2))))
            ins.append("zp")
        elif zp_kind == "float":
            inits.append(("zp", c.f32(n * blocks, lo=6, hi=9)))
            ins.append("zp")
        if bias:
            ins += [""] * (5 - len(ins)) + ["bias"]
            inits.append(("bias", c.f32(n)))
        c.add("ms_MatMulNBits_K%d_N%d_block%d_zp_%s%s" % (k, n, block, zp_kind, "_bias" if bias else ""),
              [ms_node("MatMulNBits", ins, ["y"], K=k, N=n, bits=4, block_size=block)], [("a", F, c.f32(2, 3, k))],
              [("y", F)], inits=inits, ms=True, rtol=1e-4, atol=1e-4)


def norm_family(c):
    for shape in ((2, 3, 16), (5, 32)):
        tag = "x".join(map(str, shape))
        hidden = shape[-1]
        x, s = c.f32(*shape), c.f32(*shape)
        gamma, beta, bias = c.f32(hidden), c.f32(hidden), c.f32(hidden)
        c.add("ms_SkipLayerNormalization_" + tag,
              [ms_node("SkipLayerNormalization", ["x", "s", "g", "b"], ["y"], epsilon=1e-5)],
              [("x", F, x), ("s", F, s)], [("y", F)], inits=[("g", gamma), ("b", beta)], ms=True)
        c.add("ms_SkipLayerNormalization_bias_sum_" + tag,
              [ms_node("SkipLayerNormalization", ["x", "s", "g", "b", "bias"], ["y", "", "", "sum"], epsilon=1e-12)],
              [("x", F, x), ("s", F, s)], [("y", F), ("sum", F)], inits=[("g", gamma), ("b", beta), ("bias", bias)],
              ms=True)
        c.add("ms_SkipLayerNormalization_no_beta_" + tag,
              [ms_node("SkipLayerNormalization", ["x", "s", "g"], ["y"])], [("x", F, x), ("s", F, s)], [("y", F)],
              inits=[("g", gamma)], ms=True)
        c.add("ms_SkipSimplifiedLayerNormalization_" + tag,
              [ms_node("SkipSimplifiedLayerNormalization", ["x", "s", "g"], ["y"], epsilon=1e-6)],
              [("x", F, x), ("s", F, s)], [("y", F)], inits=[("g", gamma)], ms=True)
        c.add("ms_SkipSimplifiedLayerNormalization_sum_" + tag,
              [ms_node("SkipSimplifiedLayerNormalization", ["x", "s", "g"], ["y", "", "", "sum"], epsilon=1e-6)],
              [("x", F, x), ("s", F, s)], [("y", F), ("sum", F)], inits=[("g", gamma)], ms=True)
        c.add("ms_SkipSimplifiedLayerNormalization_bias_" + tag,
              [ms_node("SkipSimplifiedLayerNormalization", ["x", "s", "g", "bias"], ["y", "", "", "sum"])],
              [("x", F, x), ("s", F, s)], [("y", F), ("sum", F)], inits=[("g", gamma), ("bias", bias)], ms=True)
        # The two ops ORT registers in the ONNX domain at opset 1 (models of opsets 1-16).
        c.add("onnx1_LayerNormalization_opset13_" + tag,
              [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], name="ln", axis=-1, epsilon=1e-5)],
              [("x", F, x)], [("y", F)], opset=13, inits=[("g", gamma), ("b", beta)])
        c.add("onnx1_SimplifiedLayerNormalization_" + tag,
              [helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], name="rms", axis=-1, epsilon=1e-6)],
              [("x", F, x)], [("y", F)], opset=14, inits=[("g", gamma)])
    x = c.f32(2, 3, 4, 5)
    c.add("onnx1_LayerNormalization_axis2_stats",
          [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y", "mean", "inv"], name="ln", axis=2)],
          [("x", F, x)], [("y", F), ("mean", F), ("inv", F)], opset=13,
          inits=[("g", c.f32(4, 5)), ("b", c.f32(4, 5))])
    c.add("onnx1_SimplifiedLayerNormalization_axis1_inv",
          [helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y", "inv"], name="rms", axis=1)],
          [("x", F, x)], [("y", F), ("inv", F)], opset=14, inits=[("g", c.f32(3, 4, 5))])


def qlinear_family(c):
    for zt, a, b in (("u8", c.u8(2, 3, 4), c.u8(2, 3, 4)), ("i8", c.i8(2, 3, 4), c.i8(3, 4))):
        et = U8 if zt == "u8" else I8
        zp = (lambda v: np.uint8(v)) if zt == "u8" else (lambda v: np.int8(v - 128))
        for op in ("QLinearAdd", "QLinearMul"):
            c.add("ms_%s_%s" % (op, zt), [ms_node(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"])],
                  [("a", et, a), ("b", et, b)], [("y", et)],
                  inits=[("sa", np.float32(0.05)), ("za", zp(120)), ("sb", np.float32(0.03)), ("zb", zp(130)),
                         ("sc", np.float32(0.08 if op == "QLinearAdd" else 0.4)), ("zc", zp(125))], ms=True, rtol=0,
                  atol=1)
        c.add("ms_QLinearSigmoid_%s" % zt, [ms_node("QLinearSigmoid", ["x", "sx", "zx", "sy", "zy"], ["y"])],
              [("x", et, a)], [("y", et)],
              inits=[("sx", np.float32(0.05)), ("zx", zp(128)), ("sy", np.float32(1 / 256)), ("zy", zp(0))], ms=True,
              rtol=0, atol=1)
        c.add("ms_QLinearLeakyRelu_%s" % zt, [ms_node("QLinearLeakyRelu", ["x", "sx", "zx", "sy", "zy"], ["y"], alpha=0.1)],
              [("x", et, a)], [("y", et)],
              inits=[("sx", np.float32(0.05)), ("zx", zp(128)), ("sy", np.float32(0.04)), ("zy", zp(100))], ms=True,
              rtol=0, atol=1)
    # QLinearConcat, QLinearAveragePool, QLinearSoftmax: each input with its own scale and zero point.
    for zt, et, q in (("u8", U8, c.u8), ("i8", I8, c.i8)):
        zp = (lambda v: np.uint8(v)) if zt == "u8" else (lambda v: np.int8(v - 128))
        c.add("ms_QLinearConcat_%s" % zt,
              [ms_node("QLinearConcat", ["sy", "zy", "a", "sa", "za", "b", "sb", "zb", "d", "sd", "zd"], ["y"], axis=1)],
              [("a", et, q(2, 3, 4)), ("b", et, q(2, 2, 4)), ("d", et, q(2, 1, 4))], [("y", et)],
              inits=[("sy", np.float32(0.06)), ("zy", zp(128)), ("sa", np.float32(0.05)), ("za", zp(120)),
                     ("sb", np.float32(0.06)), ("zb", zp(128)), ("sd", np.float32(0.11)), ("zd", zp(90))], ms=True,
              rtol=0, atol=1)
        for tag, attrs in (("k2s2", dict(kernel_shape=[2, 2], strides=[2, 2])),
                           ("pads_include", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)),
                           ("pads_exclude_ceil", dict(kernel_shape=[3, 2], pads=[1, 0, 1, 0], strides=[2, 2],
                                                      ceil_mode=1))):
            c.add("ms_QLinearAveragePool_%s_%s" % (tag, zt),
                  [ms_node("QLinearAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"], **attrs)],
                  [("x", et, q(1, 3, 6, 7))], [("y", et)],
                  inits=[("sx", np.float32(0.05)), ("zx", zp(128)), ("sy", np.float32(0.03)), ("zy", zp(118))],
                  ms=True, rtol=0, atol=1)
        for tag, attrs, shape in (("opset13", dict(axis=-1, opset=13), (2, 3, 10)),
                                  ("opset11_axis1", dict(axis=1, opset=11), (2, 3, 4))):
            c.add("ms_QLinearSoftmax_%s_%s" % (tag, zt),
                  [ms_node("QLinearSoftmax", ["x", "sx", "zx", "sy", "zy"], ["y"], **attrs)],
                  [("x", et, q(*shape))], [("y", et)],
                  inits=[("sx", np.float32(0.04)), ("zx", zp(128)), ("sy", np.float32(1 / 256)),
                         ("zy", zp(0))], ms=True, rtol=0, atol=1)
    for cl in (0, 1):
        x = c.u8(1, 4, 5, 6)
        c.add("ms_QLinearGlobalAveragePool_channels_last%d" % cl,
              [ms_node("QLinearGlobalAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"], channels_last=cl)],
              [("x", U8, x)], [("y", U8)],
              inits=[("sx", np.float32(0.05)), ("zx", np.uint8(128)), ("sy", np.float32(0.02)),
                     ("zy", np.uint8(128))], ms=True, rtol=0, atol=1)


def attention_family(c):
    x = c.f32(2, 4, 8)
    w, b = c.f32(8, 24, lo=-0.5, hi=0.5), c.f32(24)
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.int32)
    c.add("ms_Attention", [ms_node("Attention", ["x", "w", "b"], ["y"], num_heads=2)], [("x", F, x)], [("y", F)],
          inits=[("w", w), ("b", b)], ms=True)
    c.add("ms_Attention_mask2d", [ms_node("Attention", ["x", "w", "b", "m"], ["y"], num_heads=2)],
          [("x", F, x), ("m", TensorProto.INT32, mask)], [("y", F)], inits=[("w", w), ("b", b)], ms=True)
    c.add("ms_Attention_unidirectional", [ms_node("Attention", ["x", "w", "b"], ["y"], num_heads=4, unidirectional=1)],
          [("x", F, x)], [("y", F)], inits=[("w", w), ("b", b)], ms=True)
    c.add("ms_Attention_scale_no_bias", [ms_node("Attention", ["x", "w"], ["y"], num_heads=2, scale=0.3)],
          [("x", F, x)], [("y", F)], inits=[("w", w)], ms=True)
    c.add("ms_Attention_qkv_hidden_sizes",
          [ms_node("Attention", ["x", "w", "b"], ["y"], num_heads=2, qkv_hidden_sizes=[8, 8, 16])], [("x", F, x)],
          [("y", F)], inits=[("w", c.f32(8, 32, lo=-0.5, hi=0.5)), ("b", c.f32(32))], ms=True)
    c.add("ms_Attention_attention_bias", [ms_node("Attention", ["x", "w", "b", "", "", "ab"], ["y"], num_heads=2)],
          [("x", F, x), ("ab", F, c.f32(1, 2, 4, 4))], [("y", F)], inits=[("w", w), ("b", b)], ms=True)
    q, k, v = c.f32(2, 3, 8), c.f32(2, 5, 8), c.f32(2, 5, 8)
    c.add("ms_MultiHeadAttention", [ms_node("MultiHeadAttention", ["q", "k", "v"], ["y"], num_heads=2)],
          [("q", F, q), ("k", F, k), ("v", F, v)], [("y", F)], ms=True)
    c.add("ms_MultiHeadAttention_bias", [ms_node("MultiHeadAttention", ["q", "k", "v", "b"], ["y"], num_heads=4)],
          [("q", F, q), ("k", F, k), ("v", F, v)], [("y", F)], inits=[("b", c.f32(24))], ms=True)
    c.add("ms_MultiHeadAttention_key_padding_mask",
          [ms_node("MultiHeadAttention", ["q", "k", "v", "", "m"], ["y"], num_heads=2)],
          [("q", F, q), ("k", F, k), ("v", F, v), ("m", TensorProto.INT32, np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]],
                                                                                     np.int32))],
          [("y", F)], ms=True)
    c.add("ms_MultiHeadAttention_attention_bias_scale",
          [ms_node("MultiHeadAttention", ["q", "k", "v", "", "", "ab"], ["y"], num_heads=2, scale=0.2)],
          [("q", F, q), ("k", F, k), ("v", F, v), ("ab", F, c.f32(2, 1, 3, 5))], [("y", F)], ms=True)
    c.add("ms_MultiHeadAttention_cross_value_width",
          [ms_node("MultiHeadAttention", ["q", "k", "v"], ["y"], num_heads=2)],
          [("q", F, q), ("k", F, k), ("v", F, c.f32(2, 5, 12))], [("y", F)], ms=True)


def contrib_in_graph(c):
    # A transformer block as ORT's optimizer leaves it: FusedMatMul for the projections,
    # BiasGelu in the MLP, SkipLayerNormalization around it.
    hidden = 16
    nodes = [ms_node("FusedMatMul", ["x", "w1"], ["h"], transB=1),
             ms_node("BiasGelu", ["h", "b1"], ["g"]),
             helper.make_node("MatMul", ["g", "w2"], ["o"], name="down"),
             ms_node("SkipLayerNormalization", ["o", "x", "gamma", "beta", "b2"], ["y"], epsilon=1e-12)]
    nodes[1].name, nodes[3].name = "bias_gelu", "skip_ln"
    c.add("ms_block_ffn", nodes, [("x", F, c.f32(2, 5, hidden))], [("y", F)],
          inits=[("w1", c.f32(4 * hidden, hidden, lo=-0.3, hi=0.3)), ("b1", c.f32(4 * hidden)),
                 ("w2", c.f32(4 * hidden, hidden, lo=-0.3, hi=0.3)), ("b2", c.f32(hidden)),
                 ("gamma", c.f32(hidden)), ("beta", c.f32(hidden))], ms=True)


def contrib_chain(c):
    # MultiHeadAttention reading Attention's output: a query whose rank shape inference cannot
    # know (libonnx has no schema for com.microsoft ops).
    x = c.f32(2, 3, 8)
    nodes = [ms_node("Attention", ["x", "w", "b", "m"], ["a"], num_heads=2, unidirectional=1),
             ms_node("MultiHeadAttention", ["a", "x", "x", "b2", "m"], ["y"], num_heads=4)]
    c.add("ms_chain_attention_mha", nodes,
          [("x", F, x), ("m", TensorProto.INT32, np.array([[1, 1, 1], [1, 1, 0]], np.int32))], [("y", F)],
          inits=[("w", c.f32(8, 24, lo=-0.5, hi=0.5)), ("b", c.f32(24)), ("b2", c.f32(24))], ms=True)


def opset18_plus(c):
    x = c.f32(2, 3, 4, lo=0.5, hi=2.0)
    for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
               "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"):
        for axes, keep in (([1], 1), ([0, 2], 0)):
            c.add("op18_%s_axes%s_keep%d" % (op, "_".join(map(str, axes)), keep),
                  [helper.make_node(op, ["x", "axes"], ["y"], name="r", keepdims=keep)], [("x", F, x)], [("y", F)],
                  opset=18, inits=[("axes", np.array(axes, np.int64))])
    c.add("op18_Split_num_outputs", [helper.make_node("Split", ["x"], ["a", "b", "c"], name="s", axis=0, num_outputs=3)],
          [("x", F, c.f32(7, 2))], [("a", F), ("b", F), ("c", F)], opset=18)
    for mode in ("constant", "reflect", "edge"):
        c.add("op18_Pad_axes_%s" % mode, [helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], name="p", mode=mode)],
              [("x", F, c.f32(2, 3, 4, 5))], [("y", F)], opset=18,
              inits=[("pads", np.array([1, 2, 2, 1], np.int64)), ("axes", np.array([1, -1], np.int64))])
    c.add("op19_Pad_wrap", [helper.make_node("Pad", ["x", "pads"], ["y"], name="p", mode="wrap")],
          [("x", F, c.f32(2, 5))], [("y", F)], opset=19, inits=[("pads", np.array([0, 2, 0, 3], np.int64))])
    for mode in ("nearest", "linear", "cubic"):
        c.add("op18_Resize_axes_%s" % mode,
              [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rs", mode=mode, axes=[2, 3])],
              [("x", F, c.f32(1, 2, 4, 6))], [("y", F)], opset=18,
              inits=[("scales", np.array([2, 1.5], np.float32))])
        c.add("op18_Resize_antialias_%s" % mode,
              [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rs", mode=mode, antialias=1)],
              [("x", F, c.f32(1, 2, 8, 8))], [("y", F)], opset=18,
              inits=[("scales", np.array([1, 1, 0.5, 0.5], np.float32))])
    for policy in ("not_larger", "not_smaller"):
        c.add("op18_Resize_keep_aspect_%s" % policy,
              [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="rs", mode="linear", axes=[2, 3],
                                keep_aspect_ratio_policy=policy)],
              [("x", F, c.f32(1, 2, 4, 6))], [("y", F)], opset=18, inits=[("sizes", np.array([8, 9], np.int64))])
    for red in ("max", "min"):
        c.add("op18_ScatterElements_%s" % red,
              [helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], name="se", axis=0, reduction=red)],
              [("d", F, c.f32(4, 3)), ("u", F, c.f32(2, 3))], [("y", F)], opset=18,
              inits=[("i", np.array([[1, 0, 2], [1, 3, 0]], np.int64))])
        c.add("op18_ScatterND_%s" % red,
              [helper.make_node("ScatterND", ["d", "i", "u"], ["y"], name="snd", reduction=red)],
              [("d", F, c.f32(4, 3)), ("u", F, c.f32(3, 3))], [("y", F)], opset=18,
              inits=[("i", np.array([[1], [3], [1]], np.int64))])
    a, b = c.rng.integers(-1000, 1000, (3, 4), dtype=np.int64), c.rng.integers(-1000, 1000, (4,), dtype=np.int64)
    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        c.add("op18_%s" % op, [helper.make_node(op, ["a", "b"], ["y"], name="bw")], [("a", I64, a), ("b", I64, b)],
              [("y", I64)], opset=18)
    c.add("op18_BitwiseNot", [helper.make_node("BitwiseNot", ["a"], ["y"], name="bw")], [("a", I64, a)], [("y", I64)],
          opset=18)
    c.add("op18_Mish", [helper.make_node("Mish", ["x"], ["y"], name="mish")], [("x", F, c.f32(3, 5, lo=-6, hi=6))],
          [("y", F)], opset=18)
    c.add("op18_LpPool_dilations", [helper.make_node("LpPool", ["x"], ["y"], name="lp", kernel_shape=[2, 2], p=2,
                                                     dilations=[2, 2])],
          [("x", F, c.f32(1, 2, 6, 6))], [("y", F)], opset=18)
    c.add("op18_CenterCropPad", [helper.make_node("CenterCropPad", ["x", "shape"], ["y"], name="ccp")],
          [("x", F, c.f32(5, 3, 2))], [("y", F)], opset=18, inits=[("shape", np.array([3, 6, 2], np.int64))])
    c.add("op18_Col2Im", [helper.make_node("Col2Im", ["x", "shape", "block"], ["y"], name="c2i")],
          [("x", F, c.f32(1, 5, 5))], [("y", F)], opset=18,
          inits=[("shape", np.array([5, 5], np.int64)), ("block", np.array([1, 5], np.int64))])
    c.add("op18_GroupNormalization", [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn",
                                                       num_groups=2)],
          [("x", F, c.f32(2, 4, 3, 3))], [("y", F)], opset=18, inits=[("s", c.f32(2)), ("b", c.f32(2))])
    c.add("op21_GroupNormalization", [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn",
                                                       num_groups=2)],
          [("x", F, c.f32(2, 4, 3, 3))], [("y", F)], opset=21, inits=[("s", c.f32(4)), ("b", c.f32(4))])
    c.add("op19_AveragePool_dilations", [helper.make_node("AveragePool", ["x"], ["y"], name="ap", kernel_shape=[2, 2],
                                                          dilations=[2, 2])],
          [("x", F, c.f32(1, 2, 6, 6))], [("y", F)], opset=19)
    c.add("op20_Gelu", [helper.make_node("Gelu", ["x"], ["y"], name="gelu")], [("x", F, c.f32(3, 7, lo=-4, hi=4))],
          [("y", F)], opset=20)
    c.add("op20_Gelu_tanh", [helper.make_node("Gelu", ["x"], ["y"], name="gelu", approximate="tanh")],
          [("x", F, c.f32(3, 7, lo=-4, hi=4))], [("y", F)], opset=20)
    xs = c.f32(2, 3)
    xs[0, 1], xs[1, 2] = np.nan, np.inf
    c.add("op20_IsNaN", [helper.make_node("IsNaN", ["x"], ["y"], name="isnan")], [("x", F, xs)],
          [("y", TensorProto.BOOL)], opset=20)
    c.add("op20_IsInf", [helper.make_node("IsInf", ["x"], ["y"], name="isinf")], [("x", F, xs)],
          [("y", TensorProto.BOOL)], opset=20)
    c.add("op20_AffineGrid", [helper.make_node("AffineGrid", ["theta", "size"], ["y"], name="ag", align_corners=0)],
          [("theta", F, c.f32(2, 2, 3, lo=-1, hi=1))], [("y", F)], opset=20,
          inits=[("size", np.array([2, 1, 3, 4], np.int64))])
    for opset in (19, 21):
        c.add("op%d_Reshape" % opset, [helper.make_node("Reshape", ["x", "shape"], ["y"], name="rs")],
              [("x", F, c.f32(2, 3, 4))], [("y", F)], opset=opset, inits=[("shape", np.array([4, -1], np.int64))])
        c.add("op%d_Cast_to_int64" % opset, [helper.make_node("Cast", ["x"], ["y"], name="cast", to=I64)],
              [("x", F, c.f32(3, 4, lo=-100, hi=100))], [("y", I64)], opset=opset)
        c.add("op%d_Shape_start" % opset, [helper.make_node("Shape", ["x"], ["y"], name="shape", start=1)],
              [("x", F, c.f32(2, 3, 4))], [("y", I64)], opset=opset)
    for op, extra in (("Squeeze", []), ("Unsqueeze", [])):
        shape = (2, 1, 4) if op == "Squeeze" else (2, 4)
        c.add("op21_%s" % op, [helper.make_node(op, ["x", "axes"], ["y"], name=op.lower())],
              [("x", F, c.f32(*shape))], [("y", F)], opset=21, inits=[("axes", np.array([1], np.int64))])
    c.add("op21_Transpose", [helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[2, 0, 1])],
          [("x", F, c.f32(2, 3, 4))], [("y", F)], opset=21)
    c.add("op21_Flatten", [helper.make_node("Flatten", ["x"], ["y"], name="f", axis=2)],
          [("x", F, c.f32(2, 3, 4))], [("y", F)], opset=21)
    c.add("op21_ConstantOfShape", [helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos",
                                                    value=helper.make_tensor("v", F, [1], [1.5]))],
          [("s", I64, np.array([2, 3], np.int64))], [("y", F)], opset=21)
    c.add("op21_DequantizeLinear_per_axis",
          [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name="dq", axis=1)],
          [("x", U8, c.u8(2, 3, 4))], [("y", F)], opset=21,
          inits=[("s", c.f32(3, lo=0.01, hi=0.1)), ("z", np.array([1, 128, 250], np.uint8))])
    c.add("op21_QuantizeLinear_per_axis",
          [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q", axis=1)],
          [("x", F, c.f32(2, 3, 4))], [("y", U8)], opset=21,
          inits=[("s", c.f32(3, lo=0.01, hi=0.1)), ("z", np.array([1, 128, 250], np.uint8))], rtol=0, atol=1)
    c.add("op21_DequantizeLinear_blocked",
          [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name="dq", axis=1, block_size=2)],
          [("x", U8, c.u8(3, 4))], [("y", F)], opset=21,
          inits=[("s", c.f32(3, 2, lo=0.01, hi=0.1)), ("z", c.u8(3, 2))])


def opset19_to_21(c):
    """The forms new at opsets 19 to 21 beyond opset18_plus's: a transform, blocked and typed
    quantization, dilated and padded average pooling, DFT with its axis as an input."""
    for scale in (1.7, 0.6):
        c.add("op19_Resize_half_pixel_symmetric_%s" % str(scale).replace(".", "_"),
              [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rs", mode="linear",
                                coordinate_transformation_mode="half_pixel_symmetric")],
              [("x", F, c.f32(1, 2, 5, 7))], [("y", F)], opset=19,
              inits=[("scales", np.array([1, 1, scale, scale], np.float32))])
    c.add("op19_Pad_wrap_axes", [helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], name="p", mode="wrap")],
          [("x", F, c.f32(2, 3, 4))], [("y", F)], opset=19,
          inits=[("pads", np.array([1, 3, 2, 1], np.int64)), ("axes", np.array([1, 2], np.int64))])
    for include in (0, 1):
        c.add("op19_AveragePool_dilations_pads_include%d" % include,
              [helper.make_node("AveragePool", ["x"], ["y"], name="ap", kernel_shape=[3, 2], dilations=[2, 1],
                                pads=[1, 1, 1, 0], strides=[1, 2], count_include_pad=include)],
              [("x", F, c.f32(1, 2, 7, 6))], [("y", F)], opset=19)
    c.add("op19_AveragePool_no_dilations", [helper.make_node("AveragePool", ["x"], ["y"], name="ap",
                                                             kernel_shape=[2, 2], strides=[2, 2])],
          [("x", F, c.f32(1, 3, 6, 6))], [("y", F)], opset=19)
    c.add("op19_Cast_saturate", [helper.make_node("Cast", ["x"], ["y"], name="cast", to=TensorProto.FLOAT16,
                                                  saturate=1), helper.make_node("Cast", ["y"], ["z"], name="back", to=F)],
          [("x", F, c.f32(3, 4, lo=-100, hi=100))], [("z", F)], opset=19, rtol=1e-3)
    c.add("op21_QuantizeLinear_output_dtype_int8",
          [helper.make_node("QuantizeLinear", ["x", "s"], ["y"], name="q", output_dtype=I8)],
          [("x", F, c.f32(2, 3, 4))], [("y", I8)], opset=21, inits=[("s", np.array(0.02, np.float32))], rtol=0, atol=1)
    c.add("op21_QuantizeLinear_blocked",
          [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q", axis=1, block_size=3)],
          [("x", F, c.f32(2, 7))], [("y", U8)], opset=21,
          inits=[("s", c.f32(2, 3, lo=0.01, hi=0.05)), ("z", c.u8(2, 3))], rtol=0, atol=1)
    c.add("op21_DequantizeLinear_blocked_axis0",
          [helper.make_node("DequantizeLinear", ["x", "s"], ["y"], name="dq", axis=0, block_size=4)],
          [("x", I8, c.i8(6, 3))], [("y", F)], opset=21, inits=[("s", c.f32(2, 3, lo=0.01, hi=0.1))])
    c.add("op20_DFT_axis_input", [helper.make_node("DFT", ["x", "", "axis"], ["y"], name="dft")],
          [("x", F, c.f32(2, 8, 1))], [("y", F)], opset=20, inits=[("axis", np.array(1, np.int64))])


def rotary_family(c):
    """RotaryEmbedding: the halves and interleaved pairings, positions as [B, S] or an offset,
    [B, S, N*H] and [B, N, S, H] inputs, a partial rotary dimension."""
    def caches(max_seq, half):
        freq = 1.0 / (10000 ** (np.arange(half) / half))
        ang = np.outer(np.arange(max_seq), freq)
        return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)

    for tag, shape, attrs, half, pos in (
            ("3d_halves", (2, 5, 16), {}, 4, c.rng.integers(0, 12, (2, 5))),
            ("3d_interleaved", (2, 5, 16), dict(interleaved=1), 4, c.rng.integers(0, 12, (2, 5))),
            ("3d_offset", (1, 4, 24), dict(num_heads=3), 4, np.array([3])),
            ("4d", (2, 3, 4, 8), {}, 4, c.rng.integers(0, 12, (2, 4))),
            ("4d_interleaved_offset", (1, 2, 6, 8), dict(interleaved=1), 4, np.array([5])),
            ("partial", (2, 3, 32), dict(num_heads=2, rotary_embedding_dim=8), 4, c.rng.integers(0, 12, (2, 3)))):
        cos, sin = caches(12, half)
        c.add("ms_RotaryEmbedding_%s" % tag,
              [ms_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], **attrs)],
              [("x", F, c.f32(*shape))], [("y", F)], ms=True,
              inits=[("pos", np.asarray(pos, np.int64)), ("cos", cos), ("sin", sin)])


def new_op_forms(c):
    """More forms of the ops new or changed at 18 to 21: antialiased Resize at other scales,
    transforms and filters, GroupNormalization, Col2Im, CenterCropPad, AffineGrid and DFT-20
    variants, FusedMatMul's batch transposes."""
    for mode in ("linear", "cubic"):
        for tag, scales, shape in (("0_6", [1, 1, 0.6, 0.6], (1, 2, 10, 10)), ("0_35x0_7", [1, 1, 0.35, 0.7],
                                                                                 (2, 1, 12, 9)),
                                   ("up1_5", [1, 1, 1.5, 1.5], (1, 1, 4, 5))):
            c.add("op18_Resize_antialias_%s_%s" % (mode, tag),
                  [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rs", mode=mode, antialias=1)],
                  [("x", F, c.f32(*shape))], [("y", F)], opset=18, inits=[("scales", np.array(scales, np.float32))])
        c.add("op18_Resize_antialias_%s_exclude_outside" % mode,
              [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rs", mode=mode, antialias=1,
                                exclude_outside=1)],
              [("x", F, c.f32(1, 2, 9, 9))], [("y", F)], opset=18,
              inits=[("scales", np.array([1, 1, 0.4, 0.4], np.float32))])
        c.add("op18_Resize_antialias_%s_sizes_axes" % mode,
              [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="rs", mode=mode, antialias=1,
                                axes=[2, 3])],
              [("x", F, c.f32(1, 3, 11, 7))], [("y", F)], opset=18, inits=[("sizes", np.array([4, 3], np.int64))])
        c.add("op18_Resize_antialias_%s_align_corners" % mode,
              [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rs", mode=mode, antialias=1,
                                coordinate_transformation_mode="align_corners")],
              [("x", F, c.f32(1, 1, 8, 8))], [("y", F)], opset=18,
              inits=[("scales", np.array([1, 1, 0.5, 0.75], np.float32))])
    c.add("op18_Resize_antialias_cubic_a_0_5",
          [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rs", mode="cubic", antialias=1,
                            cubic_coeff_a=-0.5)],
          [("x", F, c.f32(1, 1, 9, 9))], [("y", F)], opset=18, inits=[("scales", np.array([1, 1, 0.5, 0.5], np.float32))])
    for opset, groups, shape in ((18, 1, (2, 4, 5)), (18, 4, (1, 4, 3, 3)), (21, 3, (2, 6, 4)), (21, 1, (1, 3, 2, 2, 2))):
        ch = shape[1]
        n = ch if opset >= 21 else groups
        c.add("op%d_GroupNormalization_g%d_rank%d" % (opset, groups, len(shape)),
              [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn", num_groups=groups,
                                epsilon=1e-3)],
              [("x", F, c.f32(*shape))], [("y", F)], opset=opset, inits=[("s", c.f32(n)), ("b", c.f32(n))])
    for tag, image, block, attrs in (("strided", [6, 6], [2, 2], dict(strides=[2, 2])),
                                     ("padded", [4, 5], [3, 3], dict(pads=[1, 1, 1, 1])),
                                     ("dilated", [7, 7], [2, 3], dict(dilations=[2, 1], strides=[1, 2])),
                                     ("all", [5, 6], [2, 2], dict(dilations=[1, 2], pads=[0, 1, 1, 0],
                                                                  strides=[2, 1]))):
        d, s, p = attrs.get("dilations", [1, 1]), attrs.get("strides", [1, 1]), attrs.get("pads", [0, 0, 0, 0])
        L = 1
        for i in range(2):
            L *= (image[i] + p[i] + p[i + 2] - d[i] * (block[i] - 1) - 1) // s[i] + 1
        c.add("op18_Col2Im_%s" % tag, [helper.make_node("Col2Im", ["x", "shape", "block"], ["y"], name="c2i", **attrs)],
              [("x", F, c.f32(2, 2 * block[0] * block[1], L))], [("y", F)], opset=18,
              inits=[("shape", np.array(image, np.int64)), ("block", np.array(block, np.int64))])
    for tag, shape, target, axes in (("crop_odd", (7, 4), [4, 4], None), ("pad_odd", (2, 3), [5, 6], None),
                                     ("axes", (3, 8, 5), [6, 3], [0, 2]), ("negative_axes", (3, 8, 5), [2], [-2])):
        kw = {} if axes is None else dict(axes=axes)
        c.add("op18_CenterCropPad_%s" % tag, [helper.make_node("CenterCropPad", ["x", "shape"], ["y"], name="ccp", **kw)],
              [("x", F, c.f32(*shape))], [("y", F)], opset=18, inits=[("shape", np.array(target, np.int64))])
    c.add("op18_CenterCropPad_int64", [helper.make_node("CenterCropPad", ["x", "shape"], ["y"], name="ccp")],
          [("x", I64, c.rng.integers(-50, 50, (4, 5), dtype=np.int64))], [("y", I64)], opset=18,
          inits=[("shape", np.array([3, 8], np.int64))])
    for align in (0, 1):
        c.add("op20_AffineGrid_3d_align%d" % align,
              [helper.make_node("AffineGrid", ["theta", "size"], ["y"], name="ag", align_corners=align)],
              [("theta", F, c.f32(2, 3, 4, lo=-1, hi=1))], [("y", F)], opset=20,
              inits=[("size", np.array([2, 3, 2, 3, 4], np.int64))])
    c.add("op20_AffineGrid_align1", [helper.make_node("AffineGrid", ["theta", "size"], ["y"], name="ag", align_corners=1)],
          [("theta", F, c.f32(1, 2, 3, lo=-1, hi=1))], [("y", F)], opset=20,
          inits=[("size", np.array([1, 2, 5, 3], np.int64))])
    for tag, ins, attrs, x, inits in (
            ("default_axis", ["x"], {}, c.f32(2, 3, 6, 1), []),
            ("negative_axis", ["x", "", "axis"], {}, c.f32(2, 6, 3, 2), [("axis", np.array(-3, np.int64))]),
            ("inverse_complex", ["x", "", "axis"], dict(inverse=1), c.f32(1, 8, 2), [("axis", np.array(1, np.int64))]),
            ("onesided_length", ["x", "n", "axis"], dict(onesided=1), c.f32(2, 5, 1),
             [("n", np.array(8, np.int64)), ("axis", np.array(1, np.int64))])):
        c.add("op20_DFT_%s" % tag, [helper.make_node("DFT", ins, ["y"], name="dft", **attrs)], [("x", F, x)], [("y", F)],
              opset=20, inits=inits, atol=1e-4)
    for tag, a, b, attrs in (("transBatchB", c.f32(2, 3, 4), c.f32(5, 2, 4), dict(transBatchB=1, transB=1)),
                             ("transBatchA_transA", c.f32(3, 2, 4), c.f32(2, 3, 5), dict(transBatchA=1, transA=1)),
                             ("transBatch_4d", c.f32(3, 2, 2, 4), c.f32(4, 2, 2, 5),
                              dict(transBatchA=1, transBatchB=1, alpha=0.5))):
        c.add("ms_FusedMatMul_%s" % tag, [ms_node("FusedMatMul", ["a", "b"], ["y"], **attrs)],
              [("a", F, a), ("b", F, b)], [("y", F)], ms=True)


def deform_conv_family(c):
    """DeformConv-19: offsets within and past the image, a mask and a bias, groups and offset
    groups, strides, pads and dilations."""
    for tag, (n, ch, h, w), (m, kh, kw), attrs, with_mask in (
            ("basic", (1, 2, 5, 5), (3, 3, 3), {}, False),
            ("mask_bias", (2, 2, 5, 6), (4, 3, 3), dict(pads=[1, 1, 1, 1]), True),
            ("groups", (1, 4, 6, 6), (4, 2, 2), dict(group=2, offset_group=2, strides=[2, 1]), True),
            ("dilated", (1, 3, 7, 7), (2, 3, 2), dict(dilations=[2, 1], pads=[1, 0, 2, 1]), False)):
        g = attrs.get("group", 1)
        og = attrs.get("offset_group", 1)
        st, dl, pd = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1]), attrs.get("pads", [0, 0, 0, 0])
        oh = (h + pd[0] + pd[2] - dl[0] * (kh - 1) - 1) // st[0] + 1
        ow = (w + pd[1] + pd[3] - dl[1] * (kw - 1) - 1) // st[1] + 1
        ins = ["x", "w", "off", "b"] + (["mask"] if with_mask else [])
        inits = [("w", c.f32(m, ch // g, kh, kw)), ("b", c.f32(m))]
        inputs = [("x", F, c.f32(n, ch, h, w)), ("off", F, c.f32(n, og * 2 * kh * kw, oh, ow, lo=-1.5, hi=1.5))]
        if with_mask:
            inputs.append(("mask", F, c.f32(n, og * kh * kw, oh, ow, lo=0, hi=1)))
        c.add("op19_DeformConv_%s" % tag,
              [helper.make_node("DeformConv", ins, ["y"], name="dc", kernel_shape=[kh, kw], **attrs)],
              inputs, [("y", F)], opset=19, inits=inits, atol=1e-4)


def gqa_family(c):
    """GroupQueryAttention: a batch-2 prompt (one padded), one-token decoding over a past KV cache
    with a different past length per batch, a multi-token step after a past, GQA ratios 1 to 4,
    packed QKV, a custom scale, rotary (halves, interleaved, partial, position_ids), a local
    window, softcap, smooth softmax, head sinks, attention_bias and causal=0. Every case lists
    present_key and present_value, so the KV cache ORT writes is compared too."""
    I32 = TensorProto.INT32

    def caches(max_seq, half):
        ang = np.outer(np.arange(max_seq), 1.0 / (10000 ** (np.arange(half) / half)))
        return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)

    # tag, (B, S, N, kvN, H, past rows P), seqlens_k, total_sequence_length, attributes, extras:
    # "packed" (Q|K|V in one input), "rotary" (cache rows, cache width), optional inputs by slot.
    for tag, (b, s, n, kvn, h, p), seqlens, total, attrs, extra in (
            ("prompt", (2, 4, 4, 2, 8, 0), [3, 3], 4, {}, {}),
            ("prompt_padded", (2, 4, 4, 2, 8, 0), [3, 1], 4, {}, {}),
            ("prompt_mha_scale", (2, 3, 2, 2, 8, 0), [2, 2], 3, dict(scale=0.3), {}),
            ("prompt_ratio4_past_buffer", (2, 3, 4, 1, 8, 5), [2, 2], 3, {}, {}),
            ("decode", (2, 1, 4, 2, 8, 5), [3, 5], 6, {}, {}),
            ("decode_scale", (2, 1, 4, 1, 8, 4), [4, 2], 5, dict(scale=0.2), {}),
            ("continue_prompt", (1, 3, 4, 2, 8, 4), [5], 6, {}, {}),
            ("packed_prompt", (2, 3, 4, 2, 8, 0), [2, 2], 3, {}, dict(packed=True)),
            ("packed_decode", (2, 1, 4, 2, 8, 3), [2, 3], 4, {}, dict(packed=True)),
            ("rotary_prompt", (2, 3, 2, 1, 16, 0), [2, 2], 3, dict(do_rotary=1), dict(rotary=(8, 8))),
            ("rotary_decode_interleaved", (2, 1, 4, 2, 16, 4), [3, 4], 5, dict(do_rotary=1, rotary_interleaved=1),
             dict(rotary=(8, 8))),
            ("rotary_partial_padded", (2, 3, 2, 1, 32, 0), [2, 1], 3, dict(do_rotary=1), dict(rotary=(8, 8))),
            ("rotary_packed_decode", (2, 1, 4, 2, 16, 3), [2, 3], 4, dict(do_rotary=1),
             dict(rotary=(8, 8), packed=True)),
            ("rotary_position_ids", (2, 1, 2, 1, 16, 3), [2, 3], 4, dict(do_rotary=1),
             dict(rotary=(12, 8), pos=[[7], [9]])),
            ("local_window_prompt", (1, 6, 2, 1, 8, 0), [5], 6, dict(local_window_size=2), {}),
            ("local_window_padded", (2, 6, 2, 1, 8, 0), [5, 2], 6, dict(local_window_size=2), {}),
            ("local_window_decode", (1, 1, 2, 1, 8, 6), [6], 7, dict(local_window_size=3), {}),
            ("softcap", (2, 3, 4, 1, 8, 0), [2, 2], 3, dict(softcap=1.5), {}),
            ("softcap_window_bias", (2, 4, 2, 1, 8, 0), [3, 3], 4, dict(softcap=0.8, local_window_size=2),
             dict(bias=(2, 1))),
            ("smooth_softmax", (2, 3, 4, 2, 8, 0), [2, 2], 3, dict(smooth_softmax=1), {}),
            ("head_sink_decode", (2, 1, 2, 1, 8, 3), [3, 2], 4, {}, dict(sink=True)),
            ("attention_bias_decode", (2, 1, 2, 1, 8, 4), [3, 4], 5, {}, dict(bias=(1, 2))),
            ("non_causal_padded", (2, 3, 2, 1, 8, 0), [2, 1], 3, dict(causal=0), {})):
        packed = extra.get("packed", False)
        names = ["q", "", "", "", "", "sl", "tt"]
        inputs = [("q", F, c.f32(b, s, (n + 2 * kvn) * h if packed else n * h))]
        if not packed:
            names[1:3] = ["k", "v"]
            inputs += [("k", F, c.f32(b, s, kvn * h)), ("v", F, c.f32(b, s, kvn * h))]
        if p:
            names[3:5] = ["pk", "pv"]
            inputs += [("pk", F, c.f32(b, kvn, p, h)), ("pv", F, c.f32(b, kvn, p, h))]
        inputs += [("sl", I32, np.array(seqlens, np.int32)), ("tt", I32, np.array(total, np.int32))]
        inits = []
        optional = {}
        if "rotary" in extra:
            cos, sin = caches(*extra["rotary"])
            optional.update({7: ("cos", cos), 8: ("sin", sin)})
        if "pos" in extra:
            optional[9] = ("pos", np.array(extra["pos"], np.int64))
        if "bias" in extra:
            optional[10] = ("bias", c.f32(extra["bias"][0], extra["bias"][1], s, total, lo=-3, hi=3))
        if extra.get("sink"):
            optional[11] = ("sink", c.f32(n))
        for slot in sorted(optional):
            names += [""] * (slot - len(names)) + [optional[slot][0]]
            inits.append(optional[slot])
        c.add("ms_GroupQueryAttention_%s" % tag,
              [ms_node("GroupQueryAttention", names, ["y", "present_key", "present_value"], num_heads=n,
                       kv_num_heads=kvn, **attrs)],
              inputs, [("y", F), ("present_key", F), ("present_value", F)], ms=True, inits=inits)


def across_opsets(c):
    """Common operators, unchanged since 17 or earlier, in models declaring opsets 18 to 21:
    the importer and the kernels must take them at every opset ONNX Runtime does."""
    x4 = c.f32(1, 3, 6, 6)
    unary = ["Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Sqrt", "Softsign", "Softplus", "Erf", "Floor", "Ceil",
             "Round", "Sin", "Cos", "HardSwish", "Identity"]
    for opset in (18, 19, 20, 21):
        for op in unary:
            x = c.f32(3, 4, lo=0.1, hi=3) if op == "Sqrt" else c.f32(3, 4)
            c.add("op%d_%s" % (opset, op), [helper.make_node(op, ["x"], ["y"], name=op.lower())], [("x", F, x)],
                  [("y", F)], opset=opset)
        for op in ("Add", "Mul", "Sub", "Div", "Max", "Min", "Pow"):
            a = c.f32(2, 3, 4, lo=0.5, hi=2) if op == "Pow" else c.f32(2, 3, 4)
            b = c.f32(4, lo=0.5, hi=2)
            c.add("op%d_%s_broadcast" % (opset, op), [helper.make_node(op, ["a", "b"], ["y"], name=op.lower())],
                  [("a", F, a), ("b", F, b)], [("y", F)], opset=opset)
        c.add("op%d_Conv" % opset, [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1],
                                                     strides=[2, 2])],
              [("x", F, x4)], [("y", F)], opset=opset, inits=[("w", c.f32(4, 3, 3, 3)), ("b", c.f32(4))], atol=1e-4)
        c.add("op%d_MatMul" % opset, [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
              [("a", F, c.f32(2, 3, 8)), ("b", F, c.f32(8, 5))], [("y", F)], opset=opset, atol=1e-4)
        c.add("op%d_Gemm" % opset, [helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm", transB=1, alpha=0.5)],
              [("a", F, c.f32(3, 8))], [("y", F)], opset=opset, inits=[("b", c.f32(6, 8)), ("c", c.f32(6))], atol=1e-4)
        c.add("op%d_Softmax" % opset, [helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=-1)],
              [("x", F, c.f32(2, 3, 7))], [("y", F)], opset=opset)
        c.add("op%d_LayerNormalization" % opset,
              [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="ln", axis=-1)],
              [("x", F, c.f32(2, 3, 8))], [("y", F)], opset=opset, inits=[("s", c.f32(8)), ("b", c.f32(8))])
        c.add("op%d_BatchNormalization" % opset,
              [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn")],
              [("x", F, x4)], [("y", F)], opset=opset,
              inits=[("s", c.f32(3)), ("b", c.f32(3)), ("m", c.f32(3)), ("v", c.f32(3, lo=0.5, hi=2))])
        c.add("op%d_MaxPool" % opset, [helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[3, 3],
                                                        strides=[2, 2], pads=[1, 1, 1, 1])],
              [("x", F, x4)], [("y", F)], opset=opset)
        c.add("op%d_GlobalAveragePool" % opset, [helper.make_node("GlobalAveragePool", ["x"], ["y"], name="gap")],
              [("x", F, x4)], [("y", F)], opset=opset)
        for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceL2"):
            c.add("op%d_%s_axes_input" % (opset, op),
                  [helper.make_node(op, ["x", "axes"], ["y"], name=op.lower(), keepdims=0)],
                  [("x", F, c.f32(2, 3, 4))], [("y", F)], opset=opset, inits=[("axes", np.array([1, -1], np.int64))])
        c.add("op%d_Concat" % opset, [helper.make_node("Concat", ["a", "b"], ["y"], name="cat", axis=1)],
              [("a", F, c.f32(2, 3)), ("b", F, c.f32(2, 2))], [("y", F)], opset=opset)
        c.add("op%d_Slice" % opset, [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"], name="slice")],
              [("x", F, c.f32(4, 6))], [("y", F)], opset=opset,
              inits=[("st", np.array([1, -1], np.int64)), ("en", np.array([4, 0], np.int64)),
                     ("ax", np.array([0, 1], np.int64)), ("sp", np.array([2, -2], np.int64))])
        c.add("op%d_Gather" % opset, [helper.make_node("Gather", ["x", "i"], ["y"], name="gather", axis=1)],
              [("x", F, c.f32(3, 5))], [("y", F)], opset=opset, inits=[("i", np.array([[0, 4], [-1, 2]], np.int64))])
        c.add("op%d_Where" % opset, [helper.make_node("Where", ["m", "a", "b"], ["y"], name="where")],
              [("m", TensorProto.BOOL, c.rng.integers(0, 2, (3, 4)).astype(np.bool_)), ("a", F, c.f32(3, 4)),
               ("b", F, c.f32(4))], [("y", F)], opset=opset)
        c.add("op%d_Split_num_outputs_uneven" % opset,
              [helper.make_node("Split", ["x"], ["y0", "y1", "y2"], name="split", axis=1, num_outputs=3)],
              [("x", F, c.f32(2, 7))], [("y0", F), ("y1", F), ("y2", F)], opset=opset)
        c.add("op%d_Expand" % opset, [helper.make_node("Expand", ["x", "s"], ["y"], name="expand")],
              [("x", F, c.f32(3, 1))], [("y", F)], opset=opset, inits=[("s", np.array([2, 3, 4], np.int64))])


def main():
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    c = Cases(out)
    for family in (gelu_family, matmul_family, matmul_nbits_family, norm_family, attention_family, qlinear_family, contrib_in_graph,
                   contrib_chain, opset18_plus, opset19_to_21, new_op_forms, across_opsets,
                   rotary_family, deform_conv_family, gqa_family, int4_family):
        family(c)
    print("%d cases in %s" % (len(c.names), out))


if __name__ == "__main__":
    main()
