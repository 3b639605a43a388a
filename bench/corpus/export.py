#!/usr/bin/python3
"""Export the benchmark corpus (bench/corpus/manifest.json) to ONNX, with inputs and torch's
own outputs as .npy: the models bench/ort_compare.py --corpus times against ONNX Runtime and
tests/corpus checks in make test.

Usage: export.py OUT_DIR [--only NAME]... [--ci] [--list] [--force]

NAME is an exported model: a manifest entry's name for batch 1, NAME_bB for its batch B.
For each it writes OUT_DIR/NAME/{model.onnx, <input>.npy..., expected_<output>.npy, spec.json,
.stamp} (the layout tests/parity/run_parity.py reads). spec.json records the input and output
spec (name, shape, dtype), the opset, the op histogram and how long the export took. A model
whose .stamp matches its manifest entry and EXPORT_VERSION is skipped, so the ctest fixture
costs nothing after the first run. --ci exports only the entries marked "ci"; --list prints
the model names.

Weights are random with fixed seeds (nothing is downloaded: torchvision builders get
weights=None and weights_backbone=None). Activations are kept realistic: every BatchNorm's
running statistics are calibrated on four deterministic batches of 8 with only the BatchNorms
in train mode (dropout and stochastic depth stay off), cumulative average; transformers use
normal(0, 0.02) weights with LayerNorm 1/0. Inputs look like the real thing: N(0,1) images
(raw 0..255 pixels for the NHWC face detector), token ids over the vocabulary with padding,
audio as tones plus noise. Recurrent state and past key/values are not zeros: they are the
outputs of a previous call on a previous chunk or prompt, as an application carries them.

float16 entries: the model's Conv+BatchNorm pairs are fused in torch (torch.fx) and every
parameter is rounded to float16, then the fp32 export is converted to float16 (initializers,
constants, I/O): the ONNX weights are exactly torch's. torch (no fp16 conv on CPU) computes the
reference in fp32 from the float16-rounded input; the expected output is that, cast to float16.

Must run with Debian's /usr/bin/python3 (python3-torch 1.13, python3-torchvision 0.14).
"""
import argparse
import collections
import json
import math
import os
import sys
import time

from manifest import expand, is_cached, stamp_text


def parse_args(names):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir", nargs="?")
    p.add_argument("--only", action="append", choices=names, metavar="NAME",
                   help="export only this model (repeatable; --list names them)")
    p.add_argument("--ci", action="store_true", help="only the entries marked ci (tests/corpus)")
    p.add_argument("--list", action="store_true", help="print the model names and exit")
    p.add_argument("--force", action="store_true", help="re-export even when cached")
    a = p.parse_args()
    if not a.list and not a.out_dir:
        p.error("OUT_DIR is required")
    return a


def selected(a, models):
    if a.only:
        return [m for m in models if m[0] in a.only]
    if a.ci:  # batch 1 only: make test stays fast
        return [m for m in models if m[1].get("ci") and m[2] == 1]
    return models


# Importing torch takes seconds; the ctest fixture runs this script on every test run, so
# answer "all cached" before paying for it.
if __name__ == "__main__":
    _models = expand()
    _args = parse_args([m[0] for m in _models])
    if _args.list:
        for n, e, b in selected(_args, _models):
            ci = "\tci" if e.get("ci") and b == 1 else ""
            print(f"{n}\t{e['builder']}\tbatch {b}\topset {e['opset']}\t{e.get('dtype', 'float32')}{ci}")
        sys.exit(0)
    if not _args.force and all(is_cached(_args.out_dir, n, e, b) for n, e, b in selected(_args, _models)):
        for n, _, _ in selected(_args, _models):
            print(f"[corpus] {n}: cached in {os.path.join(_args.out_dir, n)}")
        sys.exit(0)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def gen(seed):
    return torch.Generator().manual_seed(seed)


def init_transformer(module, std=0.02):
    """HF-style init: normal(0, std) for Linear/Embedding/Conv, zero bias, LayerNorm 1/0."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d)):
            m.weight.data.normal_(0.0, std)
            if getattr(m, "bias", None) is not None:
                m.bias.data.zero_()
        elif isinstance(m, nn.LayerNorm):
            m.weight.data.fill_(1.0)
            m.bias.data.zero_()


def calibrate_batchnorm(model, make_inputs, batches=4):
    """Running statistics from `batches` deterministic batches of 8 (cumulative average), with
    only the BatchNorms in train mode, so dropout and stochastic depth do not skew them."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    model.eval()
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    with torch.no_grad():
        for i in range(batches):
            model(*[torch.from_numpy(v) for v in make_inputs(8, 100 + i).values()])
    model.eval()


def image(batch, channels, height, width, seed):
    return torch.randn(batch, channels, height, width, generator=gen(seed)).numpy()


class Built:
    """What a builder returns: the module, make_inputs(batch, seed) -> {name: np.ndarray} (in
    the forward's argument order), the output names, and the layers whose outputs are logits
    that a Softmax or Sigmoid follows (scaled after calibration, see scale_logits)."""

    def __init__(self, module, make_inputs, outputs, logit_layers=()):
        self.module, self.make_inputs, self.outputs = module, make_inputs, outputs
        self.logit_layers = logit_layers


def scale_logits(model, layer, make_inputs, target_std=3.0):
    """Random weights give logits near 0, so a Softmax or Sigmoid after them is nearly flat and
    hides errors upstream; a trained model's are peaked. Scale the layer's weight and shift its
    bias so its outputs have mean 0 and standard deviation target_std on a deterministic batch."""
    seen = []
    hook = layer.register_forward_hook(lambda m, i, o: seen.append(o.detach()))
    with torch.no_grad():
        model(*[torch.from_numpy(v) for v in make_inputs(8, 99).values()])
        hook.remove()
        out = torch.cat([t.flatten() for t in seen])
        factor = target_std / float(out.std())
        layer.weight.mul_(factor)
        layer.bias.sub_(float(out.mean())).mul_(factor)


# ---------------------------------------------------------------------------------------------
# torchvision models

def torchvision_classifier(arch, size, kwargs=None):
    import torchvision
    model = getattr(torchvision.models, arch)(weights=None, **(kwargs or {}))
    return Built(model, lambda b, s: {"input": image(b, 3, size, size, s)}, ["logits"])


class FirstOutput(nn.Module):
    """Segmentation models return {"out": ...}: export that tensor alone."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def torchvision_segmentation(arch, size, num_classes):
    import torchvision
    model = getattr(torchvision.models.segmentation, arch)(weights=None, weights_backbone=None,
                                                           num_classes=num_classes)
    return Built(FirstOutput(model), lambda b, s: {"input": image(b, 3, size, size, s)}, ["out"])


class SsdBackboneAndHead(nn.Module):
    """SSDlite's feature extractor and box/class heads; anchors, decoding and NMS (host-side
    post-processing in most deployments) are left out."""

    def __init__(self, ssd):
        super().__init__()
        self.backbone, self.head = ssd.backbone, ssd.head

    def forward(self, x):
        out = self.head(list(self.backbone(x).values()))
        return out["bbox_regression"], out["cls_logits"]


def ssdlite(size):
    import torchvision
    ssd = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)
    return Built(SsdBackboneAndHead(ssd), lambda b, s: {"input": image(b, 3, size, size, s)},
                 ["bbox_regression", "cls_logits"])


# ---------------------------------------------------------------------------------------------
# OCR: a DB text detector, a CRNN and an SVTR-style recognizer (PaddleOCR's shapes)

def conv_bn_act(cin, cout, k=3, stride=1, groups=1, act=nn.ReLU):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class DbTextDetector(nn.Module):
    """DBNet as PaddleOCR's mobile detector builds it: MobileNetV3-Large x0.5 backbone (strides
    4..32), DBFPN (1x1 lateral convs, bilinear top-down upsampling + Add, 3x3 output convs, every
    level bilinearly upsampled to stride 4 and concatenated) and the DB head (3x3 conv, two 2x2
    ConvTransposes back to full resolution, Sigmoid): the shrink-probability map."""

    def __init__(self, inner=96):
        super().__init__()
        import torchvision
        self.features = torchvision.models.mobilenet_v3_large(weights=None, width_mult=0.5).features
        self.taps = (3, 6, 12, 16)  # last block at stride 4, 8, 16, 32
        with torch.no_grad():
            chans = [f.shape[1] for f in self._stages(torch.zeros(1, 3, 64, 64))]
        self.lateral = nn.ModuleList([nn.Conv2d(c, inner, 1, bias=False) for c in chans])
        self.smooth = nn.ModuleList([nn.Conv2d(inner, inner // 4, 3, padding=1, bias=False) for _ in chans])
        self.head = nn.Sequential(
            conv_bn_act(inner, inner // 4), nn.ConvTranspose2d(inner // 4, inner // 4, 2, 2),
            nn.BatchNorm2d(inner // 4), nn.ReLU(), nn.ConvTranspose2d(inner // 4, 1, 2, 2), nn.Sigmoid())

    def _stages(self, x):
        outs = []
        for i, layer in enumerate(self.features):
            x = layer(x)
            if i in self.taps:
                outs.append(x)
        return outs

    def forward(self, x):
        c2, c3, c4, c5 = [lat(f) for lat, f in zip(self.lateral, self._stages(x))]
        up = lambda t, ref: F.interpolate(t, size=ref.shape[2:], mode="bilinear", align_corners=False)  # noqa: E731
        p4 = c4 + up(c5, c4)
        p3 = c3 + up(p4, c3)
        p2 = c2 + up(p3, c2)
        levels = [s(p) for s, p in zip(self.smooth, (p2, p3, p4, c5))]
        size = levels[0].shape[2:]
        fused = torch.cat([levels[0]] + [F.interpolate(t, size=size, mode="bilinear", align_corners=True)
                                         for t in levels[1:]], dim=1)
        return self.head(fused)


def db_text_detector(size):
    return Built(DbTextDetector(), lambda b, s: {"image": image(b, 3, size, size, s)}, ["probability_map"])


class Crnn(nn.Module):
    """CRNN (Shi et al.): a VGG-style CNN that reduces the height to 1, the width sequence
    through two bidirectional LSTMs, and a per-step classifier with Softmax (the CTC head's
    inference output)."""

    def __init__(self, classes, hidden=256):
        super().__init__()
        mp = lambda kh, kw: nn.MaxPool2d((kh, kw), (kh, kw))  # noqa: E731
        self.cnn = nn.Sequential(
            conv_bn_act(3, 64), mp(2, 2), conv_bn_act(64, 128), mp(2, 2),
            conv_bn_act(128, 256), conv_bn_act(256, 256), mp(2, 1),
            conv_bn_act(256, 512), conv_bn_act(512, 512), mp(2, 1),
            nn.Conv2d(512, 512, (2, 1), bias=False), nn.BatchNorm2d(512), nn.ReLU())
        self.rnn1 = nn.LSTM(512, hidden, bidirectional=True)
        self.rnn2 = nn.LSTM(2 * hidden, hidden, bidirectional=True)
        self.classifier = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        f = self.cnn(x)  # N, 512, 1, W/4
        seq = f.squeeze(2).permute(2, 0, 1)  # T, N, 512
        seq, _ = self.rnn1(seq)
        seq, _ = self.rnn2(seq)
        return torch.softmax(self.classifier(seq), dim=-1).permute(1, 0, 2)  # N, T, classes


def crnn(height, width, classes):
    model = Crnn(classes)
    return Built(model, lambda b, s: {"image": image(b, 3, height, width, s)}, ["probabilities"], [model.classifier])


class SvtrMixer(nn.Module):
    """One SVTR block: pre-norm multi-head self-attention over the character-component tokens
    (local mixing: an additive mask keeps each token's 7x11 neighbourhood; global mixing: none)
    and an MLP."""

    def __init__(self, dim, heads, grid, local):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        mask = torch.zeros(grid[0] * grid[1], grid[0] * grid[1])
        if local:
            h, w = grid
            ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
            ys, xs = ys.flatten(), xs.flatten()
            far = ((ys[:, None] - ys[None, :]).abs() > 3) | ((xs[:, None] - xs[None, :]).abs() > 5)
            mask[far] = float("-inf")
        self.register_buffer("mask", mask)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = torch.softmax(q @ k.transpose(-1, -2) * (c // self.heads) ** -0.5 + self.mask, dim=-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))
        return x + self.mlp(self.norm2(x))


class Svtr(nn.Module):
    """SVTR-Tiny (Du et al. 2022): two stride-2 conv patch embedding, three stages of mixing
    blocks (local, local+global, global) joined by stride-(2,1) conv merging, height pooling,
    a Linear+Hardswish combining layer and a per-column classifier with Softmax."""

    def __init__(self, height, width, classes, dims=(64, 128, 256), heads=(2, 4, 8), depth=(3, 6, 3)):
        super().__init__()
        self.embed = nn.Sequential(conv_bn_act(3, dims[0] // 2, stride=2, act=nn.GELU),
                                   conv_bn_act(dims[0] // 2, dims[0], stride=2, act=nn.GELU))
        h, w = height // 4, width // 4
        self.stages, self.merges, self.grids = nn.ModuleList(), nn.ModuleList(), []
        local_left = 6  # SVTR-T: the first six blocks mix locally, the other six globally
        for i in range(3):
            blocks = []
            for _ in range(depth[i]):
                blocks.append(SvtrMixer(dims[i], heads[i], (h, w), local=local_left > 0))
                local_left -= 1
            self.stages.append(nn.Sequential(*blocks))
            self.grids.append((h, w))
            if i < 2:
                self.merges.append(nn.Sequential(nn.Conv2d(dims[i], dims[i + 1], 3, (2, 1), 1)))
                h //= 2
        self.merge_norms = nn.ModuleList([nn.LayerNorm(d, eps=1e-6) for d in dims[1:]])
        self.final_norm = nn.LayerNorm(dims[2], eps=1e-6)
        self.combine = nn.Linear(dims[2], 192)
        self.classifier = nn.Linear(192, classes)

    def forward(self, x):
        x = self.embed(x)  # N, C, H/4, W/4
        for i, stage in enumerate(self.stages):
            b, c, h, w = x.shape
            x = stage(x.flatten(2).transpose(1, 2))
            if i < 2:
                x = self.merges[i](x.transpose(1, 2).reshape(b, c, h, w))
                x = self.merge_norms[i](x.flatten(2).transpose(1, 2)).transpose(1, 2).reshape(
                    b, -1, x.shape[2], x.shape[3])
        x = self.final_norm(x)
        b, n, c = x.shape
        h, w = self.grids[-1]
        x = x.transpose(1, 2).reshape(b, c, h, w).mean(dim=2).transpose(1, 2)  # pool the height
        x = F.hardswish(self.combine(x))
        return torch.softmax(self.classifier(x), dim=-1)


def svtr(height, width, classes):
    model = Svtr(height, width, classes)
    init_transformer(model)
    return Built(model, lambda b, s: {"image": image(b, 3, height, width, s)}, ["probabilities"], [model.classifier])


# ---------------------------------------------------------------------------------------------
# Audio: voice activity with the recurrent state carried across calls, keyword spotting

def stft_basis(n_fft):
    """Real and imaginary DFT rows of a Hann-windowed frame, as Conv1d kernels (2*bins, 1, n_fft)."""
    n = torch.arange(n_fft, dtype=torch.float64)
    k = torch.arange(n_fft // 2 + 1, dtype=torch.float64)[:, None]
    window = 0.5 - 0.5 * torch.cos(2 * math.pi * n / n_fft)
    angle = 2 * math.pi * k * n / n_fft
    return torch.cat([torch.cos(angle) * window, -torch.sin(angle) * window]).float()[:, None, :]


def mel_filterbank(bins, mels, rate=16000):
    """Triangular mel filters (HTK mel scale), shape (bins, mels)."""
    hz = lambda m: 700.0 * (10 ** (m / 2595.0) - 1)  # noqa: E731
    mel = lambda f: 2595.0 * math.log10(1 + f / 700.0)  # noqa: E731
    edges = [hz(mel(rate / 2) * i / (mels + 1)) for i in range(mels + 2)]
    freqs = torch.linspace(0, rate / 2, bins)
    fb = torch.zeros(bins, mels)
    for m in range(mels):
        lo, mid, hi = edges[m], edges[m + 1], edges[m + 2]
        fb[:, m] = torch.clamp(torch.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)), min=0)
    return fb


class VoiceActivity(nn.Module):
    """Silero-VAD-like: reflect-padded audio (context + chunk), an STFT as a strided Conv1d with
    fixed DFT kernels, magnitude (optionally log-mel), a Conv1d encoder, an LSTM or GRU whose
    state comes in and goes out (so a stream carries it from call to call), and a Conv1d +
    Sigmoid decoder averaged over the frames: the speech probability of the chunk."""

    def __init__(self, cell, n_fft=256, hop=64, hidden=128, layers=1, mel=False):
        super().__init__()
        self.cell, self.n_fft = cell, n_fft
        self.register_buffer("basis", stft_basis(n_fft))
        self.hop = hop
        bins = n_fft // 2 + 1
        self.mel = mel
        if mel:
            self.register_buffer("filters", mel_filterbank(bins, 40))
            bins = 40
        self.encoder = nn.Sequential(
            nn.Conv1d(bins, 128, 3, padding=1), nn.ReLU(), nn.Conv1d(128, 64, 3, 2, 1), nn.ReLU(),
            nn.Conv1d(64, 64, 3, 2, 1), nn.ReLU(), nn.Conv1d(64, hidden, 3, padding=1), nn.ReLU())
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(hidden, hidden, num_layers=layers)
        self.decoder = nn.Sequential(nn.ReLU(), nn.Conv1d(hidden, 1, 1), nn.Sigmoid())

    def forward(self, audio, *state):
        x = F.pad(audio[:, None, :], (self.n_fft // 4, self.n_fft // 4), mode="reflect")
        spec = F.conv1d(x, self.basis, stride=self.hop)  # N, 2*bins, frames
        re, im = spec.chunk(2, dim=1)
        mag = torch.sqrt(re * re + im * im)
        if self.mel:
            mag = torch.log(torch.matmul(mag.transpose(1, 2), self.filters) + 1e-6).transpose(1, 2)
        seq = self.encoder(mag).permute(2, 0, 1)  # frames, N, hidden
        if self.cell == "lstm":
            seq, (h, c) = self.rnn(seq, (state[0], state[1]))
            new_state = (h, c)
        else:
            seq, h = self.rnn(seq, state[0])
            new_state = (h,)
        prob = self.decoder(seq.permute(1, 2, 0)).mean(dim=2)  # N, 1
        return (prob,) + new_state


def vad(cell, samples, context, layers=1, mel=False):
    model = VoiceActivity(cell, layers=layers, mel=mel)
    rate = 16000
    state_names = ["h", "c"] if cell == "lstm" else ["h"]

    def audio(b, seed, chunk):
        g = np.random.default_rng(seed)
        t = (np.arange(samples + context) + chunk * samples) / rate
        tone = sum(0.1 * np.sin(2 * np.pi * f * t) for f in (220.0, 440.0, 1250.0))
        return (tone + 0.02 * g.standard_normal((b, samples + context))).astype(np.float32)

    def make_inputs(b, seed):
        zeros = [torch.zeros(layers, b, 128) for _ in state_names]
        with torch.no_grad():  # the state after the previous chunk, as a stream carries it
            out = model(torch.from_numpy(audio(b, seed, 0)), *zeros)
        inputs = {"audio": audio(b, seed + 1, 1)}
        inputs.update({f"{n}_in": t.numpy() for n, t in zip(state_names, out[1:])})
        return inputs

    return Built(model, make_inputs, ["speech_probability"] + [f"{n}_out" for n in state_names],
                 [model.decoder[1]])


class KeywordMlp(nn.Module):
    """The DNN keyword spotter of Zhang et al., 'Hello Edge': MFCC frames flattened, three
    fully connected ReLU layers and a Softmax over the keywords."""

    def __init__(self, frames, coeffs, hidden, classes):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(frames * coeffs, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, classes), nn.Softmax(dim=-1))

    def forward(self, x):
        return self.net(x)


def kws_mlp(frames, coeffs, hidden, classes):
    def make_inputs(b, seed):
        return {"mfcc": (4 * torch.randn(b, frames, coeffs, generator=gen(seed))).numpy()}

    model = KeywordMlp(frames, coeffs, hidden, classes)
    return Built(model, make_inputs, ["probabilities"], [model.net[-2]])


# ---------------------------------------------------------------------------------------------
# Face detector taking NHWC pixels (as TFLite-converted and many mobile face detectors do)

def dw_separable(cin, cout, stride=1):
    return nn.Sequential(conv_bn_act(cin, cin, 3, stride, groups=cin), conv_bn_act(cin, cout, 1))


class FaceDetectorNhwc(nn.Module):
    """Ultra-Light-Fast face detector ('slim' version): NHWC 0..255 pixels normalized in the
    graph, a depthwise-separable backbone, and box/score heads (depthwise 3x3 + pointwise 1x1)
    at four scales, reshaped channels-last and concatenated over the anchors; Softmax scores."""

    def __init__(self):
        super().__init__()
        self.stage1 = nn.Sequential(conv_bn_act(3, 16, stride=2), dw_separable(16, 32), dw_separable(32, 32, 2),
                                    dw_separable(32, 32), dw_separable(32, 64, 2), dw_separable(64, 64),
                                    dw_separable(64, 64), dw_separable(64, 64))
        self.stage2 = nn.Sequential(dw_separable(64, 128, 2), dw_separable(128, 128), dw_separable(128, 128))
        self.stage3 = nn.Sequential(dw_separable(128, 256, 2), dw_separable(256, 256))
        self.stage4 = nn.Sequential(nn.Conv2d(256, 64, 1), nn.ReLU(), nn.Conv2d(64, 64, 3, 1, 1, groups=64),
                                    nn.Conv2d(64, 256, 1), nn.ReLU())
        anchors, chans = (3, 2, 2, 3), (64, 128, 256, 256)
        head = lambda c, a, k: nn.Sequential(nn.Conv2d(c, c, 3, 1, 1, groups=c), nn.ReLU(), nn.Conv2d(c, a * k, 1))  # noqa: E731
        self.cls = nn.ModuleList([head(c, a, 2) for c, a in zip(chans, anchors)])
        self.box = nn.ModuleList([head(c, a, 4) for c, a in zip(chans, anchors)])
        self.cls[-1] = nn.Conv2d(256, anchors[-1] * 2, 3, 1, 1)
        self.box[-1] = nn.Conv2d(256, anchors[-1] * 4, 3, 1, 1)

    def forward(self, pixels):
        x = (pixels.permute(0, 3, 1, 2) - 127.0) / 128.0
        f1 = self.stage1(x)
        f2 = self.stage2(f1)
        f3 = self.stage3(f2)
        f4 = self.stage4(f3)
        scores, boxes = [], []
        for f, c, b in zip((f1, f2, f3, f4), self.cls, self.box):
            scores.append(c(f).permute(0, 2, 3, 1).reshape(f.shape[0], -1, 2))
            boxes.append(b(f).permute(0, 2, 3, 1).reshape(f.shape[0], -1, 4))
        return torch.softmax(torch.cat(scores, 1), dim=-1), torch.cat(boxes, 1)


def face_detector_nhwc(height, width):
    def make_inputs(b, seed):
        return {"pixels": (torch.rand(b, height, width, 3, generator=gen(seed)) * 255).numpy()}

    return Built(FaceDetectorNhwc(), make_inputs, ["scores", "boxes"])


# ---------------------------------------------------------------------------------------------
# Transformers: a GPT-2 decoder step with past key/values, a Whisper-style encoder-decoder,
# DistilBERT

def new_gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Gpt2Block(nn.Module):
    def __init__(self, hidden, heads, positions):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.ln_1, self.ln_2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.c_attn, self.c_proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.c_fc, self.mlp_proj = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.register_buffer("bias", torch.tril(torch.ones(positions, positions, dtype=torch.bool))[None, None])

    def split(self, t):
        b, s, _ = t.shape
        return t.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, mask_bias, past_k, past_v):
        q, k, v = self.c_attn(self.ln_1(x)).split(x.shape[-1], dim=2)
        q, k, v = self.split(q), self.split(k), self.split(v)
        k, v = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        qlen, klen = q.shape[-2], k.shape[-2]
        causal = self.bias[:, :, klen - qlen:klen, :klen]
        w = torch.where(causal, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype)) + mask_bias
        a = torch.matmul(torch.softmax(w, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        x = x + self.c_proj(a.view(a.shape[0], a.shape[1], -1))
        x = x + self.mlp_proj(new_gelu(self.c_fc(self.ln_2(x))))
        return x, k, v


class Gpt2Decoder(nn.Module):
    """GPT-2 (HF GPT2LMHeadModel's computation) for one decoding step of `step` tokens after a
    past of `past` tokens: inputs input_ids, attention_mask (over past + step; left padding is
    masked) and past_key_i / past_value_i per layer; outputs the logits (tied LM head) and
    present_key_i / present_value_i."""

    def __init__(self, layers, hidden, heads, vocab, positions=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, hidden), nn.Embedding(positions, hidden)
        self.h = nn.ModuleList([Gpt2Block(hidden, heads, positions) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, input_ids, attention_mask, *past):
        past_len = past[0].shape[-2]
        # Position ids as HF computes them with left padding: cumulative sum of the mask.
        positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)[:, past_len:]
        x = self.wte(input_ids) + self.wpe(positions)
        mask_bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        presents = []
        for i, block in enumerate(self.h):
            x, k, v = block(x, mask_bias, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        logits = torch.matmul(self.ln_f(x), self.wte.weight.t())
        return (logits,) + tuple(presents)


def gpt2(layers, hidden, heads, vocab, past, step, left_pad):
    model = Gpt2Decoder(layers, hidden, heads, vocab)
    init_transformer(model)
    model.eval()

    def make_inputs(b, seed):
        g = gen(seed)
        prompt = torch.randint(0, vocab, (b, past), generator=g)
        mask = torch.ones(b, past + step, dtype=torch.int64)
        mask[:, :left_pad] = 0
        empty = [torch.zeros(b, heads, 0, hidden // heads) for _ in range(2 * layers)]
        with torch.no_grad():  # the prompt's keys/values: what the previous call returned
            presents = model(prompt, mask[:, :past], *empty)[1:]
        inputs = {"input_ids": torch.randint(0, vocab, (b, step), generator=g).numpy(), "attention_mask": mask.numpy()}
        for i in range(layers):
            inputs[f"past_key_{i}"] = presents[2 * i].numpy()
            inputs[f"past_value_{i}"] = presents[2 * i + 1].numpy()
        return inputs

    outputs = ["logits"] + [f"present_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]
    return Built(model, make_inputs, outputs)


class WhisperAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden, bias=False), nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)

    def forward(self, x, kv, mask=None):
        b, n, c = x.shape
        d = c // self.heads
        q = self.q(x).view(b, n, self.heads, d).permute(0, 2, 1, 3)
        k = self.k(kv).view(b, kv.shape[1], self.heads, d).permute(0, 2, 3, 1)
        v = self.v(kv).view(b, kv.shape[1], self.heads, d).permute(0, 2, 1, 3)
        w = (q * d ** -0.25) @ (k * d ** -0.25)
        if mask is not None:
            w = w + mask
        return self.out((torch.softmax(w, dim=-1) @ v).permute(0, 2, 1, 3).reshape(b, n, c))


class WhisperBlock(nn.Module):
    def __init__(self, hidden, heads, cross):
        super().__init__()
        self.attn, self.attn_ln = WhisperAttention(hidden, heads), nn.LayerNorm(hidden)
        self.cross = WhisperAttention(hidden, heads) if cross else None
        self.cross_ln = nn.LayerNorm(hidden) if cross else None
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))
        self.mlp_ln = nn.LayerNorm(hidden)

    def forward(self, x, enc=None, mask=None):
        h = self.attn_ln(x)
        x = x + self.attn(h, h, mask)
        if self.cross is not None:
            x = x + self.cross(self.cross_ln(x), enc)
        return x + self.mlp(self.mlp_ln(x))


class WhisperStyle(nn.Module):
    """Whisper's architecture at tiny width with fewer layers: a log-mel encoder (two Conv1d +
    GELU, the second stride 2, sinusoidal positions, pre-LN blocks) and a token decoder (learned
    positions, causal self-attention, cross-attention to the encoder, tied output projection)."""

    def __init__(self, n_mels, mel_frames, hidden, heads, enc_layers, dec_layers, vocab, tokens):
        super().__init__()
        self.conv1 = nn.Conv1d(n_mels, hidden, 3, padding=1)
        self.conv2 = nn.Conv1d(hidden, hidden, 3, stride=2, padding=1)
        frames = mel_frames // 2
        inv = torch.exp(-math.log(10000) / (hidden // 2 - 1) * torch.arange(hidden // 2))
        t = torch.arange(frames)[:, None] * inv[None, :]
        self.register_buffer("enc_pos", torch.cat([torch.sin(t), torch.cos(t)], dim=1))
        self.enc = nn.ModuleList([WhisperBlock(hidden, heads, False) for _ in range(enc_layers)])
        self.enc_ln = nn.LayerNorm(hidden)
        self.tok = nn.Embedding(vocab, hidden)
        self.dec_pos = nn.Parameter(torch.empty(448, hidden).normal_(0, 0.02))
        self.dec = nn.ModuleList([WhisperBlock(hidden, heads, True) for _ in range(dec_layers)])
        self.dec_ln = nn.LayerNorm(hidden)
        self.register_buffer("causal", torch.full((tokens, tokens), float("-inf")).triu(1))

    def forward(self, mel, tokens):
        x = F.gelu(self.conv2(F.gelu(self.conv1(mel)))).permute(0, 2, 1) + self.enc_pos
        for block in self.enc:
            x = block(x)
        enc = self.enc_ln(x)
        y = self.tok(tokens) + self.dec_pos[: tokens.shape[1]]
        for block in self.dec:
            y = block(y, enc, self.causal)
        return self.dec_ln(y) @ self.tok.weight.t()


def whisper(mel_frames, n_mels, hidden, heads, enc_layers, dec_layers, vocab, tokens):
    model = WhisperStyle(n_mels, mel_frames, hidden, heads, enc_layers, dec_layers, vocab, tokens)
    init_transformer(model)

    def make_inputs(b, seed):
        g = gen(seed)
        # Whisper's log-mel features are clamped to (max - 8) and scaled to about [-1, 1].
        mel = (torch.rand(b, n_mels, mel_frames, generator=g) * 2 - 1).numpy()
        ids = torch.randint(0, vocab, (b, tokens), generator=g)
        ids[:, 0] = 50258  # <|startoftranscript|>
        return {"mel": mel, "decoder_input_ids": ids.numpy()}

    return Built(model, make_inputs, ["logits"])


class DistilBertLayer(nn.Module):
    def __init__(self, hidden=768, heads=12, ffn=3072):
        super().__init__()
        self.heads = heads
        self.q_lin, self.k_lin = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.v_lin, self.out_lin = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.sa_layer_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.lin1, self.lin2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
        self.output_layer_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, mask):
        b, n, c = x.shape
        d = c // self.heads
        shape = lambda t: t.view(b, -1, self.heads, d).transpose(1, 2)  # noqa: E731
        q = shape(self.q_lin(x)) / math.sqrt(d)
        scores = q @ shape(self.k_lin(x)).transpose(2, 3)
        masked = (mask == 0).view(b, 1, 1, n).expand_as(scores)
        scores = scores.masked_fill(masked, torch.tensor(torch.finfo(scores.dtype).min))
        ctx = (torch.softmax(scores, dim=-1) @ shape(self.v_lin(x))).transpose(1, 2).reshape(b, n, c)
        x = self.sa_layer_norm(self.out_lin(ctx) + x)
        return self.output_layer_norm(self.lin2(F.gelu(self.lin1(x))) + x)


class DistilBert(nn.Module):
    """HF DistilBertModel's computation (6 layers, 768 wide, 12 heads) in plain torch."""

    def __init__(self, vocab=30522, hidden=768, layers=6, positions=512):
        super().__init__()
        self.word_embeddings, self.position_embeddings = nn.Embedding(vocab, hidden), nn.Embedding(positions, hidden)
        self.layer_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList([DistilBertLayer(hidden) for _ in range(layers)])

    def forward(self, input_ids, attention_mask):
        positions = torch.arange(input_ids.shape[1], dtype=torch.int64)[None]
        x = self.layer_norm(self.word_embeddings(input_ids) + self.position_embeddings(positions))
        for layer in self.layers:
            x = layer(x, attention_mask)
        return x


def distilbert(seq, valid):
    model = DistilBert()
    init_transformer(model)

    def make_inputs(b, seed):
        ids = torch.randint(1000, 30522, (b, seq), generator=gen(seed))
        ids[:, 0], ids[:, valid - 1], ids[:, valid:] = 101, 102, 0  # [CLS] ... [SEP] [PAD]...
        mask = torch.ones(b, seq, dtype=torch.int64)
        mask[:, valid:] = 0
        return {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}

    return Built(model, make_inputs, ["last_hidden_state"])


BUILDERS = {f.__name__: f for f in (torchvision_classifier, torchvision_segmentation, ssdlite, db_text_detector,
                                    crnn, svtr, vad, kws_mlp, face_detector_nhwc, gpt2, whisper, distilbert)}


# ---------------------------------------------------------------------------------------------
# float16

def prepare_float16(model):
    """Fuse Conv+BatchNorm in torch and round every parameter and buffer to float16, so the
    float16 ONNX holds exactly the weights torch computes the reference with."""
    from torch.fx.experimental.optimization import fuse
    model = fuse(model.eval())
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if t.dtype == torch.float32:
                t.copy_(t.half().float())
    return model


def convert_onnx_to_float16(path):
    """Every float tensor of the graph (initializers, Constant nodes, Cast targets, inputs,
    outputs) becomes float16; intermediate types are left to shape inference."""
    import onnx
    from onnx import TensorProto, numpy_helper
    m = onnx.load(path)
    g = m.graph
    for i, init in enumerate(g.initializer):
        if init.data_type == TensorProto.FLOAT:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name))
    for node in g.node:
        for attr in node.attribute:
            if node.op_type == "Constant" and attr.name == "value" and attr.t.data_type == TensorProto.FLOAT:
                attr.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(attr.t).astype(np.float16), attr.t.name))
            if node.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.FLOAT:
                attr.i = TensorProto.FLOAT16
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    del g.value_info[:]
    onnx.save(m, path)


# ---------------------------------------------------------------------------------------------

def export_one(name, entry, batch, out_dir, force, built_cache):
    model_dir = os.path.join(out_dir, name)
    stamp = os.path.join(model_dir, ".stamp")
    if not force and is_cached(out_dir, name, entry, batch):
        print(f"[corpus] {name}: cached in {model_dir}", flush=True)
        return None
    os.makedirs(model_dir, exist_ok=True)
    for f in os.listdir(model_dir):  # stale inputs/outputs of an earlier entry must not linger
        if f.endswith(".npy") or f in (".stamp", "spec.json", "model.onnx"):
            os.remove(os.path.join(model_dir, f))
    t0 = time.time()
    key = entry["name"]
    if key not in built_cache:  # batch variants share one built, calibrated model
        torch.manual_seed(0)
        built = BUILDERS[entry["builder"]](**entry.get("params", {}))
        calibrate_batchnorm(built.module, built.make_inputs)
        for layer in built.logit_layers:
            scale_logits(built.module, layer, built.make_inputs)
        if entry.get("dtype") == "float16":
            built.module = prepare_float16(built.module)
        built_cache.clear()
        built_cache[key] = built
    built = built_cache[key]
    model = built.module.eval()
    inputs = built.make_inputs(batch, 1)
    fp16 = entry.get("dtype") == "float16"
    if fp16:
        inputs = {n: a.astype(np.float16).astype(np.float32) if a.dtype == np.float32 else a for n, a in inputs.items()}
    args = tuple(torch.from_numpy(a) for a in inputs.values())
    with torch.no_grad():
        outs = model(*args)
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    assert len(outs) == len(built.outputs), f"{name}: {len(outs)} outputs, {len(built.outputs)} names"
    onnx_path = os.path.join(model_dir, "model.onnx")
    torch.onnx.export(model, args, onnx_path, input_names=list(inputs), output_names=built.outputs,
                      opset_version=entry["opset"], do_constant_folding=True)
    if fp16:
        convert_onnx_to_float16(onnx_path)
        inputs = {n: a.astype(np.float16) if a.dtype == np.float32 else a for n, a in inputs.items()}
    import onnx
    onnx.checker.check_model(onnx_path)  # by path: works for models over 2 GB too
    spec = {"name": name, "entry": entry["name"], "builder": entry["builder"], "batch": batch, "opset": entry["opset"],
            "dtype": entry.get("dtype", "float32"), "family": entry.get("family"), "ci": bool(entry.get("ci")) and batch == 1,
            "torch": torch.__version__, "inputs": [], "outputs": []}
    for n, a in inputs.items():
        np.save(os.path.join(model_dir, f"{n}.npy"), a)
        spec["inputs"].append({"name": n, "shape": list(a.shape), "dtype": str(a.dtype)})
    for n, t in zip(built.outputs, outs):
        arr = t.detach().numpy()
        arr = arr.astype(np.float16) if fp16 and arr.dtype == np.float32 else arr
        np.save(os.path.join(model_dir, f"expected_{n}.npy"), arr)
        spec["outputs"].append({"name": n, "shape": list(arr.shape), "dtype": str(arr.dtype),
                                "max_abs": float(np.abs(arr.astype(np.float64)).max()),
                                "std": float(arr.astype(np.float64).std())})
    m = onnx.load(onnx_path, load_external_data=False)
    spec["nodes"] = len(m.graph.node)
    spec["op_types"] = dict(collections.Counter(n.op_type for n in m.graph.node).most_common())
    spec["onnx_bytes"] = os.path.getsize(onnx_path)
    spec["export_s"] = round(time.time() - t0, 2)
    with open(os.path.join(model_dir, "spec.json"), "w") as f:
        json.dump(spec, f, indent=1)
    # The stamp goes last: an interrupted export is redone, never half-used.
    with open(stamp, "w") as f:
        f.write(stamp_text(entry, batch) + "\n")
    outs_txt = ", ".join(f"{o['name']} {o['shape']} max|x| {o['max_abs']:.3g} std {o['std']:.3g}" for o in spec["outputs"])
    print(f"[corpus] {name}: {spec['nodes']} nodes, opset {entry['opset']}, {spec['export_s']:.1f}s: {outs_txt}",
          flush=True)
    return spec["export_s"]


def main():
    models = expand()
    a = parse_args([m[0] for m in models])
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    t0 = time.time()
    built_cache, done, failed = {}, 0, []
    for name, entry, batch in selected(a, models):
        try:
            if export_one(name, entry, batch, a.out_dir, a.force, built_cache) is not None:
                done += 1
        except Exception as e:  # report every model that fails, not just the first
            import traceback
            traceback.print_exc()
            print(f"[corpus] {name}: export FAILED: {type(e).__name__}: {e}", flush=True)
            failed.append(name)
            built_cache.clear()
    print(f"[corpus] exported {done} models in {time.time() - t0:.1f}s into {a.out_dir}"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
