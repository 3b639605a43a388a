#!/usr/bin/python3
"""gearbox plan MODEL.onnx: GPT-style models exported by torch are read for the planner's
dimensions, checked against the torch configuration that built them and against torch's own
parameter count; models it cannot read are refused with a code, never planned wrongly.

  check_plan_model.py GEARBOX WORK_DIR
"""
import json
import os
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

gbx, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


class ManualBlock(nn.Module):
    """GPT-2's block written out: scores [b, H, s, s], a causal mask, a tanh-free GELU MLP."""

    def __init__(self, c):
        super().__init__()
        h = c["hidden"]
        self.heads, self.seq, self.batch = c["heads"], c["seq"], c["batch"]
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.fc1, self.fc2 = nn.Linear(h, c["ffn"]), nn.Linear(c["ffn"], h)
        self.register_buffer("mask", torch.triu(torch.full((self.seq, self.seq), float("-inf")), 1))

    def forward(self, x):
        b, s, h, H = self.batch, self.seq, x.shape[-1], self.heads
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (t.reshape(b, s, H, h // H).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-1, -2) / (h // H) ** 0.5 + self.mask, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden"]
        self.tok, self.pos = nn.Embedding(c["vocab"], h), nn.Embedding(c["seq"], h)
        if c["torch_layer"]:
            self.blocks = nn.ModuleList([nn.TransformerEncoderLayer(h, c["heads"], c["ffn"], dropout=0.0,
                                                                    activation="gelu", batch_first=True,
                                                                    norm_first=True) for _ in range(c["layers"])])
        else:
            self.blocks = nn.ModuleList([ManualBlock(c) for _ in range(c["layers"])])
        self.lnf = nn.LayerNorm(h)
        self.head = nn.Linear(h, c["vocab"], bias=False)
        if c["tied"]:
            self.head.weight = self.tok.weight
        self.torch_layer = c["torch_layer"]
        self.register_buffer("mask", torch.triu(torch.full((c["seq"], c["seq"]), float("-inf")), 1))
        self.register_buffer("positions", torch.arange(c["seq"]))

    def forward(self, ids):
        x = self.tok(ids) + self.pos(self.positions)
        for b in self.blocks:
            x = b(x, src_mask=self.mask) if self.torch_layer else b(x)
        return self.head(self.lnf(x))


def export(c, path, dynamic=False):
    torch.manual_seed(0)
    m = GPT(c).eval()
    kw = {"dynamic_axes": {"ids": {0: "batch"}}} if dynamic else {}
    torch.onnx.export(m, torch.zeros(c["batch"], c["seq"], dtype=torch.long), path, opset_version=17,
                      input_names=["ids"], output_names=["logits"], **kw)
    return sum(p.numel() for p in m.parameters())  # tied weights once


def plan(*args):
    return subprocess.run([gbx, "plan", *args], capture_output=True, text=True, timeout=300)


links = os.path.join(work, "links.json")  # no peak measurement on this machine
with open(links, "w") as f:
    json.dump({"device": {"peak_tflops": 1, "memory_bandwidth_gbs": 50, "memory_gb": 64}}, f)

configs = [
    dict(layers=3, hidden=64, heads=4, vocab=200, seq=16, ffn=256, batch=2, tied=True, torch_layer=True),
    dict(layers=2, hidden=48, heads=6, vocab=97, seq=12, ffn=80, batch=3, tied=False, torch_layer=True),
    dict(layers=4, hidden=32, heads=2, vocab=150, seq=8, ffn=128, batch=4, tied=True, torch_layer=False),
    dict(layers=1, hidden=64, heads=8, vocab=300, seq=10, ffn=96, batch=1, tied=False, torch_layer=False),
]
for i, c in enumerate(configs):
    path = os.path.join(work, f"gpt{i}.onnx")
    params = export(c, path)
    p = plan(path, "--devices", "4", "--links", links, "--json", "--global-batch", "8")
    check(p.returncode == 0, f"{c}: exit {p.returncode} {p.stderr[-400:]}")
    if p.returncode != 0:
        continue
    net = json.loads(p.stdout)["network"]
    want = dict(layers=c["layers"], hidden=c["hidden"], heads=c["heads"], vocab=c["vocab"], seq=c["seq"],
                ffn_hidden=c["ffn"], tied_embeddings=c["tied"], global_batch=8, dtype="fp32")
    got = {k: net[k] for k in want}
    check(got == want, f"model {i} read as {got}, built as {want}")
    check(net["parameters"] == params, f"model {i}: the planner counts {net['parameters']} parameters, torch {params}")
    print(f"model {i}: {got}, {params} parameters")
    # The same network described as JSON plans the same layout.
    spec = os.path.join(work, f"gpt{i}.json")
    with open(spec, "w") as f:
        json.dump({"name": f"gpt{i}", "layers": c["layers"], "hidden": c["hidden"], "heads": c["heads"],
                   "vocab": c["vocab"], "seq": c["seq"], "global_batch": 8, "ffn_hidden": c["ffn"],
                   "dtype": "fp32", "tied_embeddings": c["tied"]}, f)
    q = plan(spec, "--devices", "4", "--links", links, "--json")
    check(q.returncode == 0, f"model {i} described as JSON: exit {q.returncode} {q.stderr[-300:]}")
    if q.returncode == 0:
        a, b = json.loads(p.stdout)["chosen"], json.loads(q.stdout)["chosen"]
        check(a == b, f"model {i} and its JSON plan alike: {a} vs {b}")

# The model's own batch when --global-batch is not given.
p = plan(os.path.join(work, "gpt0.onnx"), "--devices", "2", "--links", links, "--json")
check(p.returncode == 0 and json.loads(p.stdout)["network"]["global_batch"] == 2, f"input batch: {p.stdout[:200]}")

# Refused, with a code and what is missing: a dynamic batch, a model that is not a language
# model, a truncated file.
dyn = os.path.join(work, "dynamic.onnx")
export(configs[0], dyn, dynamic=True)
cnn = os.path.join(work, "cnn.onnx")
torch.onnx.export(nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10)).eval(),
                  torch.zeros(1, 1, 8, 8), cnn, opset_version=17)
trunc = os.path.join(work, "truncated.onnx")
with open(os.path.join(work, "gpt0.onnx"), "rb") as f, open(trunc, "wb") as g:
    g.write(f.read()[:300])
for path, code, words in [(dyn, "PLAN_MODEL_UNSUPPORTED", "static"),
                          (cnn, "PLAN_MODEL_UNSUPPORTED", "token embedding"),
                          (trunc, "MODEL_PARSE_FAILED", ""),
                          (os.path.join(work, "missing.onnx"), "FILE_NOT_FOUND", "")]:
    p = plan(path, "--devices", "4", "--links", links)
    check(p.returncode != 0 and code in p.stderr and words in p.stderr and "Traceback" not in p.stderr,
          f"{os.path.basename(path)}: non-zero exit with {code} ({words}): exit {p.returncode}, {p.stderr.strip()[:300]}")

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
