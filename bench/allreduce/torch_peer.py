#!/usr/bin/env python3
"""torch.distributed's Gloo backend measured like allreduce_bench.cc (nccl-tests' definitions):
python3 torch_peer.py --ranks 4 --sizes 4,65536,67108864
prints "torch gloo RANKS BYTES TIME_US ALGBW_GBS BUSBW_GBS" per size."""
import argparse, os, socket, sys, time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, n, port, sizes, min_seconds):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    for nbytes in sizes:
        t = torch.zeros(max(nbytes // 4, 1), dtype=torch.float32)
        for _ in range(2):
            dist.all_reduce(t)
        t0 = time.perf_counter(); dist.all_reduce(t); once = time.perf_counter() - t0
        iters = torch.tensor([max(3, min(1000, int(min_seconds / max(once, 1e-6))))], dtype=torch.int64)
        dist.broadcast(iters, 0)
        dist.barrier()
        k = int(iters.item())
        t0 = time.perf_counter()
        for _ in range(k):
            dist.all_reduce(t)
        per = torch.tensor([(time.perf_counter() - t0) / k])
        dist.all_reduce(per, op=dist.ReduceOp.MAX)
        if rank == 0:
            s = per.item(); algbw = t.numel() * 4 / s / 1e9
            print(f"torch gloo {n} {t.numel() * 4} {s * 1e6:.1f} {algbw:.4f} {algbw * 2 * (n - 1) / n:.4f}", flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--sizes", default="4,1024,65536,1048576,16777216,67108864,268435456")
    p.add_argument("--min-seconds", type=float, default=0.3)
    a = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    sizes = [int(x) for x in a.sizes.split(",")]
    mp.spawn(run, args=(a.ranks, port, sizes, a.min_seconds), nprocs=a.ranks, join=True)


if __name__ == "__main__":
    sys.exit(main())
