#!/usr/bin/python3
"""Export the control-flow and dynamic-shape parity models, with torch's own outputs.

Usage: export_dynamic_models.py OUT_DIR

Writes OUT_DIR/<model>/model.onnx and OUT_DIR/<model>/case_<k>/{<input>.npy, expected_<output>.npy}
for tests/parity/session_parity.cc, which loads each model into ONE Session and runs every case:
  * if_model:    torch.jit.script with a data-dependent `if` (exports an ONNX If); one case takes
                 each branch.
  * loop_model:  torch.jit.script RNN-style recurrence over the sequence axis (exports an ONNX
                 Loop carrying the hidden state h as loop state); three sequence lengths.
  * dynamic_cnn: a small CNN (Conv/BatchNorm/ReLU/MaxPool/residual Add/GlobalAveragePool/Gemm)
                 exported with dynamic batch, height and width; three different input shapes.
Seeds are fixed, weights random: parity only needs the same function as torch. OUT_DIR/.stamp
records the export version, so a second call returns at once (ctest runs this on every test run).
Must run with Debian's /usr/bin/python3 (python3-torch).
"""
import os
import sys

# Bump when anything that changes the exported files changes.
EXPORT_VERSION = "gearbox-dynamic-export-v1"


def cached(out):
    try:
        with open(os.path.join(out, ".stamp")) as f:
            return f.read().strip() == EXPORT_VERSION
    except OSError:
        return False


if __name__ == "__main__" and len(sys.argv) == 2 and cached(sys.argv[1]):
    print(f"[export] dynamic models: cached in {sys.argv[1]}")
    sys.exit(0)

import numpy as np  # noqa: E402  (torch takes seconds to import: only when exporting)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

OPSET = 13


class IfModel(nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):
            y = torch.relu(x) * 2.0 + 1.0
        else:
            y = torch.sigmoid(x) - x
        return y


class LoopModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.wx = nn.Linear(8, 16)
        self.wh = nn.Linear(16, 16)

    def forward(self, xs):  # xs: [T, B, 8]
        h = torch.zeros(xs.size(1), 16)
        for t in range(xs.size(0)):
            h = torch.tanh(self.wx(xs[t]) + self.wh(h))
        return h


class DynamicCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.pool = nn.MaxPool2d(2, ceil_mode=True)
        self.block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                   nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8))
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        x = self.pool(self.stem(x))
        x = torch.relu(x + self.block(x))
        x = torch.mean(x, dim=(2, 3))
        return self.head(x)


def calibrate_bn(model, shape):
    # Non-trivial running statistics, so BatchNorm is not an identity.
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(*shape) * 2 + 0.5)
    model.eval()


def export(model, example, path, input_names, output_names, dynamic_axes=None):
    torch.onnx.export(model, example, path, opset_version=OPSET, input_names=input_names,
                      output_names=output_names, dynamic_axes=dynamic_axes)


def write_case(model_dir, k, model, inputs, input_names, output_names):
    case = os.path.join(model_dir, f"case_{k}")
    os.makedirs(case, exist_ok=True)
    with torch.no_grad():
        out = model(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    for name, t in zip(input_names, inputs):
        np.save(os.path.join(case, name + ".npy"), t.numpy())
    for name, t in zip(output_names, outs):
        np.save(os.path.join(case, f"expected_{name}.npy"), t.numpy())


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    torch.manual_seed(0)

    d = os.path.join(out, "if_model")
    os.makedirs(d, exist_ok=True)
    m = torch.jit.script(IfModel())
    export(m, (torch.randn(2, 5),), os.path.join(d, "model.onnx"), ["x"], ["y"], {"x": {0: "n"}})
    pos = torch.rand(2, 5) + 0.1
    neg = -torch.rand(3, 5) - 0.1
    for k, x in enumerate([pos, neg]):
        write_case(d, k, m, (x,), ["x"], ["y"])

    d = os.path.join(out, "loop_model")
    os.makedirs(d, exist_ok=True)
    m = torch.jit.script(LoopModel().eval())
    export(m, (torch.randn(4, 2, 8),), os.path.join(d, "model.onnx"), ["xs"], ["h"],
           {"xs": {0: "T", 1: "B"}})
    for k, shape in enumerate([(1, 2, 8), (5, 2, 8), (12, 3, 8)]):
        write_case(d, k, m, (torch.randn(*shape),), ["xs"], ["h"])

    d = os.path.join(out, "dynamic_cnn")
    os.makedirs(d, exist_ok=True)
    m = DynamicCnn()
    calibrate_bn(m, (4, 3, 16, 16))
    export(m, (torch.randn(1, 3, 32, 32),), os.path.join(d, "model.onnx"), ["image"], ["logits"],
           {"image": {0: "batch", 2: "height", 3: "width"}, "logits": {0: "batch"}})
    for k, shape in enumerate([(1, 3, 32, 32), (2, 3, 48, 40), (3, 3, 17, 23)]):
        write_case(d, k, m, (torch.randn(*shape),), ["image"], ["logits"])
    with open(os.path.join(out, ".stamp"), "w") as f:
        f.write(EXPORT_VERSION + "\n")
    print(f"[export] if_model, loop_model, dynamic_cnn in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
