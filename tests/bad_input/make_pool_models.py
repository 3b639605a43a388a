#!/usr/bin/python3
"""Write the model the device-pool bad-input tests run: its intermediates outgrow a small pool.

Usage: make_pool_models.py OUT_DIR

OUT_DIR/chain.onnx: x float [256, 512] (512 KiB) -> a = Relu(x) -> y = Neg(a). a and y are live
together when Neg allocates y: 1 MiB of tensors. With GEARBOX_DEVICE_MEMORY=768K (a 512 KiB and a
256 KiB buddy root) a fits and y does not: POOL_EXHAUSTED with 256 KiB free. With 2M it runs.
"""
import os
import sys

import onnx
from onnx import TensorProto, helper


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 512])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 512])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Neg", ["a"], ["y"], name="neg")]
    model = helper.make_model(helper.make_graph(nodes, "chain", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, "chain.onnx"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
