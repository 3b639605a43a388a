#!/usr/bin/python3
"""Exports a small torch model that uses the example plugin's ops to ONNX, with numpy's answer.

  export_model.py OUT_DIR    writes OUT_DIR/model.onnx, OUT_DIR/x.npy, OUT_DIR/y_ref.npy

The model: x [2, 6, 16] -> Linear(16, 64) -> SwiGLU -> [2, 6, 32] -> RotaryEmbedding (positions
along axis 1) -> Linear(32, 8). SwiGLU and RotaryEmbedding are torch.autograd.Functions whose
`symbolic` emits com.example.SwiGLU and com.example.RotaryEmbedding (opset 1 of com.example), so
the exported graph needs the plugin (GEARBOX_OP_PATH). y_ref.npy is computed with numpy from
the exported weights, independently of torch's and of the plugin's code.
"""
import os
import sys

import numpy as np
import torch


class SwiGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        a, b = x.chunk(2, dim=-1)
        return torch.nn.functional.silu(a) * b

    @staticmethod
    def symbolic(g, x):
        # The output's type, for the graph's value_info (gearbox's static shape inference does
        # not call a plugin's shape function).
        y = g.op("com.example::SwiGLU", x)
        sizes = x.type().sizes()
        return y.setType(x.type().with_sizes(sizes[:-1] + [sizes[-1] // 2]))


class Rotary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, base):
        s, d = x.shape[-2], x.shape[-1]
        inv = base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
        t = torch.arange(s, dtype=torch.float64)[:, None] * inv[None, :]
        c, sn = torch.cos(t).float(), torch.sin(t).float()
        a, b = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([a * c - b * sn, b * c + a * sn], dim=-1)

    @staticmethod
    def symbolic(g, x, base):
        return g.op("com.example::RotaryEmbedding", x, base_f=base).setType(x.type())


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(16, 64)
        self.down = torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.down(Rotary.apply(SwiGLU.apply(self.up(x)), 500.0))


def numpy_ref(x, w1, b1, w2, b2, base=500.0):
    h = x.astype(np.float64) @ w1.T + b1
    a, b = h[..., :32], h[..., 32:]
    g = a / (1 + np.exp(-a)) * b
    s, d = g.shape[-2], g.shape[-1]
    t = np.arange(s)[:, None] * base ** (-2.0 * np.arange(d // 2) / d)[None, :]
    ga, gb = g[..., : d // 2], g[..., d // 2:]
    r = np.concatenate([ga * np.cos(t) - gb * np.sin(t), gb * np.cos(t) + ga * np.sin(t)], axis=-1)
    return (r @ w2.T + b2).astype(np.float32)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(2, 6, 16)
    torch.onnx.export(net, (x,), os.path.join(out, "model.onnx"), input_names=["x"], output_names=["y"],
                      opset_version=17, custom_opsets={"com.example": 1})
    p = {k: v.detach().numpy() for k, v in net.state_dict().items()}
    y = numpy_ref(x.numpy(), p["up.weight"], p["up.bias"], p["down.weight"], p["down.bias"])
    # The torch forward (the Functions above) and numpy agree: the reference is not one-sided.
    with torch.no_grad():
        np.testing.assert_allclose(net(x).numpy(), y, rtol=1e-4, atol=1e-5)
    np.save(os.path.join(out, "x.npy"), x.numpy())
    np.save(os.path.join(out, "y_ref.npy"), y)
    print(f"wrote {out}/model.onnx, x.npy, y_ref.npy")


if __name__ == "__main__":
    main()
