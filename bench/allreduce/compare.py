#!/usr/bin/env python3
"""Alternates gearbox's and torch.distributed's Gloo allreduce runs (rounds x {gearbox, torch}),
per rank count, and prints a Markdown table of medians with the 64 MB busbw ratio.
python3 bench/allreduce/compare.py --bench build/bench/gearbox_bench_allreduce --ranks 2,4 --rounds 3"""
import argparse, os, statistics, subprocess, sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [l.split() for l in out.splitlines() if l.startswith(("gearbox ", "torch "))]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", required=True)
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--sizes", default="4,1024,65536,1048576,16777216,67108864,268435456")
    p.add_argument("--algorithms", default="auto,ring,bcube,halving_doubling")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--min-seconds", default="0.3")
    a = p.parse_args()
    rows = defaultdict(list)  # (ranks, who, algo, bytes) -> [(time_us, algbw, busbw)]
    for n in a.ranks.split(","):
        for _ in range(a.rounds):
            for line in run([a.bench, "--ranks", n, "--sizes", a.sizes, "--algorithms", a.algorithms, "--min-seconds", a.min_seconds]):
                rows[(int(n), line[0], line[1], int(line[3]))].append(tuple(map(float, line[4:7])))
            for line in run([sys.executable, os.path.join(HERE, "torch_peer.py"), "--ranks", n, "--sizes", a.sizes, "--min-seconds", a.min_seconds]):
                rows[(int(n), line[0], line[1], int(line[3]))].append(tuple(map(float, line[4:7])))
    print("| ranks | backend | algorithm | bytes | time (us) | algbw (GB/s) | busbw (GB/s) |")
    print("|---|---|---|---|---|---|---|")
    for key in sorted(rows):
        med = [statistics.median(v[i] for v in rows[key]) for i in range(3)]
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {med[0]:.1f} | {med[1]:.3f} | {med[2]:.3f} |")


if __name__ == "__main__":
    main()
