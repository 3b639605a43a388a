#!/usr/bin/env python3
"""Writes torch 1.13's reference values for tests/frontend as .npy files (run by ctest as the
frontend.torch_reference fixture, into the build tree; nothing here is committed as numbers).

  ops/<case>/in<k>.npy, grad_out.npy, out.npy, grad<k>.npy : one op, float64, seed fixed
  mlp/x.npy, y.npy, <param>.npy (initial weights), <optimizer>_losses.npy, <optimizer>_<param>.npy
"""
import argparse
import os

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits

# name -> (function, input shapes, which inputs take gradients, input value range)
OPS = {
    "add_broadcast": (lambda a, b: a + b, [(2, 3, 4), (3, 1)], None),
    "sub": (lambda a, b: a - b, [(4,), (2, 3, 4)], None),
    "mul_broadcast": (lambda a, b: a * b, [(2, 1, 4), (3, 4)], None),
    "div": (lambda a, b: a / b, [(2, 3), (1, 3)], (0.5, 2.0)),
    "neg": (lambda a: -a, [(3, 2)], None),
    "exp": (torch.exp, [(3, 2)], None),
    "log": (torch.log, [(3, 2)], (0.2, 3.0)),
    "pow3": (lambda a: a ** 3.0, [(5,)], None),
    "relu": (F.relu, [(4, 5)], None),
    "sigmoid": (torch.sigmoid, [(3, 4)], None),
    "tanh": (torch.tanh, [(3, 4)], None),
    "gelu": (F.gelu, [(3, 4)], None),
    "softmax": (lambda a: torch.softmax(a, 1), [(3, 5)], None),
    "log_softmax": (lambda a: torch.log_softmax(a, -1), [(2, 3, 4)], None),
    "matmul_batched": (torch.matmul, [(2, 3, 4), (4, 5)], None),
    "linear": (F.linear, [(5, 4), (3, 4), (3,)], None),
    "sum_axes": (lambda a: a.sum(dim=(0, 2)), [(2, 3, 4)], None),
    "mean_keep": (lambda a: a.mean(dim=1, keepdim=True), [(2, 3, 4)], None),
    "reshape": (lambda a: a.reshape(4, -1), [(2, 3, 2)], None),
    "transpose": (lambda a: a.permute(2, 0, 1), [(2, 3, 4)], None),
    "concat": (lambda a, b: torch.cat([a, b], 1), [(2, 1), (2, 3)], None),
    "slice": (lambda a: a[:, 1:3], [(2, 4, 3)], None),
    "cross_entropy": (lambda a: F.cross_entropy(a, torch.tensor([2, 0, 1, 2])), [(4, 3)], None),
    "mse_loss": (F.mse_loss, [(3, 2), (3, 2)], None),
}


def save(path, arr):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.ascontiguousarray(arr))


def write_ops(out):
    for i, (name, (fn, shapes, rng)) in enumerate(sorted(OPS.items())):
        g = torch.Generator().manual_seed(100 + i)
        lo, hi = rng or (-1.0, 1.0)
        xs = [(torch.rand(s, generator=g, dtype=torch.float64) * (hi - lo) + lo).requires_grad_() for s in shapes]
        y = fn(*xs)
        gy = torch.rand(y.shape, generator=g, dtype=torch.float64) + 0.5
        y.backward(gy)
        d = os.path.join(out, "ops", name)
        for k, x in enumerate(xs):
            save(f"{d}/in{k}.npy", x.detach().numpy())
            save(f"{d}/grad{k}.npy", x.grad.numpy())
        save(f"{d}/out.npy", y.detach().numpy())
        save(f"{d}/grad_out.npy", gy.numpy())


BATCH, STEPS = 64, 50
OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-4),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-2),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=1e-2),
}


def write_mlp(out):
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.int64)
    d = os.path.join(out, "mlp")
    save(f"{d}/x.npy", x.numpy())
    save(f"{d}/y.npy", y.numpy())
    torch.manual_seed(0)
    init = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    for k, v in init.state_dict().items():
        save(f"{d}/init_{k}.npy", v.numpy())
    batches = x.shape[0] // BATCH
    for name, make in OPTIMIZERS.items():
        net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
        net.load_state_dict(init.state_dict())
        opt = make(net.parameters())
        losses = []
        for s in range(STEPS):
            b = (s % batches) * BATCH
            loss = F.cross_entropy(net(x[b:b + BATCH]), y[b:b + BATCH])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        save(f"{d}/{name}_losses.npy", np.array(losses, dtype=np.float64))
        for k, v in net.state_dict().items():
            save(f"{d}/{name}_final_{k}.npy", v.numpy())


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out_dir")
    args = ap.parse_args()
    torch.set_num_threads(1)
    write_ops(args.out_dir)
    write_mlp(args.out_dir)


if __name__ == "__main__":
    main()
