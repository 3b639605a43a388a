#!/usr/bin/python3
"""ai.onnx opsets 1 to 6 in gearbox: the forms that changed meaning at opset 7 (issue 25 item 1).

ONNX Runtime runs no model below opset 7, so it cannot judge these; numpy does. Each case writes
a small graph in its legacy form with onnx's helper (onnx 1.12's checker knows opsets 1-6),
runs it through `gearbox run` and compares with numpy's result for the operator's documented
legacy semantics: element-wise ops with `broadcast`/`axis` (B aligned with A's dims from
`axis`), Gemm's `broadcast`, BatchNormalization's `is_test`/`spatial`/`consumed_inputs`,
Reshape-1's `shape` attribute, Pad-1's `paddings`. A Caffe2-style model at opset 4 (Conv, bias
Add with axis 1, BatchNormalization-1, Relu, Reshape-1, Gemm-1) must give exactly what its
opset-13 rewrite gives. What stays unsupported (training-mode and per-activation BatchNormalization)
must be refused with OP_UNSUPPORTED naming the node.

Usage: check_legacy_opsets.py --gearbox PATH --work-dir DIR
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper
import onnx

F = TensorProto.FLOAT
B = TensorProto.BOOL
I32 = TensorProto.INT32


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def model(nodes, inputs, outputs, opset, inits=()):
    # IR version 3 (what opset-1-6 exporters wrote) lists every initializer among the inputs too.
    if opset < 7:
        inputs = inputs + [vi(k, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.asarray(v).dtype], list(np.asarray(v).shape))
                           for k, v in inits]
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=[numpy_helper.from_array(v, k) for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 3 if opset < 7 else 7
    return m


class Runner:
    def __init__(self, gearbox, work):
        self.gearbox, self.work = gearbox, work
        self.passed, self.failures = 0, []

    def run(self, case, m, feeds):
        d = os.path.join(self.work, case)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        path = os.path.join(d, "model.onnx")
        onnx.save(m, path)
        cmd = [self.gearbox, "run", path, "--output-dir", os.path.join(d, "out")]
        for k, v in feeds.items():
            np.save(os.path.join(d, k + ".npy"), v)
            cmd += ["--input", "%s=%s" % (k, os.path.join(d, k + ".npy"))]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        outs = None
        if r.returncode == 0:
            outs = [np.load(os.path.join(d, "out", o.name + ".npy")) for o in m.graph.output]
        return r, outs

    def verdict(self, case, ok, detail):
        if ok:
            self.passed += 1
            print("PASS", case)
        else:
            self.failures.append(case)
            print("FAIL", case, detail)

    def against(self, case, m, feeds, want, tol=1e-5):
        r, outs = self.run(case, m, feeds)
        if outs is None:
            return self.verdict(case, False, "rc %d: %s" % (r.returncode, r.stderr.strip()[-400:]))
        ok = all(o.shape == w.shape and o.dtype == w.dtype and np.allclose(o, w, rtol=tol, atol=tol)
                 for o, w in zip(outs, want))
        self.verdict(case, ok, "got %s, want %s" % ([o.tolist() for o in outs][:1], [w.tolist() for w in want][:1]))

    def same(self, case, m_old, m_new, feeds):
        r1, o1 = self.run(case + "_legacy", m_old, feeds)
        r2, o2 = self.run(case + "_opset13", m_new, feeds)
        ok = o1 is not None and o2 is not None and all(np.array_equal(a, b) for a, b in zip(o1, o2))
        self.verdict(case, ok, (r1.stderr + r2.stderr).strip()[-400:])

    def refused(self, case, m, feeds, parts):
        r, _ = self.run(case, m, feeds)
        ok = r.returncode not in (0,) and r.returncode < 128 and all(p in r.stderr for p in parts)
        self.verdict(case, ok, "rc %d: %s" % (r.returncode, r.stderr.strip()[-400:]))


def elementwise_cases(t, rng):
    a4 = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    # (op, opset, attrs, A, B, numpy view of B aligned for broadcasting, numpy op)
    pos = lambda *s: rng.uniform(0.5, 2.0, s).astype(np.float32)  # noqa: E731
    b3 = rng.standard_normal(3).astype(np.float32)
    b34 = rng.standard_normal((3, 4)).astype(np.float32)
    b5 = rng.standard_normal(5).astype(np.float32)
    cases = [
        ("Add_axis1", "Add", 6, dict(broadcast=1, axis=1), a4, b3, b3[None, :, None, None], np.add),
        ("Add_opset1_axis1_consumed", "Add", 1, dict(broadcast=1, axis=1, consumed_inputs=[0, 0]), a4, b3,
         b3[None, :, None, None], np.add),
        ("Mul_axis1_2d", "Mul", 6, dict(broadcast=1, axis=1), a4, b34, b34[None, :, :, None], np.multiply),
        ("Sub_suffix", "Sub", 6, dict(broadcast=1), a4, b5, b5, np.subtract),
        ("Sub_axis_negative", "Sub", 6, dict(broadcast=1, axis=-3), a4, b34, b34[None, :, :, None], np.subtract),
        ("Div_same_shape", "Div", 6, {}, a4, pos(2, 3, 4, 5), None, np.divide),
        ("Pow_axis0", "Pow", 6, dict(broadcast=1, axis=0), pos(2, 3, 4), pos(2), None, np.power),
        ("Add_axis_last", "Add", 6, dict(broadcast=1, axis=3), a4, b5, b5, np.add),
    ]
    for name, op, opset, attrs, a, b, b_view, fn in cases:
        if b_view is None:  # same shape, or axis 0 with B [A.shape[0]]
            b_view = b if b.shape == a.shape else b.reshape(b.shape + (1,) * (a.ndim - b.ndim))
        m = model([helper.make_node(op, ["a", "b"], ["y"], name="n_" + name, **attrs)],
                  [vi("a", F, list(a.shape)), vi("b", F, list(b.shape))], [vi("y", F, None)], opset)
        t.against(name, m, {"a": a, "b": b}, [fn(a, b_view).astype(np.float32)])
    ia = rng.integers(-3, 3, (2, 3, 4)).astype(np.int32)
    ib = rng.integers(-3, 3, (3,)).astype(np.int32)
    for op, fn in (("Equal", np.equal), ("Greater", np.greater), ("Less", np.less)):
        m = model([helper.make_node(op, ["a", "b"], ["y"], name="cmp", broadcast=1, axis=1)],
                  [vi("a", I32, [2, 3, 4]), vi("b", I32, [3])], [vi("y", B, None)], 6 if op != "Equal" else 1)
        t.against("%s_axis1" % op, m, {"a": ia, "b": ib}, [fn(ia, ib[None, :, None])])
    ba = rng.integers(0, 2, (2, 3, 4)).astype(np.bool_)
    bb = rng.integers(0, 2, (3, 4)).astype(np.bool_)
    for op, fn in (("And", np.logical_and), ("Or", np.logical_or), ("Xor", np.logical_xor)):
        m = model([helper.make_node(op, ["a", "b"], ["y"], name="logic", broadcast=1, axis=1)],
                  [vi("a", B, [2, 3, 4]), vi("b", B, [3, 4])], [vi("y", B, None)], 1)
        t.against("%s_axis1" % op, m, {"a": ba, "b": bb}, [fn(ba, bb)])
    # An axis that puts B past A's last dim is the model's error.
    m = model([helper.make_node("Add", ["a", "b"], ["y"], name="bad_axis", broadcast=1, axis=3)],
              [vi("a", F, [2, 3, 4, 5]), vi("b", F, [3, 4])], [vi("y", F, None)], 6)
    t.refused("Add_axis_out_of_range", m, {"a": a4, "b": b34}, ["ATTRIBUTE_INVALID", "bad_axis"])


def gemm_bn_reshape_pad_cases(t, rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    c1 = rng.standard_normal(5).astype(np.float32)
    m = model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm", broadcast=1, alpha=0.5, beta=2.0)],
              [vi("a", F, [3, 4])], [vi("y", F, None)], 6, [("b", b), ("c", c1)])
    t.against("Gemm_broadcast_C", m, {"a": a}, [(0.5 * a @ b + 2.0 * c1).astype(np.float32)])
    c2 = rng.standard_normal((3, 5)).astype(np.float32)
    m = model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm", transB=1)],
              [vi("a", F, [3, 4])], [vi("y", F, None)], 1, [("b", b.T.copy()), ("c", c2)])
    t.against("Gemm_opset1_full_C", m, {"a": a}, [(a @ b + c2).astype(np.float32)])

    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    s, bias = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    mean, var = rng.standard_normal(3).astype(np.float32), rng.uniform(0.5, 2, 3).astype(np.float32)
    want = ((x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-3) * s[None, :, None, None]
            + bias[None, :, None, None]).astype(np.float32)
    inits = [("s", s), ("bias", bias), ("mean", mean), ("var", var)]
    for opset, extra in ((6, {}), (1, dict(consumed_inputs=[0, 0, 0, 1, 1]))):
        m = model([helper.make_node("BatchNormalization", ["x", "s", "bias", "mean", "var"], ["y"], name="bn",
                                    is_test=1, epsilon=1e-3, momentum=0.9, **extra)],
                  [vi("x", F, [2, 3, 4, 4])], [vi("y", F, None)], opset, inits)
        t.against("BatchNormalization_opset%d_test_mode" % opset, m, {"x": x}, [want], tol=1e-4)
    m = model([helper.make_node("BatchNormalization", ["x", "s", "bias", "mean", "var"], ["y"], name="bn_train")],
              [vi("x", F, [2, 3, 4, 4])], [vi("y", F, None)], 6, inits)
    t.refused("BatchNormalization_training_refused", m, {"x": x}, ["OP_UNSUPPORTED", "bn_train", "is_test"])
    m = model([helper.make_node("BatchNormalization", ["x", "s", "bias", "mean", "var"], ["y"], name="bn_act",
                                is_test=1, spatial=0)],
              [vi("x", F, [2, 3, 4, 4])], [vi("y", F, None)], 6, inits)
    t.refused("BatchNormalization_per_activation_refused", m, {"x": x}, ["OP_UNSUPPORTED", "bn_act", "spatial"])
    m = model([helper.make_node("BatchNormalization", ["x", "s", "bias", "mean", "var"], ["y", "run_mean", "run_var", "saved_mean", "saved_var"], name="bn_stats", is_test=1)],
              [vi("x", F, [2, 3, 4, 4])], [vi("y", F, None), vi("run_mean", F, None)], 6, inits)
    t.refused("BatchNormalization_statistics_read_refused", m, {"x": x}, ["OP_UNSUPPORTED", "bn_stats", "statistics"])

    m = model([helper.make_node("Reshape", ["x"], ["y"], name="reshape", shape=[0, -1])],
              [vi("x", F, [2, 3, 4, 4])], [vi("y", F, None)], 1)
    t.against("Reshape_opset1_shape_attribute", m, {"x": x}, [x.reshape(2, -1)])
    p = rng.standard_normal((2, 3)).astype(np.float32)
    m = model([helper.make_node("Pad", ["x"], ["y"], name="pad", paddings=[1, 0, 0, 2], value=1.5)],
              [vi("x", F, [2, 3])], [vi("y", F, None)], 1)
    t.against("Pad_opset1_paddings", m, {"x": p}, [np.pad(p, ((1, 0), (0, 2)), constant_values=1.5)])


def caffe2_style_model(t, rng):
    """Conv without bias, the bias as Add(axis=1), BatchNormalization-1, Relu, Reshape-1, Gemm-1 at
    opset 4: the shape of the model zoo's opset-3 to -6 exports; against its opset-13 rewrite."""
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    cb = rng.standard_normal(4).astype(np.float32)
    s, bb = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    mean, var = rng.standard_normal(4).astype(np.float32), rng.uniform(0.5, 2, 4).astype(np.float32)
    fw = (rng.standard_normal((4 * 6 * 6, 10)) * 0.1).astype(np.float32)
    fb = rng.standard_normal(10).astype(np.float32)
    inits = [("w", w), ("cb", cb), ("s", s), ("bb", bb), ("mean", mean), ("var", var), ("fw", fw), ("fb", fb)]
    legacy = model([
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Add", ["c", "cb"], ["cbias"], name="bias", broadcast=1, axis=1),
        helper.make_node("BatchNormalization", ["cbias", "s", "bb", "mean", "var"], ["bn"], name="bn", is_test=1,
                         epsilon=1e-5, consumed_inputs=[0, 0, 0, 1, 1]),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r"], ["flat"], name="flat", shape=[0, -1]),
        helper.make_node("Gemm", ["flat", "fw", "fb"], ["y"], name="fc", broadcast=1)],
        [vi("x", F, [2, 3, 6, 6])], [vi("y", F, None)], 4, inits)
    modern = model([
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Add", ["c", "cb3"], ["cbias"], name="bias"),
        helper.make_node("BatchNormalization", ["cbias", "s", "bb", "mean", "var"], ["bn"], name="bn", epsilon=1e-5),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "shape"], ["flat"], name="flat"),
        helper.make_node("Gemm", ["flat", "fw", "fb"], ["y"], name="fc")],
        [vi("x", F, [2, 3, 6, 6])], [vi("y", F, None)], 13,
        inits + [("cb3", cb.reshape(4, 1, 1)), ("shape", np.array([0, -1], np.int64))])
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    t.same("caffe2_style_model_vs_opset13", legacy, modern, {"x": x})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gearbox", required=True)
    ap.add_argument("--work-dir", required=True)
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    t = Runner(a.gearbox, a.work_dir)
    rng = np.random.default_rng(6)
    for cases in (elementwise_cases, gemm_bn_reshape_pad_cases, caffe2_style_model):
        cases(t, rng)
    print("legacy opsets: %d passed, %d failed%s" % (t.passed, len(t.failures),
                                                    (": " + " ".join(t.failures)) if t.failures else ""))
    return 1 if t.failures else 0


if __name__ == "__main__":
    sys.exit(main())
