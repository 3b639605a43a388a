#!/usr/bin/env python3
"""Writes torch 1.13's reference values for tests/frontend as .npy files (run by ctest as the
frontend.torch_reference fixture, into the build tree; nothing here is committed as numbers).

  ops/<case>/in<k>.npy, grad_out.npy, out.npy, grad<k>.npy : one op, float64, seed fixed
  mlp/x.npy, y.npy, <param>.npy (initial weights), <optimizer>_losses.npy, <optimizer>_<param>.npy
  cnn/init_<name>.npy, <optimizer>_losses.npy, <optimizer>_final_<name>.npy (the digits CNN)
  rnn/<case>/param_<name>.npy, in_<x|h0|c0>.npy, <out|h_n|c_n>.npy, grad_*.npy : LSTM/GRU, float32
  rnn_training/<lstm|gru>/init_<name>.npy, losses.npy, final_<name>.npy (the digits RNNs)
  amp/losses.npy, grad0_<param>.npy, final_<param>.npy : the digits MLP under bf16 autocast
"""
import argparse
import os
import zlib

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits

# Fixed running statistics for batch_norm_eval (the C++ side builds the same values).
BN_MEAN = torch.tensor([-0.5, 0.0, 0.5], dtype=torch.float64)
BN_VAR = torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64)

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
    "cross_entropy_smoothing_ignore": (
        lambda a: F.cross_entropy(a, torch.tensor([2, -100, 1, 0, 2]), label_smoothing=0.1), [(5, 3)], None),
    "cross_entropy_ignore_index": (lambda a: F.cross_entropy(a, torch.tensor([7, 1, 7, 0]), ignore_index=7),
                                   [(4, 3)], None),
    "nll_loss": (lambda a: F.nll_loss(a, torch.tensor([1, 0, 2, -100])), [(4, 3)], None),
    "l1_loss": (F.l1_loss, [(3, 4), (3, 4)], None),
    # logits up to +-20 (the overflow-safe form is exercised), targets in [0, 1].
    "bce_with_logits": (lambda x, y: F.binary_cross_entropy_with_logits(x * 20, (y + 1) / 2), [(3, 4), (3, 4)], None),
    "bce_with_logits_pos_weight": (
        lambda x, y: F.binary_cross_entropy_with_logits(
            x, (y + 1) / 2, pos_weight=torch.tensor([0.5, 1.0, 2.0, 3.0], dtype=torch.float64)), [(3, 4), (3, 4)], None),
    # CNN ops (odd sizes, so strided windows leave rows out and the gradients must put them back).
    "conv2d": (F.conv2d, [(2, 3, 6, 5), (4, 3, 3, 3), (4,)], None),
    "conv2d_stride_pad_dilation": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, dilation=2),
                                   [(2, 2, 7, 8), (3, 2, 3, 2), (3,)], None),
    "conv2d_groups": (lambda x, w: F.conv2d(x, w, None, stride=(2, 1), padding=(1, 0), groups=2),
                      [(2, 4, 5, 5), (6, 2, 3, 3)], None),
    "conv1d_stride_pad_dilation": (lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2),
                                   [(2, 3, 9), (4, 3, 3), (4,)], None),
    "conv1d_groups": (lambda x, w: F.conv1d(x, w, None, padding=2, groups=2), [(2, 4, 7), (6, 2, 3)], None),
    "conv_transpose2d_output_padding": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        [(2, 3, 4, 5), (3, 2, 3, 3), (2,)], None),
    "conv_transpose2d_groups_dilation": (
        lambda x, w: F.conv_transpose2d(x, w, None, stride=(2, 1), padding=(0, 1), groups=2, dilation=(1, 2)),
        [(2, 4, 3, 4), (4, 3, 3, 2)], None),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), [(3, 4, 3, 2), (4,), (4,)], None),
    "group_norm_3d_no_affine": (lambda x: F.group_norm(x, 3), [(2, 6, 5)], None),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), [(2, 3, 6, 6)], None),
    "max_pool2d_pad": (lambda x: F.max_pool2d(x, 3, stride=2, padding=1), [(2, 2, 7, 6)], None),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), [(2, 3, 6, 6)], None),
    "avg_pool2d_pad": (lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), [(2, 2, 7, 6)], None),
    "avg_pool2d_pad_exclude": (lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
                               [(2, 2, 7, 6)], None),
    "adaptive_avg_pool2d_global": (lambda x: F.adaptive_avg_pool2d(x, 1), [(2, 3, 5, 4)], None),
    "adaptive_avg_pool2d_even": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), [(2, 3, 4, 6)], None),
    "adaptive_avg_pool2d_uneven": (lambda x: F.adaptive_avg_pool2d(x, (3, 2)), [(2, 3, 7, 5)], None),
    "batch_norm_train": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                         [(4, 3, 3, 2), (3,), (3,)], None),
    "batch_norm_train_2d_input": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                                  [(5, 3), (3,), (3,)], None),
    "batch_norm_train_3d_input": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                                  [(4, 3, 6), (3,), (3,)], None),
    "batch_norm_eval": (lambda x, w, b: F.batch_norm(x, BN_MEAN, BN_VAR, w, b, training=False),
                        [(4, 3, 3, 2), (3,), (3,)], None),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (4,), w, b), [(3, 2, 4), (4,), (4,)], None),
    "layer_norm_2d": (lambda x, w, b: F.layer_norm(x, (3, 4), w, b), [(2, 3, 4), (3, 4), (3, 4)], None),
    "embedding": (lambda w: F.embedding(torch.tensor([[1, 3], [0, 3], [4, 1]]), w), [(5, 3)], None),
}


def save(path, arr):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.ascontiguousarray(arr))


def write_ops(out):
    for name, (fn, shapes, rng) in sorted(OPS.items()):
        # A seed of the op's own (not its place in the table): adding an op leaves the others'
        # inputs as they were.
        g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
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


BATCH, STEPS = 64, 200  # issue 22: 200 steps within 1e-5 of torch


def train_and_save(net, opt, x, y, steps, prefix):
    """Trains on the batches of BATCH rows in order (wrapping), saving <prefix>losses.npy and
    <prefix>final_<name>.npy for the state dict after the last step."""
    batches = x.shape[0] // BATCH
    losses = []
    for s in range(steps):
        b = (s % batches) * BATCH
        loss = F.cross_entropy(net(x[b:b + BATCH]), y[b:b + BATCH])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    save(f"{prefix}losses.npy", np.array(losses, dtype=np.float64))
    for k, v in net.state_dict().items():
        save(f"{prefix}final_{k}.npy", v.numpy())
OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-4),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda p: torch.optim.Adam(p, lr=5e-3),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=1e-2),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=1e-3, weight_decay=1e-4),
    "rmsprop_centered": lambda p: torch.optim.RMSprop(p, lr=1e-3, momentum=0.9, centered=True),
    "adagrad": lambda p: torch.optim.Adagrad(p, lr=0.05, lr_decay=1e-3, weight_decay=1e-4,
                                             initial_accumulator_value=0.1),
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
    for name, make in OPTIMIZERS.items():
        net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
        net.load_state_dict(init.state_dict())
        opt = make(net.parameters())
        train_and_save(net, opt, x, y, STEPS, f"{d}/{name}_")


class ResidualBlock(torch.nn.Module):
    """conv-BN-ReLU-conv-BN, plus the input, ReLU (tests/frontend/torch_parity_test.cc builds the same)."""

    def __init__(self, c):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(c)
        self.conv2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(c)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(h)) + x)


class DigitsCnn(torch.nn.Module):
    """[N, 1, 8, 8] -> conv-BN-ReLU-maxpool -> residual block -> linear head (10 classes)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 16, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(16)
        self.block = ResidualBlock(16)
        self.fc = torch.nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(torch.flatten(self.block(x), 1))


# Learning rates where float32 rounding stays rounding: with max pooling and ReLU a run can hit
# a near-tie (two window values, or a pre-activation and 0, within an ulp) that routes a gradient
# differently, after which two correct float32 runs part by 1e-4 and more. Measured on torch
# itself over 200 steps: SGD lr 0.02 on 1 thread against 2 threads parts by 3.1e-2 from step 76
# (and by up to 3e-2 with the initial weights perturbed by 1e-7 relative); SGD lr 0.01 stays
# within 3.8e-6. AdamW lr 1e-3 stays within 1e-6 of itself; gearbox parted from it at step 129
# until BatchNormalization's backward rounded in torch's order (com.gearbox.BatchNormalizationGrad,
# docs/framework.md), and now stays within 7e-7. (Over the 60 steps used before: SGD lr 0.05
# parted at step 39, AdamW lr 5e-3 at steps 10-44.)
CNN_STEPS = 200
CNN_OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, weight_decay=1e-4),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=1e-2),
}


def write_cnn(out):
    """cnn/init_<name>.npy (parameters and buffers), <opt>_losses.npy, <opt>_final_<name>.npy;
    the data are mlp/x.npy and y.npy, reshaped to [N, 1, 8, 8]."""
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    y = torch.tensor(digits.target, dtype=torch.int64)
    d = os.path.join(out, "cnn")
    torch.manual_seed(0)
    init = DigitsCnn()
    for k, v in init.state_dict().items():
        save(f"{d}/init_{k}.npy", v.numpy())
    for name, make in CNN_OPTIMIZERS.items():
        net = DigitsCnn()
        net.load_state_dict(init.state_dict())
        net.train()
        opt = make(net.parameters())
        train_and_save(net, opt, x, y, CNN_STEPS, f"{d}/{name}_")


# Learning-rate schedules: the rate after construction and after each of EPOCHS step() calls.
SCHEDULERS = {
    "step": (30, lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)),
    # 35 epochs with t_max 10: down, back up (the restart branch at epoch 11 + 20k) and down.
    "cosine": (35, lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=1e-3)),
    "linear": (10, lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=4)),
}


def write_schedulers(out):
    for name, (epochs, make) in SCHEDULERS.items():
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
        sched = make(opt)
        rates = [opt.param_groups[0]["lr"]]
        for _ in range(epochs):
            opt.step()
            sched.step()
            rates.append(opt.param_groups[0]["lr"])
        save(os.path.join(out, "sched", f"{name}.npy"), np.array(rates, dtype=np.float64))


# Attention and the transformer encoder layer (float32, dropout 0): outputs and every gradient
# for given inputs, and a short training run of a small sequence classifier on the digits.
def _causal(n):
    return torch.triu(torch.full((n, n), float("-inf")), diagonal=1)


def write_attention(out):
    g = torch.Generator().manual_seed(7)

    def rand(*shape):
        return torch.rand(shape, generator=g) * 2 - 1

    cases = {
        # name: (module, inputs {name: tensor}, call(module, inputs) -> output, needs weights)
        "mha_cross": (torch.nn.MultiheadAttention(16, 4, batch_first=True),
                      {"q": rand(2, 5, 16), "k": rand(2, 7, 16), "v": rand(2, 7, 16), "mask": rand(5, 7) - 1},
                      lambda m, i: m(i["q"], i["k"], i["v"], attn_mask=i["mask"], need_weights=True)),
        "mha_self_seq_first": (torch.nn.MultiheadAttention(16, 2),
                               {"x": rand(6, 3, 16), "mask": _causal(6)},
                               lambda m, i: m(i["x"], i["x"], i["x"], attn_mask=i["mask"], need_weights=True)),
        "encoder_post_relu": (torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True),
                              {"x": rand(3, 6, 16)}, lambda m, i: (m(i["x"]), None)),
        "encoder_pre_gelu": (torch.nn.TransformerEncoderLayer(16, 4, 24, dropout=0.0, activation="gelu",
                                                              norm_first=True),
                             {"x": rand(5, 2, 16), "mask": _causal(5)},
                             lambda m, i: (m(i["x"], src_mask=i["mask"]), None)),
    }
    torch.manual_seed(3)
    for name, (module, inputs, call) in cases.items():
        d = os.path.join(out, "attention", name)
        with torch.no_grad():  # torch's zero-initialized biases would leave their paths untested
            for _, p in module.named_parameters():
                p.add_(torch.rand(p.shape, generator=g) * 0.2 - 0.1)
        for k, v in module.state_dict().items():
            save(f"{d}/param_{k}.npy", v.numpy())
        for k, v in inputs.items():
            if k != "mask":
                v.requires_grad_()
            save(f"{d}/in_{k}.npy", v.detach().numpy())
        y, w = call(module, inputs)
        gy = torch.rand(y.shape, generator=g) + 0.5
        total = (y * gy).sum()
        if w is not None:
            gw = torch.rand(w.shape, generator=g) + 0.5
            total = total + (w * gw).sum()
            save(f"{d}/weights.npy", w.detach().numpy())
            save(f"{d}/grad_weights.npy", gw.numpy())
        total.backward()
        save(f"{d}/out.npy", y.detach().numpy())
        save(f"{d}/grad_out.npy", gy.numpy())
        for k, v in inputs.items():
            if k != "mask":
                save(f"{d}/grad_in_{k}.npy", v.grad.numpy())
        for k, p in module.named_parameters():
            save(f"{d}/grad_param_{k}.npy", p.grad.numpy())


class DigitsTransformer(torch.nn.Module):
    """Each digit as a sequence of its 8 rows of 8 pixels: a Linear embedding to 16, two
    post-norm encoder layers (4 heads), the mean over the sequence and a linear head."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(8, 16)
        self.encoder = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        self.encoder2 = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.encoder2(self.encoder(self.embed(x.reshape(-1, 8, 8)))).mean(dim=1))


TRANSFORMER_STEPS = 200
TRANSFORMER_OPTIMIZERS = {
    "adamw": lambda p: torch.optim.AdamW(p, lr=2e-3, weight_decay=1e-2),
    "sgd": lambda p: torch.optim.SGD(p, lr=0.02, momentum=0.9),
}


def write_transformer_training(out):
    """transformer/<opt>/: init_<name>.npy, losses.npy, final_<name>.npy per optimizer."""
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.int64)
    for name, make in TRANSFORMER_OPTIMIZERS.items():
        d = os.path.join(out, "transformer", name)
        torch.manual_seed(0)
        net = DigitsTransformer()
        for k, v in net.state_dict().items():
            save(f"{d}/init_{k}.npy", v.numpy())
        train_and_save(net, make(net.parameters()), x, y, TRANSFORMER_STEPS, f"{d}/")


# LSTM and GRU (float32): outputs, final states and every gradient for given inputs; name ->
# (module, input shape, initial-state shape or None). tests/frontend/recurrent_test.cc builds
# the same modules from the name.
def _rnn_cases():
    cases = {}
    for kind, cls in (("lstm", torch.nn.LSTM), ("gru", torch.nn.GRU)):
        cases.update({
            f"{kind}_1layer": (cls(5, 7), (4, 3, 5), None),
            f"{kind}_2layer_bidir_batch_first_state": (cls(5, 6, num_layers=2, bidirectional=True, batch_first=True),
                                                      (3, 4, 5), (4, 3, 6)),
            f"{kind}_2layer_nobias_state": (cls(4, 5, num_layers=2, bias=False), (5, 2, 4), (2, 2, 5)),
            f"{kind}_bidir_batch_first": (cls(3, 4, bidirectional=True, batch_first=True), (2, 6, 3), None),
            f"{kind}_unbatched_state": (cls(3, 4), (5, 3), (1, 4)),
        })
    return cases


def write_rnn(out):
    g = torch.Generator().manual_seed(11)

    def rand(*shape):
        return (torch.rand(shape, generator=g) * 2 - 1).requires_grad_()

    torch.manual_seed(5)
    for name, (module, x_shape, state_shape) in _rnn_cases().items():
        d = os.path.join(out, "rnn", name)
        for k, v in module.state_dict().items():
            save(f"{d}/param_{k}.npy", v.numpy())
        lstm = isinstance(module, torch.nn.LSTM)
        inputs = {"x": rand(*x_shape)}
        if state_shape:
            inputs["h0"] = rand(*state_shape)
            if lstm:
                inputs["c0"] = rand(*state_shape)
        for k, v in inputs.items():
            save(f"{d}/in_{k}.npy", v.detach().numpy())
        state = None
        if state_shape:
            state = (inputs["h0"], inputs["c0"]) if lstm else inputs["h0"]
        y, hidden = module(inputs["x"], state)
        results = {"out": y}
        if lstm:
            results["h_n"], results["c_n"] = hidden
        else:
            results["h_n"] = hidden
        total = 0
        for k, v in results.items():
            gv = torch.rand(v.shape, generator=g) + 0.5
            total = total + (v * gv).sum()
            save(f"{d}/{k}.npy", v.detach().numpy())
            save(f"{d}/grad_{k}.npy", gv.numpy())
        total.backward()
        for k, v in inputs.items():
            save(f"{d}/grad_in_{k}.npy", v.grad.numpy())
        for k, p in module.named_parameters():
            save(f"{d}/grad_param_{k}.npy", p.grad.numpy())


class DigitsRnn(torch.nn.Module):
    """Each digit as a sequence of its 8 rows of 8 pixels: a 1-layer LSTM or GRU (hidden 32),
    a linear head on the last hidden state."""

    def __init__(self, cls):
        super().__init__()
        self.rnn = cls(8, 32, batch_first=True)
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        _, hidden = self.rnn(x.reshape(-1, 8, 8))
        h_n = hidden[0] if isinstance(hidden, tuple) else hidden
        return self.head(h_n[-1])


# Adam at lr 5e-3: measured on torch itself against copies of the run with the initial weights
# perturbed by 1e-7 relative (3 perturbations), the final parameters part by up to 4.3e-5
# relative (lr 1e-2: up to 2.8e-4 for the LSTM, above the test's 1e-4), the loss by 2e-7.
RNN_STEPS = 30
RNN_LR = 5e-3


def write_rnn_training(out):
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.int64)
    for kind, cls in (("lstm", torch.nn.LSTM), ("gru", torch.nn.GRU)):
        d = os.path.join(out, "rnn_training", kind)
        torch.manual_seed(0)
        net = DigitsRnn(cls)
        for k, v in net.state_dict().items():
            save(f"{d}/init_{k}.npy", v.numpy())
        opt = torch.optim.Adam(net.parameters(), lr=RNN_LR)
        train_and_save(net, opt, x, y, RNN_STEPS, f"{d}/")


def write_amp(out):
    """amp/: the digits MLP (mlp/init_*.npy) trained for AMP_STEPS SGD-momentum steps under CPU
    autocast in bfloat16 (Linear in bf16, ReLU following it; the loss on the logits in float32,
    as gearbox's O1 keeps losses), with a static loss scale of 2^10 and torch's unscale-before-step:
    losses.npy, the first step's gradients grad0_<param>.npy (float32 master weights) and
    final_<param>.npy."""
    d = os.path.join(out, "amp")
    x = torch.tensor(np.load(os.path.join(out, "mlp", "x.npy")))
    y = torch.tensor(np.load(os.path.join(out, "mlp", "y.npy")))
    net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    net.load_state_dict({k: torch.tensor(np.load(os.path.join(out, "mlp", f"init_{k}.npy")))
                         for k in net.state_dict()})
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    scale = 1024.0
    batches = x.shape[0] // BATCH
    losses = []
    for s in range(AMP_STEPS):
        b = (s % batches) * BATCH
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = net(x[b:b + BATCH])
        assert logits.dtype == torch.bfloat16
        loss = F.cross_entropy(logits.float(), y[b:b + BATCH])
        opt.zero_grad()
        (loss * scale).backward()
        for p in net.parameters():
            p.grad.mul_(1.0 / scale)
        if s == 0:
            for k, p in net.named_parameters():
                save(f"{d}/grad0_{k}.npy", p.grad.numpy())
        opt.step()
        losses.append(loss.item())
    save(f"{d}/losses.npy", np.array(losses, dtype=np.float64))
    for k, v in net.state_dict().items():
        save(f"{d}/final_{k}.npy", v.numpy())


AMP_STEPS = 100


INIT_GAINS = [("linear", 0.0), ("conv2d", 0.0), ("sigmoid", 0.0), ("tanh", 0.0), ("relu", 0.0),
              ("leaky_relu", 0.01), ("leaky_relu", 5 ** 0.5), ("selu", 0.0)]
INIT_FAN_SHAPES = [(7, 3), (4, 6, 5), (8, 2, 3, 3), (2, 3, 2, 2, 2)]


def write_init(out):
    """init/gains.npy (torch.nn.init.calculate_gain per INIT_GAINS) and init/fans.npy
    ([fan_in, fan_out] per INIT_FAN_SHAPES)."""
    save(f"{out}/init/gains.npy", np.array([torch.nn.init.calculate_gain(n, p) for n, p in INIT_GAINS]))
    fans = [torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(s)) for s in INIT_FAN_SHAPES]
    save(f"{out}/init/fans.npy", np.array(fans, dtype=np.int64))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out_dir")
    args = ap.parse_args()
    torch.set_num_threads(1)
    write_ops(args.out_dir)
    write_mlp(args.out_dir)
    write_amp(args.out_dir)
    write_cnn(args.out_dir)
    write_schedulers(args.out_dir)
    write_attention(args.out_dir)
    write_transformer_training(args.out_dir)
    write_rnn(args.out_dir)
    write_rnn_training(args.out_dir)
    write_init(args.out_dir)


if __name__ == "__main__":
    main()
