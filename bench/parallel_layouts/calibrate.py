#!/usr/bin/env python3
"""Measures this machine for gearbox plan's cost model and writes a links file
(bench/plan/this_machine.json): what run.py compares the planner's predictions with.

  python3 bench/parallel_layouts/calibrate.py --build build --devices 4 \
      --out bench/plan/this_machine.json

What it measures (each the median of --repeats runs, one OpenMP thread per process, as the
ranks run):
  device.peak_tflops, matmul_efficiency 1   the framework's float32 matmul rate at the
                                            network's MLP shapes (one process, alone)
  device.memory_bandwidth_gbs               an elementwise add of 8M floats
  device.op_overhead_us                     the fixed cost of an op: one block's forward and
                                            backward at one token, over the cost model's ops
  device.ops                                a profile: each of the cost model's ops' forward
                                            and backward rate (the FLOPs the model counts for
                                            it per second), from the framework's layers timed
                                            at the network's shapes (one process, alone)
  device.compute_share                      cores / devices: the ranks are processes sharing
                                            this host's cores (os.sched_getaffinity)
  intra_node latency_us, bandwidth_gbs      least-squares fit of the cost model's ring
                                            allreduce, 2(n-1) alpha + 2(n-1)/n S / beta, to
                                            bench/allreduce's times on --devices loopback ranks
  devices_per_node                          --devices (one host)
Nothing is fitted to the layouts' step times: the parameters come from these primitives only.
"""
import argparse, datetime, json, os, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def one_thread_env():
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["GEARBOX_NUM_THREADS"] = "1"
    return env


def fit_alpha_beta(rows, n):
    """rows: [(bytes, seconds)]; t = a * 2(n-1) + (2(n-1)/n * S) * (1/beta). Least squares,
    weighted by 1/t so that small and large messages count alike (relative error)."""
    sxx = sxy = syy = sx = sy = sw = 0.0
    # Weighted linear regression of t on x = 2(n-1)/n S with intercept c = 2(n-1) alpha.
    for s, t in rows:
        w = 1.0 / (t * t)
        x = 2.0 * (n - 1) / n * s
        sw += w; sx += w * x; sy += w * t; sxx += w * x * x; sxy += w * x * t
    slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx)
    c = (sy - slope * sx) / sw
    return max(c, 0.0) / (2.0 * (n - 1)), 1.0 / slope


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--network", default=os.path.join(HERE, "gpt_bench.json"))
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sizes", default="4096,16384,65536,262144,1048576,4194304")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "plan", "this_machine.json"))
    a = p.parse_args()
    bench = os.path.join(a.build, "bench", "gearbox_bench_parallel_layouts")
    allreduce = os.path.join(a.build, "bench", "gearbox_bench_allreduce")
    env = one_thread_env()

    runs = []
    for _ in range(a.repeats):
        out = subprocess.run([bench, "calibrate", a.network], check=True, capture_output=True, text=True, env=env).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    scalars = [k for k in runs[0] if not isinstance(runs[0][k], dict)]
    med = {k: statistics.median(r[k] for r in runs) for k in scalars}
    ops = {op: {d: statistics.median(r["ops"][op][d] for r in runs) for d in ("forward_gflops", "backward_gflops")}
           for op in runs[0]["ops"]}
    profile = {g: {d: statistics.median(r["profile_ms"][g][d] for r in runs) for d in ("forward_ms", "backward_ms")}
               for g in runs[0]["profile_ms"]}

    times = {}  # bytes -> [seconds]
    for _ in range(a.repeats):
        out = subprocess.run([allreduce, "--ranks", str(a.devices), "--sizes", a.sizes, "--algorithms", "auto",
                              "--min-seconds", "0.2"], check=True, capture_output=True, text=True, env=env).stdout
        for line in out.splitlines():
            f = line.split()
            if f and f[0] == "gearbox":  # gearbox ALGO RANKS BYTES TIME_US ALGBW BUSBW
                times.setdefault(int(f[3]), []).append(float(f[4]) * 1e-6)
    rows = [(s, statistics.median(t)) for s, t in sorted(times.items())]
    alpha, beta = fit_alpha_beta(rows, a.devices)

    cores = len(os.sched_getaffinity(0))
    share = min(1.0, cores / a.devices)
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30 / a.devices
    link = {"bandwidth_gbs": beta / 1e9, "latency_us": alpha * 1e6}
    doc = {
        "devices_per_node": a.devices,
        "intra_node": link,
        "inter_node": link,
        "device": {
            "peak_tflops": med["matmul_gflops"] / 1e3,
            "matmul_efficiency": 1.0,
            "memory_bandwidth_gbs": med["memory_bandwidth_gbs"],
            "memory_gb": mem_gb,
            "op_overhead_us": med["op_overhead_us"],
            "compute_share": share,
            "ops": ops,
        },
        "calibration": {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "host_cores": cores,
            "load_average": os.getloadavg()[0],
            "network": os.path.relpath(a.network, ROOT),
            "primitives": med,
            "profile_ms": profile,
            "allreduce_auto_seconds": {str(s): t for s, t in rows},
            "how": "bench/parallel_layouts/calibrate.py (docs/parallel.md, 'Calibrating for this machine')",
        },
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    sys.exit(main())
