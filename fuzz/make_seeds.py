"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/, committed): small valid
inputs of each format plus a few edge cases. Regenerate with
  /usr/bin/python3 fuzz/make_seeds.py --gearbox build/gearbox
(the .gbm seeds are compiled by that gearbox; the .gbm format version must match the reader's).

Input conventions of the targets (see each fuzz/<target>.cc): npy_parse and gbm_read take one
option byte at the end; kserve_binary takes the Inference-Header-Content-Length as 4
little-endian bytes in front of the body.
"""
import argparse
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "gbm"))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
from check_reproducible import cnn_model, loop_if_model  # noqa: E402
from loop_model import halving_loop_model  # noqa: E402


def add_model():
    g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"], name="add")], "add",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def external_data_model():
    """z = x + W with W's 256 floats at offset 64 of weights.bin (the fuzz target's base folder
    holds a 4096-byte weights.bin)."""
    w = numpy_helper.from_array(np.zeros(256, np.float32), "W")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "64"), ("length", "1024")):
        e = w.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("Add", ["x", "W"], ["z"], name="add")], "ext",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [256])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def sequence_model():
    g = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["x", "x"], ["s"], name="seq"),
         helper.make_node("ConcatFromSequence", ["s"], ["y"], name="cat", axis=0)], "seq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def contrib_model():
    """ONNX Runtime contrib ops (graph/contrib_ops.cc rewrites them at import): FusedMatMul,
    BiasGelu, SkipLayerNormalization with its sum output, QLinearAdd, DynamicQuantizeMatMul and
    SimplifiedLayerNormalization in the ONNX domain."""
    ms = "com.microsoft"
    f = lambda *s: np.full(s, 0.5, np.float32)  # noqa: E731
    nodes = [helper.make_node("FusedMatMul", ["x", "w"], ["h"], name="fmm", domain=ms, transB=1, alpha=0.5),
             helper.make_node("BiasGelu", ["h", "b"], ["g"], name="bg", domain=ms),
             helper.make_node("SkipLayerNormalization", ["g", "x", "b", "b"], ["y", "", "", "sum"], name="sln",
                              domain=ms),
             helper.make_node("SimplifiedLayerNormalization", ["sum", "b"], ["r"], name="rms", axis=-1),
             helper.make_node("DynamicQuantizeMatMul", ["r", "wq", "sw"], ["z"], name="dqm", domain=ms),
             helper.make_node("QLinearAdd", ["q", "s", "zp", "q", "s", "zp", "s", "zp"], ["qy"], name="qadd",
                              domain=ms)]
    g = helper.make_graph(
        nodes, "contrib",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("q", TensorProto.UINT8, [2, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("qy", TensorProto.UINT8, None)],
        initializer=[numpy_helper.from_array(f(4, 4), "w"), numpy_helper.from_array(f(4), "b"),
                     numpy_helper.from_array(np.ones((4, 3), np.int8), "wq"),
                     numpy_helper.from_array(np.float32(0.1), "sw"), numpy_helper.from_array(np.float32(0.1), "s"),
                     numpy_helper.from_array(np.uint8(128), "zp")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid(ms, 1)])


def attention_model():
    """ONNX Runtime's Attention (2-D mask, causal) and MultiHeadAttention (bias, key padding mask)."""
    ms = "com.microsoft"
    f = lambda *s: np.full(s, 0.25, np.float32)  # noqa: E731
    nodes = [helper.make_node("Attention", ["x", "w", "b", "m"], ["a"], name="att", domain=ms, num_heads=2,
                              unidirectional=1),
             helper.make_node("MultiHeadAttention", ["a", "x", "x", "b", "m"], ["y"], name="mha", domain=ms,
                              num_heads=2)]
    g = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
         helper.make_tensor_value_info("m", TensorProto.INT32, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(f(4, 12), "w"), numpy_helper.from_array(f(12), "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid(ms, 1)])


def matmul_nbits_model():
    """ONNX Runtime's MatMulNBits: 4-bit weights [N=3, 2 blocks, 8 bytes] with packed zero points."""
    nodes = [helper.make_node("MatMulNBits", ["a", "b", "s", "zp"], ["y"], name="nbits", domain="com.microsoft",
                              K=32, N=3, bits=4, block_size=16)]
    g = helper.make_graph(
        nodes, "matmul_nbits", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[numpy_helper.from_array(np.arange(48, dtype=np.uint8).reshape(3, 2, 8), "b"),
                     numpy_helper.from_array(np.full(6, 0.1, np.float32), "s"),
                     numpy_helper.from_array(np.array([0x87, 0x78, 0x88], np.uint8), "zp")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid("com.microsoft", 1)])


def opset21_model():
    """ai.onnx opset 21 (IR 10): the forms new at 19-21 (Cast saturate, dilated AveragePool, Pad
    wrap, Gelu-20, blocked QuantizeLinear with output_dtype, blocked DequantizeLinear)."""
    nodes = [helper.make_node("Cast", ["x"], ["c"], name="cast", to=TensorProto.FLOAT, saturate=1),
             helper.make_node("AveragePool", ["c"], ["p"], name="pool", kernel_shape=[2, 2], dilations=[2, 1]),
             helper.make_node("Pad", ["p", "pads"], ["w"], name="pad", mode="wrap"),
             helper.make_node("Gelu", ["w"], ["g"], name="gelu", approximate="tanh"),
             helper.make_node("Reshape", ["g", "shape"], ["r"], name="reshape"),
             helper.make_node("QuantizeLinear", ["r", "s"], ["q"], name="q", axis=1, block_size=2,
                              output_dtype=TensorProto.INT8),
             helper.make_node("DequantizeLinear", ["q", "s"], ["y"], name="dq", axis=1, block_size=2)]
    g = helper.make_graph(
        nodes, "opset21", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array([0, 0, 0, 1, 0, 0, 0, 1], np.int64), "pads"),
                     numpy_helper.from_array(np.array([2, 5], np.int64), "shape"),
                     numpy_helper.from_array(np.full((2, 3), 0.05, np.float32), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


def legacy_opset4_model():
    """ai.onnx opset 4, IR 3 (initializers among the inputs): the forms rewritten at import
    (bias Add with broadcast and axis, test-mode BatchNormalization-1, Reshape-1, Gemm-1)."""
    inits = {"w": np.full((2, 1, 3, 3), 0.1, np.float32), "cb": np.array([0.5, -0.5], np.float32),
             "s": np.ones(2, np.float32), "bb": np.zeros(2, np.float32), "m": np.zeros(2, np.float32),
             "v": np.ones(2, np.float32), "fw": np.full((32, 3), 0.01, np.float32), "fb": np.zeros(3, np.float32)}
    nodes = [helper.make_node("Pad", ["x"], ["px"], name="pad", pads=[0, 0, 1, 1, 0, 0, 1, 1]),
             helper.make_node("Conv", ["px", "w"], ["c"], name="conv", kernel_shape=[3, 3]),
             helper.make_node("Add", ["c", "cb"], ["cb_out"], name="bias", broadcast=1, axis=1),
             helper.make_node("BatchNormalization", ["cb_out", "s", "bb", "m", "v"], ["bn"], name="bn", is_test=1,
                              consumed_inputs=[0, 0, 0, 1, 1]),
             helper.make_node("Reshape", ["bn"], ["flat"], name="flat", shape=[0, -1]),
             helper.make_node("Gemm", ["flat", "fw", "fb"], ["y"], name="fc", broadcast=1)]
    g = helper.make_graph(
        nodes, "legacy_opset4",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])] +
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in inits.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 4)])
    m.ir_version = 3
    return m


def newer_ops_model():
    """ai.onnx opset 20 and com.microsoft: the ops new at 18-20 (CenterCropPad, GroupNormalization,
    antialiased Resize, Col2Im, DeformConv, AffineGrid, DFT with its axis input) and RotaryEmbedding."""
    i64 = lambda v: np.array(v, np.int64)  # noqa: E731
    inits = {"ccp": i64([1, 2, 4, 4]), "gs": np.ones(2, np.float32), "gb": np.zeros(2, np.float32),
             "rs": np.array([1, 1, 0.5, 0.5], np.float32), "r2s": i64([1, 4, 2]), "img": i64([2, 1]),
             "blk": i64([1, 1]),
             "dw": np.full((2, 2, 1, 1), 0.5, np.float32), "doff": np.zeros((1, 2, 2, 2), np.float32),
             "th": np.array([[[1, 0, 0], [0, 1, 0]]], np.float32), "sz": i64([1, 2, 2, 2]), "ax": i64(1),
             "pos": i64([0]), "cos": np.ones((4, 1), np.float32), "sin": np.zeros((4, 1), np.float32)}
    nodes = [helper.make_node("CenterCropPad", ["x", "ccp"], ["c"], name="ccp"),
             helper.make_node("GroupNormalization", ["c", "gs", "gb"], ["n"], name="gn", num_groups=2),
             helper.make_node("Resize", ["n", "", "rs"], ["r"], name="rs", mode="cubic", antialias=1),
             helper.make_node("Reshape", ["r", "r2s"], ["r2"], name="r2"),
             helper.make_node("Col2Im", ["r2", "img", "blk"], ["im"], name="c2i"),
             helper.make_node("DeformConv", ["r", "dw", "doff"], ["d"], name="dc", kernel_shape=[1, 1]),
             helper.make_node("AffineGrid", ["th", "sz"], ["grid"], name="ag"),
             helper.make_node("DFT", ["grid", "", "ax"], ["f"], name="dft"),
             helper.make_node("RotaryEmbedding", ["r2", "pos", "cos", "sin"], ["rot"], name="rope",
                              domain="com.microsoft")]
    g = helper.make_graph(
        nodes, "newer_ops", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 5])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("d", "f", "rot", "im")],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 9
    return m


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def npy_bytes(a, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, a)
    else:
        np.lib.format.write_array(buf, a, version=version)
    return buf.getvalue()


def http_seeds():
    """A connection's bytes: valid requests (pipelined, chunked, HTTP/1.0) and framing faults."""
    body = b'{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}'
    post = (b"POST /v2/models/m/infer HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)) + body
    get = b"GET /v2/health/ready HTTP/1.1\r\nHost: a\r\n\r\n"
    chunked = (b"POST /v2/models/m/infer HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"4\r\nwxyz\r\n3;ext=1\r\nabc\r\n0\r\nTrailer: t\r\n\r\n")
    return {
        "post": post, "pipelined": post + get + chunked, "chunked": chunked,
        "http10": b"GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" + get,
        "expect_continue": b"POST /a HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
        "two_lengths": b"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "length_and_chunked": b"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked"
                              b"\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "obs_fold": b"GET /a HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n\t2\r\n\r\n",
        "no_host": b"GET /a HTTP/1.1\r\n\r\n",
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gearbox", required=True, help="a gearbox binary, to compile the .gbm seeds")
    ap.add_argument("--out", default=os.path.join(HERE, "corpus"))
    a = ap.parse_args()
    out = a.out
    shutil.rmtree(out, ignore_errors=True)

    models = {"add": add_model(), "cnn": cnn_model(), "loop_if": loop_if_model(), "loop": halving_loop_model(13),
              "external_data": external_data_model(), "sequence": sequence_model(), "contrib": contrib_model(),
              "attention": attention_model(), "matmul_nbits": matmul_nbits_model(), "opset21": opset21_model(),
              "legacy_opset4": legacy_opset4_model(), "newer_ops": newer_ops_model()}
    for name, m in models.items():
        write(os.path.join(out, "onnx_import"), name + ".onnx", m.SerializeToString())

    # .gbm: compiled from the models that need no external data (option byte 0: checksum kept).
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("add", "cnn", "loop_if", "sequence"):
            src = os.path.join(tmp, name + ".onnx")
            onnx.save(models[name], src)
            dst = os.path.join(tmp, name + ".gbm")
            subprocess.run([a.gearbox, "compile", src, "-o", dst, "--quiet"], check=True, stdout=subprocess.DEVNULL)
            write(os.path.join(out, "gbm_read"), name + ".gbm", open(dst, "rb").read() + b"\0")

    npy = os.path.join(out, "npy_parse")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    seeds = {"f32_2x3": npy_bytes(x), "f64": npy_bytes(x.astype(np.float64)), "i8": npy_bytes(np.array([-1, 2], np.int8)),
             "u64": npy_bytes(np.array([2**64 - 1], np.uint64)), "f16": npy_bytes(x.astype(np.float16)),
             "bool": npy_bytes(np.array([True, False])), "scalar": npy_bytes(np.array(3.5, np.float32)),
             "empty_0x3": npy_bytes(np.zeros((0, 3), np.float32)), "fortran": npy_bytes(np.asfortranarray(x)),
             "big_endian": npy_bytes(x.astype(">f4")), "v2": npy_bytes(x, (2, 0)), "v3": npy_bytes(x, (3, 0)),
             "i64_3d": npy_bytes(np.arange(24, dtype=np.int64).reshape(2, 3, 4))}
    for name, data in seeds.items():
        write(npy, name, data + b"\0")
    write(npy, "trailing_allowed", seeds["f32_2x3"] + b"\0\0\0\0" + b"\1")

    kj = os.path.join(out, "kserve_json")
    bodies = {
        "mixed": {"id": "a1", "inputs": [
            {"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [[1.5, -2], [3, 4.25]]},
            {"name": "i", "shape": [3], "datatype": "INT64", "data": [-9223372036854775808, 7, 9223372036854775807]},
            {"name": "b", "shape": [2], "datatype": "BOOL", "data": [True, False]},
            {"name": "h", "shape": [1], "datatype": "FP16", "data": [0.333251953125]},
            {"name": "u", "shape": [1], "datatype": "UINT64", "data": [18446744073709551615]}],
            "outputs": [{"name": "y", "parameters": {"binary_data": True}}, {"name": "z"}]},
        "bf16_u8": {"inputs": [{"name": "a", "shape": [2], "datatype": "BF16", "data": [1, -2.5]},
                               {"name": "c", "shape": [1, 1], "datatype": "UINT8", "data": [[255]]}],
                    "parameters": {"binary_data_output": True}},
        "bytes": {"inputs": [{"name": "s", "shape": [2], "datatype": "BYTES", "data": ["ab", ""]}]},
        "empty_shape": {"inputs": [{"name": "e", "shape": [0, 4], "datatype": "FP64", "data": []}]},
        "scalar": {"inputs": [{"name": "s", "shape": [], "datatype": "INT32", "data": [5]}]},
    }
    for name, body in bodies.items():
        write(kj, name + ".json", json.dumps(body).encode())
    write(kj, "out_of_range.json", b'{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1e39]}]}')

    kb = os.path.join(out, "kserve_binary")
    xs = np.array([1.0, -0.5, 3.25], np.float32).tobytes()
    head = json.dumps({"inputs": [{"name": "x", "shape": [3], "datatype": "FP32", "parameters": {"binary_data_size": 12}},
                                  {"name": "b", "shape": [2], "datatype": "BOOL", "parameters": {"binary_data_size": 2}}],
                       "parameters": {"binary_data_output": True}}).encode()
    write(kb, "fp32_bool", struct.pack("<I", len(head)) + head + xs + b"\1\0")
    head2 = json.dumps({"inputs": [{"name": "x", "shape": [3], "datatype": "FP32", "parameters": {"binary_data_size": 12}},
                                   {"name": "j", "shape": [1], "datatype": "INT64", "data": [4]}],
                        "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
    write(kb, "binary_and_json", struct.pack("<I", len(head2)) + head2 + xs)
    head3 = json.dumps({"inputs": [{"name": "s", "shape": [2], "datatype": "BYTES",
                                    "parameters": {"binary_data_size": 11}}]}).encode()
    write(kb, "bytes", struct.pack("<I", len(head3)) + head3 + struct.pack("<I", 3) + b"abc" + struct.pack("<I", 0))
    write(kb, "header_longer_than_body", struct.pack("<I", len(head) + 100) + head + xs + b"\1\0")

    fs_dir = os.path.join(out, "fusion_switch")
    write(fs_dir, "some_off.json", b'{"conv_bn_fold": "off", "matmul_fusion": "on", "layout_nhwc": "off"}')
    write(fs_dir, "empty.json", b"{}")
    write(fs_dir, "unknown_pass.json", b'{"no_such_pass": "off"}')

    rt = os.path.join(out, "rank_table")
    write(rt, "two_servers.json", json.dumps({
        "version": "1.0", "server_count": "2", "status": "completed",
        "server_list": [
            {"server_id": "10.0.0.1", "device": [{"device_id": "0", "device_ip": "192.168.1.8", "rank_id": "0"},
                                                 {"device_id": "1", "device_ip": "192.168.1.9", "rank_id": "1"}]},
            {"server_id": "10.0.0.2", "device": [{"device_id": "0", "device_ip": "192.168.2.8", "rank_id": 2},
                                                 {"device_id": "1", "device_ip": "192.168.2.9", "rank_id": 3}]}],
        "group_list": [{"group_name": "dp", "rank_list": [0, 2]}, {"group_name": "mp", "rank_list": ["1", "3"]}]},
        indent=1).encode())
    write(rt, "one_rank.json", json.dumps({
        "version": "1.0", "server_count": "1", "status": "completed",
        "server_list": [{"server_id": "127.0.0.1", "device": [{"device_id": "0", "rank_id": "0"}]}]}).encode())

    pn = os.path.join(out, "plan_network")
    write(pn, "gpt_small.json", json.dumps({"name": "gpt-small", "layers": 12, "hidden": 768, "heads": 12,
                                            "vocab": 50257, "seq": 1024, "global_batch": 512, "dtype": "bf16"}).encode())
    write(pn, "ffn_fp32.json", json.dumps({"layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 256, "vocab": 100,
                                           "seq": 16, "global_batch": 8, "dtype": "fp32"}).encode())

    pl = os.path.join(out, "plan_links")
    write(pl, "a100.json", open(os.path.join(HERE, "..", "bench", "plan", "a100_links.json"), "rb").read())
    write(pl, "partial.json", b'{"devices_per_node": 4, "inter_node": {"latency_us": 2}}')

    # http_framing: one option byte (the read size) in front of a connection's bytes.
    hf = os.path.join(out, "http_framing")
    for name, wire in http_seeds().items():
        write(hf, name, bytes([len(name) % 64]) + wire)

    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    print(f"seed corpora in {out}: {total} bytes")


if __name__ == "__main__":
    main()
