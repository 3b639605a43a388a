#!/usr/bin/env python3
"""Runs every dp x tp x pp layout of one GPT-style transformer on --devices local ranks, timed,
and compares with gearbox plan's predictions for the same network and links file.

  python3 bench/parallel_layouts/calibrate.py --build build      # writes bench/plan/this_machine.json
  python3 bench/parallel_layouts/run.py --build build --rounds 5 --steps 8

For each layout the planner's best configuration of those degrees (micro-batches, schedule,
stage cut, the units run whole on every tensor-parallel rank, and where it runs some whole also
the same degrees with every unit split, to check that choice; the search without ZeRO or
recomputation, which the bench does not run) is trained
under `gearbox launch` for --warmup + --steps steps. The machine is shared, so the layouts run
in --rounds rounds, each in a new shuffled order, and a layout's time is the median over all its
timed steps of every round. Prints a table (layout, measured, predicted, ranks), the Spearman
correlation of the two rankings, and whether the search's pick is within 10% of the fastest
measured layout. Every layout trains the same network on the same batches from the same
weights, so their losses must agree (printed: the largest relative difference; a layout that
computed something else would show here, and the script fails). --smoke: 2 steps per layout,
one round (ctest's comm.bench_parallel_layouts_smoke, on a tiny network: every layout runs and
trains the same network; no timing verdict).
"""
import argparse, json, os, random, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def ranks(values):
    """1 = smallest; ties get the mean of their ranks (Spearman's convention)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb)


def name(l):
    whole = ",".join(str(u) for u in l.get("replicated_units", []))
    return f"{l['dp']}x{l['tp']}x{l['pp']}" + (f" whole {whole}" if whole else "")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--network", default=os.path.join(HERE, "gpt_bench.json"))
    p.add_argument("--links", default=os.path.join(ROOT, "bench", "plan", "this_machine.json"))
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--json", help="also write the results here")
    a = p.parse_args()
    if a.smoke:
        a.rounds, a.steps, a.warmup = 1, 2, 0
    bench = os.path.join(a.build, "bench", "gearbox_bench_parallel_layouts")
    gearbox = os.path.join(a.build, "gearbox")
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"  # one thread per rank: the ranks are the devices
    env["GEARBOX_NUM_THREADS"] = "1"

    out = subprocess.run([bench, "predict", a.network, a.links, str(a.devices)], check=True, capture_output=True,
                         text=True).stdout
    lines = [json.loads(l) for l in out.splitlines() if l.strip()]
    chosen = name(lines[-1]["chosen"])
    layouts = [l for l in lines[:-1] if l["fits"]]
    load_start = os.getloadavg()
    times = {name(l["layout"]): [] for l in layouts}
    losses = {}
    rng = random.Random(a.seed)
    for rnd in range(a.rounds):
        order = list(layouts)
        rng.shuffle(order)
        for l in order:
            lay = l["layout"]
            cmd = [gearbox, "launch", "-n", str(a.devices), "--timeout", "120", "--", bench, "run", a.network,
                   json.dumps(lay), str(a.steps), str(a.warmup)]
            res = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if res.returncode != 0:
                sys.stderr.write(res.stdout + res.stderr)
                raise SystemExit(f"layout {name(lay)} failed")
            doc = next(json.loads(x.split("] ", 1)[1]) for x in res.stdout.splitlines() if x.startswith("[rank 0] {"))
            times[name(lay)] += doc["step_s"]
            losses[name(lay)] = doc["loss"]
            print(f"round {rnd + 1} {name(lay):>14}: median {statistics.median(doc['step_s']) * 1e3:8.1f} ms",
                  file=sys.stderr, flush=True)
    load_end = os.getloadavg()

    names = [name(l["layout"]) for l in layouts]
    measured = [statistics.median(times[n]) for n in names]
    predicted = [l["estimate"]["step_s"] for l in layouts]
    rm, rp = ranks(measured), ranks(predicted)
    ref = losses[names[0]]
    loss_diff = max(abs(x - y) / abs(y) for n in names for x, y in zip(losses[n], ref))
    print(f"network {os.path.relpath(a.network, ROOT)}, links {os.path.relpath(a.links, ROOT)}, {a.devices} ranks, "
          f"{a.rounds} rounds x {a.steps} steps (+{a.warmup} warm-up), "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"load average {load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end; "
          f"{len(os.sched_getaffinity(0))} cores")
    print()
    print("| layout dp x tp x pp | micro-batches | schedule | stage units | whole units | measured ms (median) | "
          "spread ms (p25-p75) | predicted ms | measured rank | predicted rank |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for i, l in enumerate(layouts):
        lay = l["layout"]
        q = statistics.quantiles(times[names[i]], n=4, method="inclusive") if len(times[names[i]]) > 1 else [measured[i]] * 3
        mark = " (pick)" if names[i] == chosen else ""
        print(f"| {names[i]}{mark} | {lay['micro_batches']} | {lay['schedule'] if lay['pp'] > 1 else '-'} | "
              f"{' '.join(str(u) for u in lay['stage_units'])} | "
              f"{' '.join(str(u) for u in lay['replicated_units']) or '-'} | {measured[i] * 1e3:.1f} | "
              f"{q[0] * 1e3:.1f}-{q[2] * 1e3:.1f} | {predicted[i] * 1e3:.1f} | {rm[i]:g} | {rp[i]:g} |")
    rho = spearman(measured, predicted)
    fastest = min(measured)
    pick = measured[names.index(chosen)]
    print()
    print(f"Spearman correlation of the rankings: {rho:.3f} (criterion >= 0.8)")
    print(f"search's pick {chosen}: {pick * 1e3:.1f} ms measured, fastest measured "
          f"{names[measured.index(fastest)]} {fastest * 1e3:.1f} ms: {100 * (pick / fastest - 1):.1f}% slower "
          f"(criterion <= 10%)")
    print(f"losses of all layouts agree within {loss_diff:.2e} relative (the same training in every layout)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"layouts": layouts, "measured_s": dict(zip(names, measured)), "times_s": times,
                       "chosen": chosen, "spearman": rho, "load": [load_start, load_end]}, f, indent=1)
    if loss_diff > 1e-3:
        raise SystemExit("the layouts' losses disagree: some layout trains a different network")


if __name__ == "__main__":
    main()
