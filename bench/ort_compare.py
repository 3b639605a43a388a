#!/usr/bin/python3
"""gearbox vs ONNX Runtime 1.30 (onnxruntime-node) on the same inputs, alternating rounds.

Usage (from the repository root, after the build made build/testdata):
  /usr/bin/python3 bench/ort_compare.py [--gearbox build/gearbox] [--rounds 5] [--runs 20]
                                        [--threads 2] [--models resnet50,resnet50_b8,mobilenet_v2,bert]

Per model the driver
  * writes the inputs once with numpy (seeded: floats uniform in [-1, 1], integer ids in
    [0, 64), ones for names with "mask", zeros for "type"/"segment") as .npy files;
  * starts `gearbox bench MODEL --rounds-stdin --input ...` and `node bench/ort_runner.js` on
    those files, each with THREADS intra-op threads; both load the model, run once and write
    that run's outputs as .npy, then wait for requests;
  * compares the outputs (max abs difference per output: the correctness check next to the
    timing);
  * runs ROUNDS rounds, each asking one runtime for WARMUP untimed + RUNS timed runs and then
    the other, the order swapped every round, so both see the same machine state and neither
    reloads; only one runs at a time;
  * reports each side's median over all timed runs and the ratio gearbox / ORT (lower is
    better for gearbox), with the per-round medians to show the spread.
--spin off makes idle worker threads of both runtimes block instead of spin (on a machine
shared with other work, spinning threads steal the cores the other side's threads need).
A table goes to stdout, then one line "SUMMARY_JSON {...}" (also written to --json-out).

resnet50_b8 is the batch-1 ResNet-50 export with the batch dim of its input and output set
to 8 (its graph has no batch-dependent constant: Flatten + Gemm), written next to the inputs.

ONNX Runtime comes from `npm install --ignore-scripts onnxruntime-node@1.30.0` into --ort-dir
(default bench/.ort, git-ignored), run on first use; its install script is skipped because it
fetches optional GPU binaries from a host that is not reachable here (the CPU binaries ship in
the package).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ORT_VERSION = "1.30.0"
# Issue 5's bar for the ratio of medians, per model.
TARGETS = {"resnet50": 0.95, "resnet50_b8": 0.95, "mobilenet_v2": 0.90, "bert": 0.85}
NP_TYPES = {TensorProto.FLOAT: np.float32, TensorProto.INT64: np.int64, TensorProto.INT32: np.int32,
            TensorProto.BOOL: np.bool_}


def ensure_ort(ort_dir):
    module = os.path.join(ort_dir, "node_modules", "onnxruntime-node")
    if os.path.isdir(module):
        return os.path.join(ort_dir, "node_modules")
    os.makedirs(ort_dir, exist_ok=True)
    print(f"installing onnxruntime-node@{ORT_VERSION} into {ort_dir} (npm, --ignore-scripts)", flush=True)
    subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund", "--prefix", ort_dir,
                    f"onnxruntime-node@{ORT_VERSION}"], check=True)
    return os.path.join(ort_dir, "node_modules")


def model_path(name, testdata, work):
    if name == "resnet50_b8":
        out = os.path.join(work, "resnet50_b8", "model.onnx")
        if not os.path.exists(out):
            m = onnx.load(os.path.join(testdata, "resnet50", "model.onnx"))
            for v in list(m.graph.input) + list(m.graph.output):
                v.type.tensor_type.shape.dim[0].dim_value = 8
            del m.graph.value_info[:]
            onnx.checker.check_model(m)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            onnx.save(m, out)
        return out
    return os.path.join(testdata, name, "model.onnx")


def write_inputs(model, in_dir):
    """One .npy per graph input (initializers excluded), deterministic."""
    m = onnx.load(model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(20261130)
    os.makedirs(in_dir, exist_ok=True)
    specs = []
    for v in m.graph.input:
        if v.name in inits:
            continue
        tt = v.type.tensor_type
        dtype = NP_TYPES.get(tt.elem_type)
        if dtype is None:
            raise SystemExit(f"{model}: input {v.name} has an element type this driver does not generate")
        dims = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        lower = v.name.lower()
        if dtype == np.float32:
            a = rng.uniform(-1, 1, dims).astype(np.float32)
        elif dtype == np.bool_:
            a = np.ones(dims, np.bool_)
        elif "mask" in lower:
            a = np.ones(dims, dtype)
        elif "type" in lower or "segment" in lower:
            a = np.zeros(dims, dtype)
        else:
            a = rng.integers(0, 64, dims).astype(dtype)
        f = os.path.join(in_dir, v.name.replace("/", "_") + ".npy")
        np.save(f, a)
        specs.append(f"{v.name}={f}")
    return specs


class Runner:
    """A child process speaking the ready / 'W N' -> {"times_ms"} line protocol."""

    def __init__(self, label, cmd, log, env=None):
        self.label, self.log = label, log
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(log, "w"), text=True, env=env)
        self.ready = self._read()
        if not self.ready.get("ready"):
            self._die(f"no ready line: {self.ready}")

    def _die(self, msg):
        self.proc.kill()
        with open(self.log) as f:
            tail = f.read()[-3000:]
        raise SystemExit(f"{self.label}: {msg}\n--- {self.log} ---\n{tail}")

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self._die(f"exited with status {self.proc.returncode}")
        return json.loads(line)

    def round(self, warmup, runs):
        self.proc.stdin.write(f"{warmup} {runs}\n")
        self.proc.stdin.flush()
        return self._read()["times_ms"]

    def close(self):
        self.proc.stdin.close()
        if self.proc.wait(timeout=120) != 0:
            self._die(f"exited with status {self.proc.returncode}")


def compare_outputs(g_dir, o_dir):
    diffs = {}
    for f in sorted(os.listdir(o_dir)):
        o = np.load(os.path.join(o_dir, f))
        gf = os.path.join(g_dir, f)
        if not os.path.exists(gf):
            raise SystemExit(f"gearbox wrote no {f} (it wrote {sorted(os.listdir(g_dir))})")
        g = np.load(gf)
        if g.shape != o.shape:
            raise SystemExit(f"{f}: gearbox shape {g.shape}, ORT shape {o.shape}")
        d = np.abs(g.astype(np.float64) - o.astype(np.float64))
        diffs[f[:-4]] = {"max_abs_diff": float(d.max()) if d.size else 0.0,
                         "max_abs_ort": float(np.abs(o).max()) if o.size else 0.0}
    return diffs


def load_average():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def bench_model(name, a, node_path):
    work = os.path.join(a.work_dir, name)
    model = model_path(name, a.testdata, a.work_dir)
    specs = write_inputs(model, os.path.join(work, "inputs"))
    inputs = sum((["--input", s] for s in specs), [])
    g_out, o_out = os.path.join(work, "out_gearbox"), os.path.join(work, "out_ort")
    print(f"[{name}] loading {model} in both runtimes", flush=True)
    g_env, env = dict(os.environ), dict(os.environ, NODE_PATH=node_path)
    if a.spin == "off":
        g_env["OMP_WAIT_POLICY"] = "passive"
        env["ORT_RUNNER_ALLOW_SPINNING"] = "0"
    g = Runner("gearbox", [a.gearbox, "bench", model, "--threads", str(a.threads), "--warmup", "0",
                           "--rounds-stdin", "--output-dir", g_out] + inputs, os.path.join(work, "gearbox.log"),
               env=g_env)
    o = Runner("ort", ["node", os.path.join(HERE, "ort_runner.js"), model, str(a.threads), o_out] + specs,
               os.path.join(work, "ort.log"), env=env)
    diffs = compare_outputs(g_out, o_out)
    times = {"gearbox": [], "ort": []}
    round_medians = {"gearbox": [], "ort": []}
    for r in range(a.rounds):
        order = [("gearbox", g), ("ort", o)] if r % 2 == 0 else [("ort", o), ("gearbox", g)]
        for label, runner in order:
            t = runner.round(a.warmup, a.runs)
            times[label] += t
            round_medians[label].append(statistics.median(t))
        print(f"[{name}] round {r + 1}/{a.rounds}: median gearbox {round_medians['gearbox'][-1]:.2f} ms, "
              f"ORT {round_medians['ort'][-1]:.2f} ms", flush=True)
    g.close()
    o.close()
    gm, om = statistics.median(times["gearbox"]), statistics.median(times["ort"])
    return {"model": name, "path": model, "gearbox_median_ms": gm, "ort_median_ms": om, "ratio": gm / om,
            "target": TARGETS.get(name), "round_medians_ms": round_medians,
            "gearbox_min_ms": min(times["gearbox"]), "ort_min_ms": min(times["ort"]),
            "load_ms": {"gearbox": g.ready["load_ms"], "ort": o.ready["load_ms"]},
            "engines": g.ready.get("engines"), "outputs": diffs}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gearbox", default=os.path.join(ROOT, "build", "gearbox"))
    p.add_argument("--testdata", default=os.path.join(ROOT, "build", "testdata", "models"))
    p.add_argument("--models", default="resnet50,resnet50_b8,mobilenet_v2,bert")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=20, help="timed runs per side per round")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs per side before each round's timed runs")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--work-dir", default=os.path.join(HERE, ".work"))
    p.add_argument("--ort-dir", default=os.path.join(HERE, ".ort"))
    p.add_argument("--json-out", help="also write the summary JSON here")
    p.add_argument("--spin", choices=["default", "off"], default="default",
                   help="off: idle worker threads block instead of spinning on both sides (gearbox "
                        "OMP_WAIT_POLICY=passive, ORT session.intra_op.allow_spinning=0); default: each "
                        "runtime's own default (both spin)")
    a = p.parse_args()
    if a.rounds < 1 or a.runs < 1 or a.warmup < 0 or a.threads < 1:
        p.error("--rounds, --runs and --threads must be >= 1, --warmup >= 0")
    if not os.access(a.gearbox, os.X_OK):
        p.error(f"{a.gearbox} is not an executable gearbox binary (--gearbox)")
    node_path = ensure_ort(a.ort_dir)

    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_before = load_average()
    results = [bench_model(m, a, node_path) for m in a.models.split(",") if m]
    load_after = load_average()

    print(f"\ngearbox vs ONNX Runtime {ORT_VERSION}, {a.threads} threads each, {a.rounds} alternating rounds x "
          f"{a.runs} runs (+{a.warmup} warm-up per round), --spin {a.spin}; load average before {load_before}, after {load_after}")
    print(f"{'model':<14} {'gearbox ms':>11} {'ORT ms':>9} {'ratio':>7} {'target':>7}  {'max|diff|':>10}  per-round medians gearbox / ORT")
    for r in results:
        worst = max((d["max_abs_diff"] for d in r["outputs"].values()), default=0.0)
        rg = ",".join(f"{v:.1f}" for v in r["round_medians_ms"]["gearbox"])
        ro = ",".join(f"{v:.1f}" for v in r["round_medians_ms"]["ort"])
        tgt = f"{r['target']:.2f}" if r["target"] else "-"
        print(f"{r['model']:<14} {r['gearbox_median_ms']:>11.2f} {r['ort_median_ms']:>9.2f} {r['ratio']:>7.3f} "
              f"{tgt:>7}  {worst:>10.3g}  {rg} / {ro}")
        for out, d in r["outputs"].items():
            print(f"    output {out}: max abs diff {d['max_abs_diff']:.3g} (max |ORT| {d['max_abs_ort']:.3g})")
    summary = {"ort_version": ORT_VERSION, "threads": a.threads, "spin": a.spin, "rounds": a.rounds, "runs": a.runs,
               "warmup": a.warmup, "started": started, "load_average_before": load_before,
               "load_average_after": load_after, "results": results}
    print("SUMMARY_JSON " + json.dumps(summary))
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
