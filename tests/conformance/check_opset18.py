#!/usr/bin/python3
"""ai.onnx opset 18 in gearbox, judged without a newer onnx (Debian's onnx 1.12 stops at 17).

Each pair case writes one small graph twice with onnx's helper -- at opset 17, and rewritten
to its opset-18 form (Reduce* axes attribute -> input, Split -> num_outputs, Pad -> axes
input, Resize -> axes / keep_aspect_ratio_policy) -- runs both through `gearbox run` on the
same inputs and requires identical outputs (bit for bit). The opset-17 model is the
reference: gearbox runs it with the kernels the ONNX node suite gates. Ops with no opset-17
form (Bitwise*, ScatterND/ScatterElements max/min, Mish, OptionalHasElement on a tensor) are
compared with numpy instead. Ops that appeared at 18 (CenterCropPad, Col2Im,
GroupNormalization) must be refused in an opset-17 model with OP_UNSUPPORTED naming the node
and opset 17; at 18 the oracle suite (tests/conformance/oracle) judges them against ONNX Runtime,
with antialiased Resize.

With --torch, two torch 1.13 models (a CNN, a transformer encoder) are exported at opset 17,
rewritten to 18, 19, 20 and 21 by the same rewriter, and every form must give the opset-17
model's outputs exactly (and torch's, within float tolerance).

Usage: check_opset18.py --gearbox PATH --work-dir DIR [--torch]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REDUCE_OPS = ["ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
              "ReduceLogSumExp", "ReduceSumSquare", "ReduceMean"]
F = TensorProto.FLOAT


def model(nodes, inputs, outputs, opset, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def vi(name, elem=F, shape=None):
    """A tensor value info; an int shape is a rank with unknown dims (onnx 1.12's checker
    wants a shape on every graph output)."""
    if isinstance(shape, int):
        shape = [None] * shape
    return helper.make_tensor_value_info(name, elem, shape)


def to_opset18(m, version=18):
    """The opset-17 model `m` in its opset-18 form (a copy): what a newer exporter writes. With
    `version` 19 to 21, the same graph declaring that opset (and IR version 9, or 10 at 21): no
    op a torch 1.13 export writes changed its form or meaning after 18 (19-21 added modes,
    attributes with defaults that keep the old behaviour, and types)."""
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    counter = [0]

    def rewrite(g):
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    rewrite(a.g)
            if n.domain not in ("", "ai.onnx"):
                continue
            if n.op_type in REDUCE_OPS:
                axes = [a for a in n.attribute if a.name == "axes"]
                if axes:
                    name = "axes18_%d" % counter[0]
                    counter[0] += 1
                    g.initializer.append(numpy_helper.from_array(np.array(axes[0].ints, dtype=np.int64), name))
                    n.attribute.remove(axes[0])
                    del n.input[1:]
                    n.input.append(name)
            elif n.op_type == "Split":
                has_split = len(n.input) > 1 and n.input[1] != ""
                if not has_split and not any(a.name == "num_outputs" for a in n.attribute):
                    n.attribute.append(helper.make_attribute("num_outputs", len(n.output)))
    rewrite(m2.graph)
    for op in m2.opset_import:
        if op.domain in ("", "ai.onnx"):
            op.version = version
    if version >= 19:
        m2.ir_version = 10 if version >= 21 else 9
    return m2


class Runner:
    def __init__(self, gearbox, work):
        self.gearbox = gearbox
        self.work = work
        self.failures = []
        self.passed = 0

    def run(self, case, tag, m, feeds):
        d = os.path.join(self.work, case, tag)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        path = os.path.join(d, "model.onnx")
        onnx.save(m, path)
        cmd = [self.gearbox, "run", path, "--output-dir", os.path.join(d, "out")]
        for name, arr in feeds.items():
            f = os.path.join(d, name + ".npy")
            np.save(f, arr)
            cmd += ["--input", "%s=%s" % (name, f)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        outs = None
        if r.returncode == 0:
            outs = [np.load(os.path.join(d, "out", re.sub(r"[^A-Za-z0-9_.-]", "_", o.name) + ".npy"))
                    for o in m.graph.output]
        return r, outs

    def verdict(self, case, ok, why=""):
        print(("PASS " if ok else "FAIL ") + case + ("" if ok else "  " + why))
        if ok:
            self.passed += 1
        else:
            self.failures.append(case)

    def pair(self, case, m17, feeds, m18=None):
        """m17 and its opset-18 form give bit-identical outputs."""
        m18 = m18 if m18 is not None else to_opset18(m17)
        r17, o17 = self.run(case, "opset17", m17, feeds)
        r18, o18 = self.run(case, "opset18", m18, feeds)
        if o17 is None or o18 is None:
            return self.verdict(case, False, "rc %d / %d: %s" % (r17.returncode, r18.returncode,
                                                               (r17.stderr + r18.stderr).strip()[-400:]))
        same = len(o17) == len(o18) and all(
            a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
            for a, b in zip(o17, o18))
        self.verdict(case, same, "outputs differ: %s vs %s" % ([o.shape for o in o17], [o.shape for o in o18]))

    def against(self, case, m, feeds, expected, rtol=0.0, atol=0.0):
        """m gives numpy's `expected` outputs (exactly, unless a tolerance is given)."""
        r, outs = self.run(case, "opset18", m, feeds)
        if outs is None:
            return self.verdict(case, False, "rc %d: %s" % (r.returncode, r.stderr.strip()[-400:]))
        ok = len(outs) == len(expected) and all(
            o.shape == e.shape and o.dtype == e.dtype and np.allclose(o, e, rtol=rtol, atol=atol)
            for o, e in zip(outs, expected))
        self.verdict(case, ok, "got %s, want %s" % (outs, expected))

    def refused(self, case, m, feeds, code, parts):
        r, _ = self.run(case, "opset18", m, feeds)
        ok = r.returncode != 0 and r.returncode < 128 and code in r.stderr and all(p in r.stderr for p in parts)
        self.verdict(case, ok, "rc %d, stderr: %s" % (r.returncode, r.stderr.strip()[-400:]))


def reduce_cases(t, rng):
    x = rng.uniform(0.5, 2.0, (2, 3, 4)).astype(np.float32)  # positive: LogSum's domain
    for op in REDUCE_OPS:
        for axes, keep in (([1], 1), ([0, 2], 0), ([-1], 1)):
            node = helper.make_node(op, ["x"], ["y"], name="r", axes=axes, keepdims=keep)
            t.pair("%s_axes%s_keep%d" % (op, "_".join(map(str, axes)), keep),
                   model([node], [vi("x", F, [2, 3, 4])], [vi("y", F, 3 if keep else 3 - len(axes))], 17), {"x": x})
        # No axes: every axis, at 17 and at 18.
        t.pair("%s_all_axes" % op, model([helper.make_node(op, ["x"], ["y"], name="r")],
                                         [vi("x", F, [2, 3, 4])], [vi("y", F, 3)], 17), {"x": x})
    # Axes as a graph input (not a constant) at 18.
    m17 = model([helper.make_node("ReduceMean", ["x"], ["y"], name="r", axes=[2], keepdims=1)],
                [vi("x", F, [2, 3, 4])], [vi("y", F, 3)], 17)
    m18 = model([helper.make_node("ReduceMean", ["x", "axes"], ["y"], name="r", keepdims=1)],
                [vi("x", F, [2, 3, 4]), vi("axes", TensorProto.INT64, [1])], [vi("y", F, 3)], 18)
    r17, o17 = t.run("ReduceMean_axes_graph_input", "opset17", m17, {"x": x})
    r18, o18 = t.run("ReduceMean_axes_graph_input", "opset18", m18, {"x": x, "axes": np.array([2], np.int64)})
    t.verdict("ReduceMean_axes_graph_input", o17 is not None and o18 is not None and np.array_equal(o17[0], o18[0]),
              (r17.stderr + r18.stderr).strip()[-400:])
    # noop_with_empty_axes=1 and no axes: the input itself.
    m = model([helper.make_node("ReduceMax", ["x"], ["y"], name="r", noop_with_empty_axes=1)],
              [vi("x", F, [2, 3, 4])], [vi("y", F, 3)], 18)
    t.against("ReduceMax_noop_with_empty_axes", m, {"x": x}, [x])


def split_cases(t, rng):
    x = rng.standard_normal((2, 6, 3)).astype(np.float32)
    m17 = model([helper.make_node("Split", ["x"], ["a", "b", "c"], name="s", axis=1)],
                [vi("x", F, [2, 6, 3])], [vi("a", F, 3), vi("b", F, 3), vi("c", F, 3)], 17)
    t.pair("Split_num_outputs_even", m17, {"x": x})
    x7 = rng.standard_normal((7, 2)).astype(np.float32)
    m17 = model([helper.make_node("Split", ["x", "split"], ["a", "b", "c"], name="s", axis=0)],
                [vi("x", F, [7, 2])], [vi("a", F, 2), vi("b", F, 2), vi("c", F, 2)], 17,
                [numpy_helper.from_array(np.array([3, 3, 1], np.int64), "split")])
    m18 = model([helper.make_node("Split", ["x"], ["a", "b", "c"], name="s", axis=0, num_outputs=3)],
                [vi("x", F, [7, 2])], [vi("a", F, 2), vi("b", F, 2), vi("c", F, 2)], 18)
    t.pair("Split_num_outputs_uneven", m17, {"x": x7}, m18)
    t.against("Split_num_outputs_uneven_numpy", m18, {"x": x7}, [x7[:3], x7[3:6], x7[6:]])


def pad_cases(t, rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    for mode in ("constant", "reflect", "edge"):
        m17 = model([helper.make_node("Pad", ["x", "pads"], ["y"], name="p", mode=mode)],
                    [vi("x", F, [2, 3, 4, 5])], [vi("y", F, 4)], 17,
                    [numpy_helper.from_array(np.array([0, 1, 0, 2, 0, 2, 0, 1], np.int64), "pads")])
        m18 = model([helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], name="p", mode=mode)],
                    [vi("x", F, [2, 3, 4, 5])], [vi("y", F, 4)], 18,
                    [numpy_helper.from_array(np.array([1, 2, 2, 1], np.int64), "pads"),
                     numpy_helper.from_array(np.array([1, -1], np.int64), "axes")])
        t.pair("Pad_axes_%s" % mode, m17, {"x": x}, m18)
    # Without axes the opset-13 form is still opset-18 Pad.
    m17 = model([helper.make_node("Pad", ["x", "pads", "v"], ["y"], name="p")], [vi("x", F, [2, 3, 4, 5])],
                [vi("y", F, 4)], 17, [numpy_helper.from_array(np.array([1, 0, 0, 0, 0, 1, 2, 3], np.int64), "pads"),
                                numpy_helper.from_array(np.array(1.5, np.float32), "v")])
    t.pair("Pad_no_axes", m17, {"x": x})


def resize_cases(t, rng):
    x = rng.standard_normal((1, 2, 4, 6)).astype(np.float32)
    scales17 = numpy_helper.from_array(np.array([1, 1, 2, 1.5], np.float32), "scales")
    for mode in ("nearest", "linear", "cubic"):
        m17 = model([helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rs", mode=mode)],
                    [vi("x", F, [1, 2, 4, 6])], [vi("y", F, 4)], 17, [scales17])
        m18 = model([helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rs", mode=mode, axes=[2, 3])],
                    [vi("x", F, [1, 2, 4, 6])], [vi("y", F, 4)], 18,
                    [numpy_helper.from_array(np.array([2, 1.5], np.float32), "scales")])
        t.pair("Resize_axes_%s" % mode, m17, {"x": x}, m18)
        t.pair("Resize_unchanged_%s" % mode, m17, {"x": x})
    # keep_aspect_ratio_policy with sizes: one scale for the named axes, out = round(scale * in).
    for policy, sizes, scale in (("not_larger", [8, 12], 2.0), ("not_larger", [8, 9], 1.5),
                                 ("not_smaller", [5, 9], 1.5)):
        m17 = model([helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rs", mode="linear")],
                    [vi("x", F, [1, 2, 4, 6])], [vi("y", F, 4)], 17,
                    [numpy_helper.from_array(np.array([1, 1, scale, scale], np.float32), "scales")])
        m18 = model([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="rs", mode="linear",
                                      axes=[2, 3], keep_aspect_ratio_policy=policy)],
                    [vi("x", F, [1, 2, 4, 6])], [vi("y", F, 4)], 18,
                    [numpy_helper.from_array(np.array(sizes, np.int64), "sizes")])
        t.pair("Resize_%s_%s" % (policy, "x".join(map(str, sizes))), m17, {"x": x}, m18)


def scatter_cases(t, rng):
    data = rng.standard_normal((4, 3)).astype(np.float32)
    idx = np.array([[1, 0, 2], [1, 3, 0]], np.int64)
    upd = rng.standard_normal((2, 3)).astype(np.float32)
    for red, fn in (("max", np.maximum), ("min", np.minimum)):
        want = data.copy()
        for i in range(2):
            for j in range(3):
                want[idx[i, j], j] = fn(want[idx[i, j], j], upd[i, j])
        m = model([helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], name="se", axis=0, reduction=red)],
                  [vi("d", F, [4, 3]), vi("i", TensorProto.INT64, [2, 3]), vi("u", F, [2, 3])], [vi("y", F, 2)], 18)
        t.against("ScatterElements_%s" % red, m, {"d": data, "i": idx, "u": upd}, [want])
        nd_idx = np.array([[1], [3], [1]], np.int64)
        nd_upd = rng.standard_normal((3, 3)).astype(np.float32)
        want = data.copy()
        for k in range(3):
            want[nd_idx[k, 0]] = fn(want[nd_idx[k, 0]], nd_upd[k])
        m = model([helper.make_node("ScatterND", ["d", "i", "u"], ["y"], name="snd", reduction=red)],
                  [vi("d", F, [4, 3]), vi("i", TensorProto.INT64, [3, 1]), vi("u", F, [3, 3])], [vi("y", F, 2)], 18)
        t.against("ScatterND_%s" % red, m, {"d": data, "i": nd_idx, "u": nd_upd}, [want])
    # add (opset 16) unchanged at 18.
    m17 = model([helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], name="se", axis=0, reduction="add")],
                [vi("d", F, [4, 3]), vi("i", TensorProto.INT64, [2, 3]), vi("u", F, [2, 3])], [vi("y", F, 2)], 17)
    t.pair("ScatterElements_add_unchanged", m17, {"d": data, "i": idx, "u": upd})


def bitwise_cases(t, rng):
    for dt, np_dt in ((TensorProto.INT32, np.int32), (TensorProto.UINT8, np.uint8), (TensorProto.INT64, np.int64),
                      (TensorProto.INT8, np.int8), (TensorProto.UINT16, np.uint16)):
        info = np.iinfo(np_dt)
        a = rng.integers(info.min, info.max, (3, 4), dtype=np_dt, endpoint=True)
        b = rng.integers(info.min, info.max, (4,), dtype=np_dt, endpoint=True)
        for op, fn in (("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or), ("BitwiseXor", np.bitwise_xor)):
            m = model([helper.make_node(op, ["a", "b"], ["y"], name="bw")], [vi("a", dt, [3, 4]), vi("b", dt, [4])],
                      [vi("y", dt, 2)], 18)
            t.against("%s_%s" % (op, np.dtype(np_dt).name), m, {"a": a, "b": b}, [fn(a, b)])
        m = model([helper.make_node("BitwiseNot", ["a"], ["y"], name="bw")], [vi("a", dt, [3, 4])], [vi("y", dt, 2)], 18)
        t.against("BitwiseNot_%s" % np.dtype(np_dt).name, m, {"a": a}, [np.bitwise_not(a)])


def misc_cases(t, rng):
    x = rng.standard_normal((3, 5)).astype(np.float32) * 4
    m = model([helper.make_node("Mish", ["x"], ["y"], name="mish")], [vi("x", F, [3, 5])], [vi("y", F, 2)], 18)
    xd = x.astype(np.float64)
    t.against("Mish", m, {"x": x}, [(xd * np.tanh(np.log1p(np.exp(xd)))).astype(np.float32)], rtol=1e-5, atol=1e-6)
    m = model([helper.make_node("OptionalHasElement", ["x"], ["y"], name="has")], [vi("x", F, [3, 5])],
              [vi("y", TensorProto.BOOL, [])], 18)
    t.against("OptionalHasElement_tensor", m, {"x": x}, [np.array(True)])
    xp = rng.uniform(-1, 1, (1, 2, 5, 5)).astype(np.float32)
    m17 = model([helper.make_node("LpPool", ["x"], ["y"], name="lp", kernel_shape=[2, 2], p=2)],
                [vi("x", F, [1, 2, 5, 5])], [vi("y", F, 4)], 17)
    t.pair("LpPool_unchanged", m17, {"x": xp})
    # A graph of ops unchanged at 18: Conv, Relu, MatMul, Softmax, Transpose, Concat.
    w = numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "w")
    mm = numpy_helper.from_array(rng.standard_normal((3, 3)).astype(np.float32), "mm")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Slice", ["r", "st", "en", "ax"], ["s"], name="slice"),
             helper.make_node("MatMul", ["s", "mm"], ["m"], name="matmul"),
             helper.make_node("Softmax", ["m"], ["y"], name="softmax", axis=-1)]
    inits = [w, mm, numpy_helper.from_array(np.array([0], np.int64), "st"),
             numpy_helper.from_array(np.array([3], np.int64), "en"),
             numpy_helper.from_array(np.array([3], np.int64), "ax")]
    m17 = model(nodes, [vi("x", F, [1, 2, 5, 5])], [vi("y", F, 4)], 17, inits)
    t.pair("unchanged_ops_graph", m17, {"x": xp})
    # Ops new at 18 in a model of opset 17, where they do not exist: a clear refusal naming the node.
    for op, ins, attrs in (("CenterCropPad", ["x", "shape"], {}), ("Col2Im", ["x", "shape", "block"], {}),
                           ("GroupNormalization", ["x", "scale", "bias"], {"num_groups": 2})):
        inits = [numpy_helper.from_array(np.array([2, 2], np.int64), "shape"),
                 numpy_helper.from_array(np.array([1, 1], np.int64), "block"),
                 numpy_helper.from_array(np.ones(2, np.float32), "scale"),
                 numpy_helper.from_array(np.zeros(2, np.float32), "bias")]
        inits = [i for i in inits if i.name in ins]
        m = model([helper.make_node(op, ins, ["y"], name="new_op", **attrs)], [vi("x", F, [1, 2, 5, 5])], [vi("y", F, 4)],
                  17, inits)
        t.refused("%s_at_17_refused" % op, m, {"x": xp}, "OP_UNSUPPORTED", ["new_op", op, "opset 17"])


def torch_case(t):
    import torch
    import torch.nn.functional as tf

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.fc = torch.nn.Linear(8, 5)

        def forward(self, x):
            y = torch.relu(self.bn(self.conv(x)))
            y = tf.pad(y, (1, 2, 0, 1), mode="reflect")
            a, b = torch.split(y, 4, dim=1)
            y = tf.interpolate(a * b, scale_factor=2.0, mode="bilinear", align_corners=False)
            y = tf.max_pool2d(y, 2)
            s = y.mean(dim=(2, 3)) + y.amax(dim=(2, 3)) + y.amin(dim=(2, 3)) + torch.logsumexp(y, dim=3).sum(dim=2)
            s = s + y.norm(p=2, dim=(2, 3)) + y.abs().sum(dim=(2, 3)) + torch.prod(torch.sigmoid(y[:, :, :2, :2]), dim=3).sum(dim=2)
            return torch.softmax(self.fc(torch.cat([s, s], dim=1)[:, :8]), dim=1)

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(2, 3, 8, 8)
    d = os.path.join(t.work, "torch")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "export17.onnx")
    torch.onnx.export(net, (x,), path, opset_version=17, input_names=["x"], output_names=["y"])
    m17 = onnx.load(path)
    ops = sorted({n.op_type for n in m17.graph.node})
    print("torch export ops:", " ".join(ops))
    m18 = to_opset18(m17)
    reduces = sum(1 for n in m18.graph.node if n.op_type in REDUCE_OPS)
    t.verdict("torch_export_has_reduces", reduces >= 3, "the export has %d Reduce* nodes to rewrite" % reduces)
    with torch.no_grad():
        want = net(x).numpy()
    for version in (18, 19, 20, 21):
        m_new = to_opset18(m17, version)
        t.pair("torch_export_17_vs_%d" % version, m17, {"x": x.numpy()}, m_new)
        t.against("torch_export_%d_vs_torch" % version, m_new, {"x": x.numpy()}, [want], rtol=1e-4, atol=1e-5)

    # A transformer: embedding, attention, LayerNorm-17, GELU, the graph torch writes for them.
    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(50, 32)
            self.layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu",
                                                          batch_first=True)
            self.norm = torch.nn.LayerNorm(32)
            self.head = torch.nn.Linear(32, 7)

        def forward(self, ids):
            return torch.log_softmax(self.head(self.norm(self.layer(self.emb(ids)))).mean(dim=1), dim=-1)

    enc = Encoder().eval()
    ids = torch.randint(0, 50, (2, 6))
    path = os.path.join(d, "encoder17.onnx")
    torch.onnx.export(enc, (ids,), path, opset_version=17, input_names=["ids"], output_names=["y"])
    e17 = onnx.load(path)
    print("torch encoder export ops:", " ".join(sorted({n.op_type for n in e17.graph.node})))
    with torch.no_grad():
        want = enc(ids).numpy()
    for version in (18, 19, 20, 21):
        e_new = to_opset18(e17, version)
        t.pair("torch_encoder_17_vs_%d" % version, e17, {"ids": ids.numpy()}, e_new)
        t.against("torch_encoder_%d_vs_torch" % version, e_new, {"ids": ids.numpy()}, [want], rtol=1e-4,
                  atol=1e-5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gearbox", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--torch", action="store_true", help="run the torch export case instead of the op cases")
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    t = Runner(a.gearbox, a.work_dir)
    rng = np.random.default_rng(18)
    if a.torch:
        torch_case(t)
    else:
        for cases in (reduce_cases, split_cases, pad_cases, resize_cases, scatter_cases, bitwise_cases, misc_cases):
            cases(t, rng)
    print("opset 18: %d passed, %d failed%s" % (t.passed, len(t.failures),
                                              (": " + " ".join(t.failures)) if t.failures else ""))
    return 1 if t.failures else 0


if __name__ == "__main__":
    sys.exit(main())
