#!/usr/bin/python3
"""Export the parity models (ResNet-50, MobileNetV2, a BERT-base encoder) to ONNX, with
inputs and PyTorch's own outputs as .npy, for tests/parity.

Usage: export_models.py OUT_DIR [--only NAME] [--force]

For each model NAME this writes OUT_DIR/NAME/{model.onnx, <input>.npy..., expected_<output>.npy,
.stamp}. A model whose .stamp matches this script's EXPORT_VERSION is skipped, so the ctest
fixture can run this on every test run at no cost after the first.

Weights are random (fixed seeds, nothing downloaded): parity only needs gearbox to compute the
same function as torch, not a useful one. What matters is that activations stay at a sane scale,
so a relative error bound means something:
  * CNNs use torchvision's own init, then BatchNorm running statistics are calibrated with a few
    train-mode forward passes on random batches. Without that every BN is an identity
    (mean 0, var 1) and BN folding bugs would go unnoticed; with it, activations stay O(1).
  * BERT uses HF's init (normal std 0.02, LayerNorm 1/0) so outputs look like a real encoder's.

Must run with Debian's /usr/bin/python3 (python3-torch 1.13, python3-torchvision 0.14).
"""
import argparse
import math
import os
import sys
import time

# Bump when anything that changes the exported files changes, so cached exports are redone.
EXPORT_VERSION = "gearbox-parity-export-v1"
MODEL_NAMES = ["resnet50", "mobilenet_v2", "bert"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--only", choices=MODEL_NAMES, action="append",
                   help="export only this model (repeatable)")
    p.add_argument("--force", action="store_true", help="re-export even when cached")
    return p.parse_args()


def is_cached(out_dir, name):
    try:
        with open(os.path.join(out_dir, name, ".stamp")) as f:
            return f.read().strip() == EXPORT_VERSION
    except OSError:
        return False


# Importing torch takes seconds; the ctest fixture runs this script on every test run, so
# answer "all cached" before paying for it.
if __name__ == "__main__":
    _args = parse_args()
    if not _args.force and all(is_cached(_args.out_dir, n) for n in _args.only or MODEL_NAMES):
        for n in _args.only or MODEL_NAMES:
            print(f"[export] {n}: cached in {os.path.join(_args.out_dir, n)}")
        sys.exit(0)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


# ---------------------------------------------------------------------------------------------
# BERT-base-like encoder in plain torch (mirrors HF BertModel's computation, without HF).

class BertConfig:
    vocab_size = 30522
    hidden = 768
    layers = 12
    heads = 12
    intermediate = 3072
    max_position = 512
    type_vocab = 2
    ln_eps = 1e-12
    init_std = 0.02


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads = c.heads
        self.head_dim = c.hidden // c.heads
        self.query = nn.Linear(c.hidden, c.hidden)
        self.key = nn.Linear(c.hidden, c.hidden)
        self.value = nn.Linear(c.hidden, c.hidden)
        self.attn_out = nn.Linear(c.hidden, c.hidden)
        self.attn_ln = nn.LayerNorm(c.hidden, eps=c.ln_eps)
        self.inter = nn.Linear(c.hidden, c.intermediate)
        self.out = nn.Linear(c.intermediate, c.hidden)
        self.out_ln = nn.LayerNorm(c.hidden, eps=c.ln_eps)

    def split_heads(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, mask_bias):
        q = self.split_heads(self.query(x))
        k = self.split_heads(self.key(x))
        v = self.split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores + mask_bias
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        b, s = ctx.shape[0], ctx.shape[1]
        ctx = ctx.view(b, s, self.heads * self.head_dim)
        x = self.attn_ln(x + self.attn_out(ctx))
        h = F.gelu(self.inter(x))  # exact (erf) GELU, as BERT uses
        return self.out_ln(x + self.out(h))


class Bert(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word = nn.Embedding(c.vocab_size, c.hidden)
        self.position = nn.Embedding(c.max_position, c.hidden)
        self.segment = nn.Embedding(c.type_vocab, c.hidden)
        self.emb_ln = nn.LayerNorm(c.hidden, eps=c.ln_eps)
        self.layers = nn.ModuleList([BertLayer(c) for _ in range(c.layers)])
        self.pooler = nn.Linear(c.hidden, c.hidden)
        self.apply(lambda m: self._init(m, c.init_std))

    @staticmethod
    def _init(m, std):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            m.weight.data.normal_(0.0, std)
        if isinstance(m, nn.Linear) and m.bias is not None:
            m.bias.data.zero_()
        if isinstance(m, nn.LayerNorm):
            m.weight.data.fill_(1.0)
            m.bias.data.zero_()

    def forward(self, input_ids, attention_mask, token_type_ids):
        seq = input_ids.shape[1]
        positions = torch.arange(seq, dtype=torch.int64).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions) + self.segment(token_type_ids)
        x = self.emb_ln(x)
        # HF's extended attention mask: 0 where attended, -10000 where masked.
        mask_bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled


# ---------------------------------------------------------------------------------------------
# Model builders: each returns (module, {input_name: np.ndarray}, [output_names], opset).

def calibrate_batchnorm(model, shape, batches=4, batch_size=8):
    """Set BN running stats from random batches (cumulative average), then eval()."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None  # cumulative moving average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(batch_size, *shape[1:]))
    model.eval()


def build_resnet50():
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None)
    calibrate_batchnorm(model, (1, 3, 224, 224))
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    return model, {"input": x.numpy()}, ["logits"], 14


def build_mobilenet_v2():
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2(weights=None)
    calibrate_batchnorm(model, (1, 3, 224, 224))
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    return model, {"input": x.numpy()}, ["logits"], 14


def build_bert():
    torch.manual_seed(0)
    c = BertConfig()
    model = Bert(c).eval()
    seq = 128
    valid = 100  # the last 28 positions are padding: exercises the additive mask
    g = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1000, c.vocab_size, (1, seq), generator=g, dtype=torch.int64)
    input_ids[0, valid:] = 0  # [PAD]
    input_ids[0, 0] = 101  # [CLS]
    attention_mask = torch.ones(1, seq, dtype=torch.int64)
    attention_mask[0, valid:] = 0
    token_type_ids = torch.zeros(1, seq, dtype=torch.int64)
    token_type_ids[0, 60:valid] = 1  # a second segment, so the segment embedding matters
    inputs = {
        "input_ids": input_ids.numpy(),
        "attention_mask": attention_mask.numpy(),
        "token_type_ids": token_type_ids.numpy(),
    }
    return model, inputs, ["last_hidden_state", "pooler_output"], 14


MODELS = {
    "resnet50": build_resnet50,
    "mobilenet_v2": build_mobilenet_v2,
    "bert": build_bert,
}
assert list(MODELS) == MODEL_NAMES


def export_one(name, out_dir, force):
    model_dir = os.path.join(out_dir, name)
    stamp = os.path.join(model_dir, ".stamp")
    if not force and is_cached(out_dir, name):
        print(f"[export] {name}: cached in {model_dir}")
        return
    os.makedirs(model_dir, exist_ok=True)
    if os.path.exists(stamp):
        os.remove(stamp)
    t0 = time.time()
    model, inputs, output_names, opset = MODELS[name]()
    input_names = list(inputs)
    args = tuple(torch.from_numpy(inputs[n]) for n in input_names)
    with torch.no_grad():
        outs = model(*args)
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    onnx_path = os.path.join(model_dir, "model.onnx")
    torch.onnx.export(model, args, onnx_path, input_names=input_names,
                      output_names=output_names, opset_version=opset,
                      do_constant_folding=True)
    for n, arr in inputs.items():
        np.save(os.path.join(model_dir, f"{n}.npy"), arr)
    for n, t in zip(output_names, outs):
        arr = t.detach().numpy().astype(np.float32)
        np.save(os.path.join(model_dir, f"expected_{n}.npy"), arr)
        print(f"[export] {name}: {n} shape={list(arr.shape)} max|x|={np.abs(arr).max():.4g} "
              f"std={arr.std():.4g}")
    import onnx
    onnx.checker.check_model(onnx_path)  # by path: works for models over 2 GB too
    # The stamp goes last: an interrupted export is redone, never half-used.
    with open(stamp, "w") as f:
        f.write(EXPORT_VERSION + "\n")
    print(f"[export] {name}: done in {time.time() - t0:.1f}s -> {model_dir}")


def main():
    a = parse_args()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    for name in a.only or list(MODELS):
        export_one(name, a.out_dir, a.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
