#!/usr/bin/python3
"""Checks `--dump-tensors` on gearbox run and gearbox profile, on small models built here.

Usage: check_dump.py --gearbox BIN --work-dir DIR

References are computed here with torch (conv2d, relu) and numpy, never read back from
gearbox:
* a Conv fused away by the optimizer: a pattern matching only it is a USAGE error naming the
  fused node and the --disable-pass that keeps it; one that also matches a surviving Conv
  dumps that one and warns about the other;
* with the fusion off, the Conv output, the Relu's input (:pre) and the Mul output equal the
  torch reference, and the Mul output equals the run's own model output file;
* the fused node dumped by its domain-qualified op type equals relu(conv(x));
* Loop body nodes: one file per iteration, values of the running sum computed with numpy;
* bad patterns: unknown suffix, nothing matching;
* index.json names node, op type, io, index and call of every file; gearbox profile dumps too;
* with cpu.dnnl first (layout_nhwc, layout_blocked): the message about a fused-away Conv follows
  the optimizer's record to the node that runs; channels-last and blocked dumps come back in the
  model's layout and value names (against torch), --dump-raw-layout keeps the engine's layout.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def cnn_model(path, rng):
    w1 = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    b1 = (rng.standard_normal(4) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((5, 4, 1, 1)) * 0.3).astype(np.float32)
    s = np.array(1.5, np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv_a", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu_a"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv_b"),
        helper.make_node("Mul", ["c2", "s"], ["y"], name="mul_b"),
    ]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 8, 8])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                           numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(s, "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return w1, b1, w2, s


def loop_model(path):
    # v_k = v_{k-1} + x, 3 iterations; the body's Add reads x from the outer scope.
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
         helper.make_node("Add", ["v_in", "x"], ["v_out"], name="body_add")],
        "body",
        [helper.make_tensor_value_info("iter", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [4])])
    g = helper.make_graph(
        [helper.make_node("Loop", ["trips", "cond", "v0"], ["v"], name="loop", body=body)], "loop",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("v0", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(np.array(3, np.int64), "trips"), numpy_helper.from_array(np.array(True), "cond")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, path)


def blocked_model(path, rng):
    # Three 3x3 convolutions of 128 channels at 14x14: with cpu.dnnl first the layout passes
    # run them as com.gearbox.Nchw16cConv on [1, 8, 14, 14, 16] tensors.
    ws = [(rng.standard_normal((128, 128, 3, 3)) * 0.05).astype(np.float32) for _ in range(3)]
    nodes = [helper.make_node("Conv", ["x" if i == 0 else f"c{i - 1}", f"w{i}"], [f"c{i}"], name=f"conv{i}",
                              pads=[1, 1, 1, 1]) for i in range(3)]
    g = helper.make_graph(nodes, "blocked", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128, 14, 14])],
                          [helper.make_tensor_value_info("c2", TensorProto.FLOAT, [1, 128, 14, 14])],
                          [numpy_helper.from_array(wi, f"w{i}") for i, wi in enumerate(ws)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return ws


def gearbox(bin_, *args, engines="cpu.ref"):
    # cpu.ref by default: the graph the optimizer leaves (which nodes fuse into what) does not
    # depend on engine-specific passes such as layout_nhwc then.
    cmd = [bin_] + [str(a) for a in args]
    env = dict(os.environ, GEARBOX_ENGINES=engines)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    print("$ " + " ".join(cmd) + f"  -> exit {r.returncode}")
    return r


def index(d):
    with open(os.path.join(d, "index.json")) as f:
        return json.load(f)


def close(a, b, tol=1e-5):
    return a.shape == b.shape and np.allclose(a, b, rtol=tol, atol=tol)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--work-dir", required=True)
    a = p.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    w = lambda *parts: os.path.join(a.work_dir, *parts)  # noqa: E731
    rng = np.random.default_rng(7)

    model = w("cnn.onnx")
    w1, b1, w2, s = cnn_model(model, rng)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(w("x.npy"), x)
    with torch.no_grad():
        c1 = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w1), torch.from_numpy(b1), padding=1)
        r1 = torch.relu(c1)
        c2 = torch.nn.functional.conv2d(r1, torch.from_numpy(w2))
    c1, r1, c2 = c1.numpy(), r1.numpy(), c2.numpy()
    y = c2 * s

    # 1. "Conv" matches conv_b (runs) and conv_a (fused with relu_a): dumps conv_b, warns about conv_a.
    d = w("d1")
    r = gearbox(a.gearbox, "run", model, "--input", f"x={w('x.npy')}", "--dump-tensors", "Conv:post", "--dump-dir", d)
    check(r.returncode == 0, "Conv:post with conv_a fused away exits 0")
    check("conv_a" in r.stderr and "relu_a/FusedConv" in r.stderr and "--disable-pass conv_fusion" in r.stderr,
          "warning names the fused-away conv_a, the fused node relu_a/FusedConv and --disable-pass conv_fusion")
    if r.returncode == 0:
        files = index(d)["files"]
        check([(f["node"], f["op_type"], f["io"], f["index"]) for f in files] == [("conv_b", "Conv", "output", 0)],
              f"index.json lists exactly conv_b's output 0 (got {[(f['node'], f['io']) for f in files]})")
        check(close(np.load(os.path.join(d, "conv_b_out0.npy")), c2), "conv_b output equals torch conv2d(relu(conv2d(x)))")
        check("dumped 1 tensor(s)" in r.stdout, "run reports 1 dumped tensor")

    # 2. A pattern matching only the fused-away node: a USAGE error with the fix.
    r = gearbox(a.gearbox, "run", model, "--random-inputs", "--dump-tensors", "conv_a:post", "--dump-dir", w("d2"))
    check(r.returncode == 1 and "USAGE" in r.stderr and "relu_a/FusedConv" in r.stderr
          and "--disable-pass conv_fusion" in r.stderr,
          "conv_a:post (fused away) is a USAGE error naming relu_a/FusedConv and --disable-pass conv_fusion")
    check(not os.path.exists(w("d2")), "nothing is written when the patterns are refused")

    # 3. Fusion off: conv_a output, relu_a input (:pre) and the Mul output against torch.
    d = w("d3")
    r = gearbox(a.gearbox, "run", model, "--input", f"x={w('x.npy')}", "--disable-pass", "conv_fusion",
                "--dump-tensors", "conv_a:post", "--dump-tensors", "relu_a:pre", "--dump-tensors", "Mul",
                "--dump-dir", d, "--output-dir", w("d3_out"))
    check(r.returncode == 0, "fusion off: three patterns exit 0")
    if r.returncode == 0:
        got = {(f["node"], f["io"], f["index"]): f for f in index(d)["files"]}
        check(set(got) == {("conv_a", "output", 0), ("relu_a", "input", 0), ("mul_b", "output", 0)},
              f"index.json lists conv_a out 0, relu_a in 0, mul_b out 0 (got {sorted(got)})")
        check(close(np.load(os.path.join(d, "conv_a_out0.npy")), c1), "conv_a output equals torch conv2d(x)+b")
        check(close(np.load(os.path.join(d, "relu_a_in0.npy")), c1), "relu_a:pre input 0 equals torch conv2d(x)+b")
        mul = np.load(os.path.join(d, "mul_b_out0.npy"))
        check(close(mul, y), "mul_b output equals torch reference * 1.5")
        check(np.array_equal(mul, np.load(w("d3_out", "y.npy"))), "mul_b dump is bit-identical to the model output y")
        e = got.get(("mul_b", "output", 0), {})
        check(e.get("op_type") == "Mul" and e.get("value") == "y" and e.get("shape") == [1, 5, 8, 8]
              and e.get("dtype") == "float32" and e.get("call") == 0 and e.get("depth") == 0,
              f"index entry of mul_b: op_type, value, shape, dtype, call, depth ({e})")

    # 4. The fused node by its domain-qualified op type: relu(conv(x)).
    d = w("d4")
    r = gearbox(a.gearbox, "run", model, "--input", f"x={w('x.npy')}", "--dump-tensors", "com.gearbox.FusedConv:post",
                "--dump-dir", d)
    check(r.returncode == 0, "com.gearbox.FusedConv:post exits 0")
    if r.returncode == 0:
        files = index(d)["files"]
        check(len(files) == 1 and files[0]["node"] == "relu_a/FusedConv", f"one file, of relu_a/FusedConv ({files})")
        if files:
            check(close(np.load(os.path.join(d, files[0]["file"])), r1), "FusedConv output equals torch relu(conv2d(x)+b)")
            check("/" not in files[0]["file"], f"file name is sanitized ({files[0]['file']})")

    # 5. Bad patterns.
    r = gearbox(a.gearbox, "run", model, "--random-inputs", "--dump-tensors", "Conv:middle", "--dump-dir", w("d5"))
    check(r.returncode == 1 and "USAGE" in r.stderr and "':middle'" in r.stderr and ":post" in r.stderr,
          "Conv:middle is a USAGE error naming the suffix and the valid ones")
    r = gearbox(a.gearbox, "run", model, "--random-inputs", "--dump-tensors", "NoSuchOp:post", "--dump-dir", w("d5"))
    check(r.returncode == 1 and "USAGE" in r.stderr and "matches no node" in r.stderr and "com.gearbox.FusedConv" in r.stderr,
          "NoSuchOp:post is a USAGE error listing the op types that run")
    r = gearbox(a.gearbox, "run", model, "--random-inputs", "--dump-tensors", ":post", "--dump-dir", w("d5"))
    check(r.returncode == 1 and "USAGE" in r.stderr, "':post' (no target) is a USAGE error")

    # 6. Loop body nodes: one file per iteration.
    loop = w("loop.onnx")
    loop_model(loop)
    lx = np.array([1, 2, 3, 4], np.float32)
    lv0 = np.array([0.5, -1, 10, 0], np.float32)
    np.save(w("lx.npy"), lx)
    np.save(w("lv0.npy"), lv0)
    d = w("d6")
    r = gearbox(a.gearbox, "run", loop, "--input", f"x={w('lx.npy')}", "--input", f"v0={w('lv0.npy')}",
                "--dump-tensors", "body_add:post", "--dump-tensors", "Add:pre", "--dump-dir", d)
    check(r.returncode == 0, "Loop body patterns exit 0")
    if r.returncode == 0:
        files = index(d)["files"]
        outs = sorted((f for f in files if f["io"] == "output"), key=lambda f: f["call"])
        check([f["call"] for f in outs] == [0, 1, 2] and all(f["depth"] == 1 for f in outs),
              f"body_add output dumped once per iteration (calls {[f['call'] for f in outs]}), depth 1")
        check(all(close(np.load(os.path.join(d, f["file"])), lv0 + lx * (f["call"] + 1)) for f in outs),
              "iteration k's body_add output equals v0 + (k+1)*x")
        ins = [f for f in files if f["io"] == "input"]
        v_in = sorted((f for f in ins if f["index"] == 0), key=lambda f: f["call"])
        check(len(v_in) == 3 and all(close(np.load(os.path.join(d, f["file"])), lv0 + lx * f["call"]) for f in v_in),
              "Add:pre input 0 of iteration k equals v0 + k*x")
        x_in = [f for f in ins if f["index"] == 1]
        check(len(x_in) == 3 and all(np.array_equal(np.load(os.path.join(d, f["file"])), lx) for f in x_in),
              "Add:pre input 1 (outer-scope x) equals x in every iteration")

    # 7. gearbox profile takes the same options.
    d = w("d7")
    r = gearbox(a.gearbox, "profile", model, "--input", f"x={w('x.npy')}", "--loop", "1", "--output-dir", w("prof"),
                "--dump-tensors", "Mul:post", "--dump-dir", d)
    check(r.returncode == 0 and os.path.exists(os.path.join(d, "index.json")), "profile --dump-tensors exits 0")
    if r.returncode == 0:
        check(close(np.load(os.path.join(d, "mul_b_out0.npy")), y), "profile's Mul dump equals the torch reference")
        trace = json.load(open(w("prof", "trace.json")))
        runs = [e for e in trace["traceEvents"] if e.get("cat") == "run"]
        check(len(runs) == 1, "the dump run is not one of the profiled runs (1 run slice for --loop 1)")

    # 8. With cpu.dnnl first, layout_nhwc re-makes conv_a's FusedConv as a channels-last
    # NhwcConv: the message follows the optimizer's record to that node (it used to name an
    # unrelated boundary Transpose found by re-importing the model).
    dnnl = "cpu.dnnl,cpu.ref"
    r = gearbox(a.gearbox, "run", model, "--random-inputs", "--dump-tensors", "conv_a:post", "--dump-dir", w("d8"),
                engines=dnnl)
    err = "\n".join(line for line in r.stderr.splitlines() if "USAGE" in line)
    check(r.returncode == 1 and "'relu_a/FusedConv' (com.gearbox.FusedConv) by pass conv_fusion" in err
          and "'relu_a/FusedConv/nhwc' (com.gearbox.NhwcConv) by pass layout_nhwc" in err
          and "Transpose" not in err and "--disable-pass conv_fusion" in err,
          "conv_a:post with layout_nhwc names relu_a/FusedConv (conv_fusion), then relu_a/FusedConv/nhwc (layout_nhwc)")

    # 9. Channels-last dumps come back in the model's layout and names; --dump-raw-layout keeps NHWC.
    d = w("d9")
    r = gearbox(a.gearbox, "run", model, "--input", f"x={w('x.npy')}", "--dump-tensors", "NhwcConv:post",
                "--dump-dir", d, engines=dnnl)
    check(r.returncode == 0, "NhwcConv:post with cpu.dnnl exits 0")
    if r.returncode == 0:
        got = {f["node"]: f for f in index(d)["files"]}
        e = got.get("conv_b/nhwc", {})
        check(e.get("value") == "c2" and e.get("shape") == [1, 5, 8, 8] and e.get("raw_layout") == "nhwc"
              and e.get("raw_shape") == [1, 8, 8, 5], f"conv_b/nhwc is dumped as the model's c2 [1,5,8,8] ({e})")
        if e:
            check(close(np.load(os.path.join(d, e["file"])), c2), "conv_b/nhwc dump equals torch conv2d (NCHW)")
        e = got.get("relu_a/FusedConv/nhwc", {})
        check(e.get("value") == "r1" and e.get("shape") == [1, 4, 8, 8], f"the fused conv dumps as r1 [1,4,8,8] ({e})")
        if e:
            check(close(np.load(os.path.join(d, e["file"])), r1), "relu_a/FusedConv/nhwc dump equals torch relu(conv2d)")
    d = w("d9raw")
    r = gearbox(a.gearbox, "run", model, "--input", f"x={w('x.npy')}", "--dump-tensors", "conv_b/nhwc:post",
                "--dump-raw-layout", "--dump-dir", d, engines=dnnl)
    check(r.returncode == 0, "--dump-raw-layout exits 0")
    if r.returncode == 0:
        files = index(d)["files"]
        e = files[0] if files else {}
        check(e.get("value") == "c2/nhwc" and e.get("shape") == [1, 8, 8, 5] and e.get("layout") == "nhwc",
              f"raw layout: c2/nhwc [1,8,8,5] ({e})")
        if e:
            check(close(np.load(os.path.join(d, e["file"])).transpose(0, 3, 1, 2), c2),
                  "raw NHWC dump transposed to NCHW equals torch conv2d")

    # 10. Blocked (nChw16c) convolutions: [1,128,14,14] in the model's names, not [1,8,14,14,16].
    # The layout_blocked pass rewrites to nChw16c only on AVX-512 CPUs (oneDNN has no fast
    # kernel for it elsewhere), so there is nothing blocked to dump on other machines.
    if "avx512f" not in open("/proc/cpuinfo").read().split():
        print("SKIP 10 (blocked dumps): this CPU has no AVX-512, so no node is rewritten to nChw16c")
    else:
        bmodel = w("blocked.onnx")
        ws = blocked_model(bmodel, rng)
        bx = rng.standard_normal((1, 128, 14, 14)).astype(np.float32)
        np.save(w("bx.npy"), bx)
        with torch.no_grad():
            ref, t = [], torch.from_numpy(bx)
            for wi in ws:
                t = torch.nn.functional.conv2d(t, torch.from_numpy(wi), padding=1)
                ref.append(t.numpy())
        d = w("d10")
        r = gearbox(a.gearbox, "run", bmodel, "--input", f"x={w('bx.npy')}", "--dump-tensors", "Nchw16cConv:post",
                    "--dump-dir", d, engines=dnnl)
        check(r.returncode == 0, "Nchw16cConv:post exits 0")
        if r.returncode == 0:
            files = sorted(index(d)["files"], key=lambda f: f["value"])
            check([f["value"] for f in files] == ["c0", "c1", "c2"] and all(f["shape"] == [1, 128, 14, 14] for f in files)
                  and all(f.get("raw_shape") == [1, 8, 14, 14, 16] for f in files),
                  f"three blocked convs dump as c0..c2 [1,128,14,14] ({[(f['value'], f['shape']) for f in files]})")
            check(len(files) == 3 and all(close(np.load(os.path.join(d, f["file"])), ref[i], 1e-4)
                                          for i, f in enumerate(files)),
                  "blocked conv dumps equal torch conv2d chains")
        d = w("d10raw")
        r = gearbox(a.gearbox, "run", bmodel, "--input", f"x={w('bx.npy')}", "--dump-tensors", "conv1/nhwc/nChw16c:post",
                    "--dump-raw-layout", "--dump-dir", d, engines=dnnl)
        check(r.returncode == 0, "blocked --dump-raw-layout exits 0")
        if r.returncode == 0:
            files = index(d)["files"]
            e = files[0] if files else {}
            check(e.get("shape") == [1, 8, 14, 14, 16], f"raw blocked dump is [1,8,14,14,16] ({e})")
            if e:
                raw = np.load(os.path.join(d, e["file"]))
                check(close(raw.transpose(0, 1, 4, 2, 3).reshape(1, 128, 14, 14), ref[1], 1e-4),
                      "raw nChw16c dump, unblocked by numpy, equals torch conv2d")

    print("PASS" if not FAILS else f"FAILED: {len(FAILS)} check(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
