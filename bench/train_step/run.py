#!/usr/bin/env python3
"""Training-step speed, gearbox against torch 1.13 (issue 22: graph mode <= 0.7x torch's eager
step on the CNN and the transformer). For each configuration, --rounds rounds each run gearbox
graph mode, gearbox eager mode and torch, in a new shuffled order every round (the machine is
shared: its noise falls on all three), each a fresh process timing --steps steps after a
warm-up; a runner's time is the median of its per-round medians. Prints a table with the ratios
to torch; --json writes the rows.

  cmake --build build --target gearbox_bench_train_step
  GEARBOX_NUM_THREADS=2 python3 bench/train_step/run.py --build build [--rounds 5] [--steps 200]

Both sides get the same thread count (GEARBOX_NUM_THREADS, else OMP_NUM_THREADS, else 1).
"""
import argparse, json, os, random, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))

CONFIGS = [  # (model, batch, width)
    ("cnn", 64, 16),
    ("cnn", 256, 16),
    ("transformer", 64, 16),
    ("transformer", 64, 64),
]


def run(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--json")
    args = ap.parse_args()
    threads = os.environ.get("GEARBOX_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS") or "1"
    env = dict(os.environ, GEARBOX_NUM_THREADS=threads, OMP_NUM_THREADS=threads)
    binary = os.path.join(args.build, "bench", "gearbox_bench_train_step")
    rows = []
    for model, batch, width in CONFIGS:
        runners = {
            "graph": [binary, model, "graph", str(batch), str(args.steps), str(width)],
            "eager": [binary, model, "eager", str(batch), str(args.steps), str(width)],
            "torch": [args.python, os.path.join(HERE, "torch_peer.py"), model, str(batch), str(args.steps), str(width)],
        }
        medians = {k: [] for k in runners}
        for _ in range(args.rounds):
            order = list(runners)
            random.shuffle(order)
            for k in order:
                medians[k].append(run(runners[k], env)["median_ms"])
        t = {k: statistics.median(v) for k, v in medians.items()}
        row = {"model": model, "batch": batch, "width": width, "threads": int(threads),
               "graph_ms": t["graph"], "eager_ms": t["eager"], "torch_ms": t["torch"],
               "graph_over_torch": t["graph"] / t["torch"], "eager_over_torch": t["eager"] / t["torch"],
               "per_round_ms": medians}
        rows.append(row)
        print(f"{model:12s} batch {batch:4d} width {width:3d} threads {threads}: graph {t['graph']:.3f} ms, "
              f"eager {t['eager']:.3f} ms, torch {t['torch']:.3f} ms; graph/torch {row['graph_over_torch']:.2f}, "
              f"eager/torch {row['eager_over_torch']:.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
