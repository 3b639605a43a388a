#!/usr/bin/env python3
"""torch 1.13's side of bench/train_step: the same network, batch, loss and optimizer as
train_step.cc, eager (torch's only mode in 1.13 on this machine's CPU path), timed step by step
after a warm-up; prints one JSON object like train_step.cc's.

  python3 bench/train_step/torch_peer.py cnn|transformer [BATCH] [STEPS] [WIDTH]

Threads: torch.set_num_threads(GEARBOX_NUM_THREADS or OMP_NUM_THREADS or all cores), the
count run.py gives both sides.
"""
import json, os, statistics, sys, time

import torch
import torch.nn.functional as F

# The digits CNN, module for module as the parity tests train it.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "frontend"))
from torch_reference import DigitsCnn  # noqa: E402


class DigitsTransformer(torch.nn.Module):
    """torch_reference.py's DigitsTransformer (two encoder layers) at any width."""

    def __init__(self, width):
        super().__init__()
        self.embed = torch.nn.Linear(8, width)
        self.encoder = torch.nn.TransformerEncoderLayer(width, 4, 2 * width, dropout=0.0, batch_first=True)
        self.encoder2 = torch.nn.TransformerEncoderLayer(width, 4, 2 * width, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.encoder2(self.encoder(self.embed(x.reshape(-1, 8, 8)))).mean(dim=1))


def main():
    model = sys.argv[1]
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    width = int(sys.argv[4]) if len(sys.argv) > 4 else 16
    threads = os.environ.get("GEARBOX_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    if threads:
        torch.set_num_threads(int(threads))
    torch.manual_seed(0)
    net = DigitsCnn() if model == "cnn" else DigitsTransformer(width)
    net.train()
    x = torch.rand(batch, 1, 8, 8) if model == "cnn" else torch.rand(batch, 64)
    y = torch.arange(batch) % 10
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-2)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(max(5, steps // 10)):
        step()
    ms = []
    for _ in range(steps):
        t0 = time.perf_counter()
        loss = step()
        ms.append((time.perf_counter() - t0) * 1e3)
    q = statistics.quantiles(ms, n=4)
    print(json.dumps({"runner": "torch", "model": model, "mode": "eager", "batch": batch, "steps": steps,
                      "median_ms": statistics.median(ms), "p25_ms": q[0], "p75_ms": q[2], "last_loss": loss,
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
