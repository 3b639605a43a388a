#!/usr/bin/python3
"""gearbox vs ONNX Runtime 1.30 (onnxruntime-node) on the same inputs, alternating rounds.

Usage (from the repository root, after the build made build/testdata):
  /usr/bin/python3 bench/ort_compare.py [--gearbox build/gearbox] [--rounds 5] [--runs 20]
                                        [--threads 2] [--models resnet50,resnet50_b8,mobilenet_v2,bert]
  /usr/bin/python3 bench/ort_compare.py --corpus [DIR] [--models NAME,...] [--budget-ms 400]
                                        [--profile-loop 10] [--json-out FILE]

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

--corpus [DIR] runs the benchmark corpus instead (bench/corpus/manifest.json; DIR defaults to
$GEARBOX_CORPUS_DIR, else build/testdata/corpus; models missing there are exported first with
bench/corpus/export.py). Per model it uses the inputs the export recorded, loads both runtimes
(a model gearbox refuses is reported with its GBX-E code and timed on ORT alone), compares
every output with ORT's and torch's (max abs difference, cosine, the parity bar of
scripts/compare_npy.py), sizes the rounds to about --budget-ms per side per round (--runs at
most, 3 at least) after a 1 + 3 run probe, runs ROUNDS alternating rounds, then `gearbox
profile` for the top op types by time with their engines (summed over nodes, per engine) and
whether a cpu.ref one is among the top 5. The table ends with the geomean of the ratios; the
JSON holds everything per model.

resnet50_b8 is the batch-1 ResNet-50 export with the batch dim of its input and output set
to 8 (its graph has no batch-dependent constant: Flatten + Gemm), written next to the inputs.

ONNX Runtime comes from `npm install --ignore-scripts onnxruntime-node@1.30.0` into --ort-dir
(default bench/.ort, git-ignored), run on first use; its install script is skipped because it
fetches optional GPU binaries from a host that is not reachable here (the CPU binaries ship in
the package).
"""
import argparse
import csv
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(HERE, "corpus"), os.path.join(ROOT, "scripts")]
from compare_npy import parity_stats  # noqa: E402
from manifest import expand, is_cached  # noqa: E402

CORPUS = expand()
ORT_VERSION = "1.30.0"
# Issue 5's bar for the ratio of medians, per model.
TARGETS = {"resnet50": 0.95, "resnet50_b8": 0.95, "mobilenet_v2": 0.90, "bert": 0.85}
# Issue 23's bars under --precision-mode allow_mix_precision_bf16 (against ORT's fp32).
PRECISION_TARGETS = {"resnet50": 0.55, "bert": 0.50, "vit_b16": 0.50, "mobilenet_v2": 0.75}
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


class RunnerFailed(Exception):
    """A runtime that exited, or answered something other than the protocol; `tail` is the end
    of its log (where gearbox prints its GBX-E<code> line)."""

    def __init__(self, label, msg, tail):
        super().__init__(f"{label}: {msg}")
        self.label, self.msg, self.tail = label, msg, tail


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
        self.proc.wait()
        with open(self.log) as f:
            tail = f.read()[-3000:]
        raise RunnerFailed(self.label, msg, tail)

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self._die(f"exited with status {self.proc.returncode}")
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            self._die(f"answered a line that is not JSON: {line[:200]!r}")

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
        g64, o64 = g.astype(np.float64).ravel(), o.astype(np.float64).ravel()
        d = np.abs(g64 - o64)
        norms = float(np.linalg.norm(g64) * np.linalg.norm(o64))
        diffs[f[:-4]] = {"max_abs_diff": float(d.max()) if d.size else 0.0,
                         "max_abs_ort": float(np.abs(o).max()) if o.size else 0.0,
                         "cosine": float(np.dot(g64, o64) / norms) if norms > 0 else float(np.array_equal(g64, o64))}
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
    gearbox_cmd = [a.gearbox, "bench", model, "--threads", str(a.threads), "--warmup", "0", "--rounds-stdin"]
    mode = ["--precision-mode", a.precision_mode] if a.precision_mode else []
    runners = {"gearbox": Runner("gearbox", gearbox_cmd + mode + ["--output-dir", g_out] + inputs,
                                 os.path.join(work, "gearbox.log"), env=g_env),
               "ort": Runner("ort", ["node", os.path.join(HERE, "ort_runner.js"), model, str(a.threads), o_out] + specs,
                             os.path.join(work, "ort.log"), env=env)}
    if a.precision_mode:
        # gearbox's own fp32 in the same rounds: the reduced mode's speed-up over it (issue 23).
        f_out = os.path.join(work, "out_gearbox_fp32")
        runners["gearbox_fp32"] = Runner("gearbox_fp32", gearbox_cmd + ["--output-dir", f_out] + inputs,
                                         os.path.join(work, "gearbox_fp32.log"), env=g_env)
    diffs = compare_outputs(g_out, o_out)
    times = {label: [] for label in runners}
    round_medians = {label: [] for label in runners}
    labels = list(runners)
    for r in range(a.rounds):
        # Each runtime goes first, middle and last in turn.
        order = labels[r % len(labels):] + labels[:r % len(labels)]
        if r % 2:
            order.reverse()
        for label in order:
            t = runners[label].round(a.warmup, a.runs)
            times[label] += t
            round_medians[label].append(statistics.median(t))
        print(f"[{name}] round {r + 1}/{a.rounds}: median " +
              ", ".join(f"{label} {round_medians[label][-1]:.2f} ms" for label in labels), flush=True)
    for runner in runners.values():
        runner.close()
    med = {label: statistics.median(t) for label, t in times.items()}
    gm, om = med["gearbox"], med["ort"]
    out = {"model": name, "path": model, "precision_mode": a.precision_mode or "force_fp32",
           "gearbox_median_ms": gm, "ort_median_ms": om, "ratio": gm / om,
           "target": (PRECISION_TARGETS if a.precision_mode else TARGETS).get(name),
           "round_medians_ms": round_medians,
           "gearbox_min_ms": min(times["gearbox"]), "ort_min_ms": min(times["ort"]),
           "load_ms": {label: runner.ready["load_ms"] for label, runner in runners.items()},
           "engines": runners["gearbox"].ready.get("engines"), "outputs": diffs}
    if a.precision_mode:
        out["gearbox_fp32_median_ms"] = med["gearbox_fp32"]
        out["speedup_over_fp32"] = med["gearbox_fp32"] / gm
        out["outputs_vs_fp32"] = compare_outputs(g_out, f_out)
    return out


# ---------------------------------------------------------------------------------------------
# --corpus: every model of bench/corpus/manifest.json

GBX_ERROR = re.compile(r"GBX-E(\d+) ([A-Z0-9_]+): ?(.*)")


def gearbox_error(text):
    """The first `GBX-E<code> NAME: message` line of gearbox's stderr, as a dict, or None."""
    for line in text.splitlines():
        m = GBX_ERROR.search(line)
        if m:
            return {"code": int(m.group(1)), "name": m.group(2), "message": m.group(3)[:500]}
    return None


def last_lines(text, n=3):
    return " | ".join(line.strip() for line in text.strip().splitlines()[-n:])[:600]


def compare_dirs(ref_dir, act_dir, prefix=""):
    """Per output file of ref_dir (named PREFIX<name>.npy): max abs difference, max |ref|, cosine
    and the parity verdict of scripts/compare_npy.py (max abs <= 1e-3 max|ref|, cosine >= 0.99999);
    a missing file or a shape/dtype mismatch is an entry with "error"."""
    out = {}
    for f in sorted(os.listdir(ref_dir)):
        if not (f.endswith(".npy") and f.startswith(prefix)):
            continue
        name = f[len(prefix):-4]
        ref = np.load(os.path.join(ref_dir, f))
        act_file = os.path.join(act_dir, name + ".npy")
        if not os.path.exists(act_file):
            out[name] = {"error": "no output file", "ok": False}
            continue
        act = np.load(act_file)
        if act.shape != ref.shape or act.dtype != ref.dtype:
            out[name] = {"error": f"{act.dtype} {list(act.shape)}, expected {ref.dtype} {list(ref.shape)}", "ok": False}
            continue
        max_err, scale, cosine, ok = parity_stats(ref, act)
        out[name] = {"max_abs_diff": max_err, "max_abs_ref": scale, "cosine": cosine, "ok": ok}
    return out


def worst(diffs):
    """(worst max|diff|/max|ref|, worst cosine, all ok) over a compare_dirs result."""
    rel = [d["max_abs_diff"] / d["max_abs_ref"] if d.get("max_abs_ref") else (0.0 if d.get("max_abs_diff") == 0 else
           float("inf")) for d in diffs.values() if "error" not in d]
    cos = [d["cosine"] for d in diffs.values() if "error" not in d]
    return (max(rel) if rel else None, min(cos) if cos else None,
            bool(diffs) and all(d["ok"] for d in diffs.values()))


def profile_top_ops(a, model, inputs, out_dir, loop):
    """`gearbox profile` on the same inputs; the op types by time (summed over their nodes,
    split by engine) from op_summary.csv. Subgraph nodes (If/Loop bodies) would count twice,
    inside their control-flow node and on their own; torch's traced exports have none."""
    cmd = [a.gearbox, "profile", model, "--threads", str(a.threads), "--loop", str(loop), "--warmup", "1",
           "--output-dir", out_dir] + inputs
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        return {"error": gearbox_error(r.stderr) or last_lines(r.stderr)}
    with open(os.path.join(out_dir, "op_summary.csv")) as f:
        rows = list(csv.DictReader(f))
    total = sum(float(r["total_ms"]) for r in rows if r["kind"] == "op_type")
    by = {}
    for r in rows:
        if r["kind"] == "node":
            key = (r["op_type"], r["engine"])
            by[key] = by.get(key, 0.0) + float(r["total_ms"])
    ranked = sorted(by.items(), key=lambda kv: -kv[1])
    top = [{"op_type": k[0], "engine": k[1], "ms_per_run": v / loop, "pct": 100 * v / total if total else 0.0}
           for k, v in ranked[:5]]
    return {"loop": loop, "op_ms_per_run": total / loop, "top": top,
            "ref_in_top5": any(t["engine"] == "cpu.ref" for t in top)}


def ensure_corpus(a, names):
    """Export the models that are missing or stale (bench/corpus/export.py caches the rest)."""
    stale = [n for n, e, b in CORPUS if n in names and not is_cached(a.corpus, n, e, b)]
    if stale:
        print(f"exporting {len(stale)} corpus models into {a.corpus} (bench/corpus/export.py)", flush=True)
        cmd = ["/usr/bin/python3", os.path.join(HERE, "corpus", "export.py"), a.corpus]
        subprocess.run(cmd + sum((["--only", n] for n in stale), []))  # failures are reported per model below


def corpus_model(name, a, node_path):
    mdir = os.path.join(a.corpus, name)
    res = {"model": name, "status": "ok"}
    try:
        with open(os.path.join(mdir, "spec.json")) as f:
            spec = json.load(f)
    except OSError:
        res.update(status="not_exported", error="no spec.json (the export failed: see bench/corpus/export.py)")
        return res
    res.update({k: spec[k] for k in ("batch", "dtype", "family", "opset", "nodes")})
    model = os.path.join(mdir, "model.onnx")
    specs = [f"{i['name']}={os.path.join(mdir, i['name'] + '.npy')}" for i in spec["inputs"]]
    inputs = sum((["--input", s] for s in specs), [])
    work = os.path.join(a.work_dir, "corpus", name)
    g_out, o_out = os.path.join(work, "out_gearbox"), os.path.join(work, "out_ort")
    for d in (g_out, o_out):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(work, exist_ok=True)
    print(f"[{name}] loading in both runtimes", flush=True)
    g_env, env = dict(os.environ), dict(os.environ, NODE_PATH=node_path)
    if a.spin == "off":
        g_env["OMP_WAIT_POLICY"] = "passive"
        env["ORT_RUNNER_ALLOW_SPINNING"] = "0"
    runners = {}
    try:
        runners["gearbox"] = Runner("gearbox", [a.gearbox, "bench", model, "--threads", str(a.threads), "--warmup", "0",
                                                "--rounds-stdin", "--output-dir", g_out] + inputs,
                                    os.path.join(work, "gearbox.log"), env=g_env)
    except RunnerFailed as e:
        res["status"] = "refused"
        res["gearbox_error"] = gearbox_error(e.tail) or {"message": f"{e.msg}: {last_lines(e.tail)}"}
    try:
        runners["ort"] = Runner("ort", ["node", os.path.join(HERE, "ort_runner.js"), model, str(a.threads), o_out] + specs,
                                os.path.join(work, "ort.log"), env=env)
    except RunnerFailed as e:
        res["ort_error"] = last_lines(e.tail)
        if res["status"] == "ok":
            res["status"] = "ort_failed"
    if "gearbox" in runners:
        res["vs_torch"] = compare_dirs(mdir, g_out, "expected_")
        res["load_ms"] = {k: r.ready.get("load_ms") for k, r in runners.items()}
        res["engines"] = runners["gearbox"].ready.get("engines")
    if "ort" in runners:
        res["ort_vs_torch"] = compare_dirs(mdir, o_out, "expected_")
    if len(runners) == 2:
        res["vs_ort"] = compare_dirs(o_out, g_out)
        if not worst(res["vs_ort"])[2]:
            res["status"] = "mismatch"

    # Size the rounds so each side runs about --budget-ms per round (--runs at most, 3 at least).
    times = {k: [] for k in runners}
    round_medians = {k: [] for k in runners}
    try:
        probe = {k: statistics.median(r.round(1, 3)) for k, r in runners.items()}
        runs = max(3, min(a.runs, math.ceil(a.budget_ms / max(max(probe.values()), 1e-3))))
        for rnd in range(a.rounds):
            order = sorted(runners, reverse=rnd % 2 == 1)  # gearbox first in even rounds
            for label in order:
                t = runners[label].round(a.warmup, runs)
                times[label] += t
                round_medians[label].append(statistics.median(t))
        for r in runners.values():
            r.close()
    except RunnerFailed as e:  # a run that fails after the first one: a crash or a hang
        res["status"] = "failed_in_rounds"
        res[f"{e.label}_error"] = gearbox_error(e.tail) or {"message": f"{e.msg}: {last_lines(e.tail)}"}
        for r in runners.values():
            r.proc.kill()
        return res
    res["runs_per_round"] = runs
    res["round_medians_ms"] = round_medians
    for k in runners:
        res[f"{k}_median_ms"] = statistics.median(times[k])
    if len(runners) == 2:
        res["ratio"] = res["gearbox_median_ms"] / res["ort_median_ms"]
    if "gearbox" in runners and a.profile_loop > 0:
        loop = max(2, min(a.profile_loop, math.ceil(4 * a.budget_ms / max(res["gearbox_median_ms"], 1e-3))))
        res["profile"] = profile_top_ops(a, model, inputs, os.path.join(work, "profile"), loop)
    return res


def ref_ops(top):
    """The cpu.ref entries of the top 5 ('no' when none, '-' without a profile)."""
    if not top:
        return "-"
    refs = [f"{t['op_type'].replace('com.gearbox.', '')} {t['pct']:.1f}%" for t in top if t["engine"] == "cpu.ref"]
    return ", ".join(refs) if refs else "no"


def fmt_ms(v):
    return f"{v:.3f}" if v is not None and v < 10 else (f"{v:.1f}" if v is not None else "-")


def corpus_row(r):
    """One model's table cells: status, medians, ratio, worst diff/max and 1-cos against ORT, the
    top-3 op types (or the error of a model that did not run) and the cpu.ref ops of the top 5."""
    rel, cos, _ = worst(r.get("vs_ort", {}))
    top = r.get("profile", {}).get("top", [])
    top3 = ", ".join(f"{t['op_type'].replace('com.gearbox.', '')}@{t['engine'].replace('cpu.', '')} {t['pct']:.0f}%"
                     for t in top[:3])
    if not top and "profile" in r:
        top3 = f"profile failed: {r['profile'].get('error')}"
    if r["status"] in ("refused", "failed_in_rounds", "not_exported") and not top:
        err = r.get("gearbox_error") or r.get("ort_error") or r.get("error")
        top3 = (f"GBX-E{err['code']} {err['name']}: {err['message']}" if isinstance(err, dict) and "code" in err
                else str(err.get("message") if isinstance(err, dict) else err))[:120]
    return [r["model"], r["status"], fmt_ms(r.get("gearbox_median_ms")), fmt_ms(r.get("ort_median_ms")),
            f"{r['ratio']:.3f}" if "ratio" in r else "-", f"{rel:.1e}" if rel is not None else "-",
            f"{1 - cos:.1e}" if cos is not None else "-", top3, ref_ops(top)]


CORPUS_COLUMNS = ["model", "status", "gearbox ms", "ORT ms", "ratio", "diff/max", "1-cos",
                  "top-3 ops by time (op@engine %)", "cpu.ref in top 5"]


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def corpus_table(results, markdown=False):
    rows = [corpus_row(r) for r in results]
    if markdown:
        lines = ["| " + " | ".join(CORPUS_COLUMNS) + " |", "|" + "---|" * len(CORPUS_COLUMNS)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    else:
        widths = [28, 16, 10, 9, 6, 8, 8, 60, 0]
        right = {2, 3, 4, 5, 6}
        fmt = lambda row: " ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))  # noqa: E731
        lines = [fmt(CORPUS_COLUMNS)] + [fmt(row) for row in rows]
    ratios = [r["ratio"] for r in results if "ratio" in r]
    geo = geomean(ratios)
    counts = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    lines.append("")
    lines.append(f"geomean ratio over {len(ratios)} models: {geo:.3f}" if geo else "geomean ratio: no model ran on both")
    lines.append("status counts: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines), geo


def render_runs(files):
    """--from-json: the Markdown table of the last run per model over several saved summaries,
    with every run's ratio for the model and the geomean of each run."""
    runs = []
    for f in files:
        with open(f) as fh:
            runs.append(json.load(fh))
    latest, ratios = {}, {}
    for run in runs:
        for r in run["results"]:
            latest[r["model"]] = r
            ratios.setdefault(r["model"], []).append(f"{r['ratio']:.3f}" if "ratio" in r else "-")
    order = [n for n, _, _ in CORPUS if n in latest]
    table, geo = corpus_table([latest[n] for n in order], markdown=True)
    lines = table.split("\n")
    header = lines[:2]
    body = [line for line in lines[2:] if line.startswith("| ")]
    header[0] += " ratio per run |"
    header[1] += "---|"
    body = [line + " " + " / ".join(ratios[n]) + " |" for line, n in zip(body, order)]
    tail = [line for line in lines[2:] if not line.startswith("| ")]
    for run, f in zip(runs, files):
        tail.append(f"{os.path.basename(f)}: started {run['started']}, load average {run['load_average_before']} -> "
                    f"{run['load_average_after']}, geomean {run['geomean_ratio']:.3f} over "
                    f"{sum('ratio' in r for r in run['results'])} models")
    return "\n".join(header + body + tail)


def run_corpus(a, node_path):
    names = [n for n, _, _ in CORPUS]
    if a.models:
        wanted = [m for m in a.models.split(",") if m]
        unknown = [m for m in wanted if m not in names]
        if unknown:
            raise SystemExit(f"--models: not in bench/corpus/manifest.json: {', '.join(unknown)} "
                             f"(bench/corpus/export.py --list)")
        names = [n for n in names if n in wanted]
    ensure_corpus(a, names)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_before = load_average()
    results = []
    summary = {"mode": "corpus", "ort_version": ORT_VERSION, "threads": a.threads, "spin": a.spin, "rounds": a.rounds,
               "max_runs": a.runs, "budget_ms": a.budget_ms, "warmup": a.warmup, "started": started,
               "cpu": cpu_model(), "load_average_before": load_before, "results": results}
    for n in names:
        results.append(corpus_model(n, a, node_path))
        r = results[-1]
        print(f"[{n}] {r['status']}: gearbox {fmt_ms(r.get('gearbox_median_ms'))} ms, ORT "
              f"{fmt_ms(r.get('ort_median_ms'))} ms" + (f", ratio {r['ratio']:.3f}" if "ratio" in r else ""), flush=True)
        if a.json_out:  # after every model, so an interrupted campaign keeps what it measured
            summary.update(load_average_after=load_average(), geomean_ratio=geomean(
                [x["ratio"] for x in results if "ratio" in x]))
            with open(a.json_out, "w") as f:
                json.dump(summary, f, indent=1)
    load_after = load_average()
    table, geo = corpus_table(results)
    print(f"\ngearbox vs ONNX Runtime {ORT_VERSION} on the corpus ({a.corpus}), {a.threads} threads each, "
          f"{a.rounds} alternating rounds, ~{a.budget_ms:.0f} ms per side per round ({a.runs} runs at most, 3 at least, "
          f"+{a.warmup} warm-up), --spin {a.spin}; load average before {load_before}, after {load_after}")
    print("diff/max: worst output's max abs difference to ORT over its max |ORT|; 1-cos: worst output's 1 - cosine "
          "to ORT; parity bar: diff/max <= 1e-3 and 1-cos <= 1e-5 (status 'mismatch' when missed)")
    print(table)
    summary.update(load_average_after=load_after, geomean_ratio=geo)
    emit_summary(summary, a.json_out)
    return 0


def emit_summary(summary, json_out):
    """The machine-readable line every bench prints last, and the same JSON in a file if asked."""
    print("SUMMARY_JSON " + json.dumps(summary))
    if json_out:
        with open(json_out, "w") as f:
            json.dump(summary, f, indent=1)


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gearbox", default=os.path.join(ROOT, "build", "gearbox"))
    p.add_argument("--testdata", default=os.path.join(ROOT, "build", "testdata", "models"))
    p.add_argument("--models", help="comma list (default resnet50,resnet50_b8,mobilenet_v2,bert; with --corpus, "
                                     "every corpus model)")
    p.add_argument("--corpus", nargs="?", const=os.environ.get("GEARBOX_CORPUS_DIR") or
                   os.path.join(ROOT, "build", "testdata", "corpus"), metavar="DIR",
                   help="run the corpus (bench/corpus/manifest.json) exported in DIR (default $GEARBOX_CORPUS_DIR, "
                        "else build/testdata/corpus; missing models are exported first)")
    p.add_argument("--budget-ms", type=float, default=400,
                   help="--corpus: timed milliseconds per side per round, which sizes each model's runs")
    p.add_argument("--from-json", nargs="+", metavar="FILE",
                   help="--corpus: print the Markdown table of saved --json-out summaries (the last per model, "
                        "with each run's ratio) and exit; runs nothing")
    p.add_argument("--profile-loop", type=int, default=10,
                   help="--corpus: profiled runs for the top ops (fewer for slow models; 0: no profile)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=20, help="timed runs per side per round")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs per side before each round's timed runs")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--precision-mode", help="gearbox's --precision-mode (e.g. allow_mix_precision_bf16); gearbox "
                   "fp32 then runs in the same rounds, and the table adds the speed-up over it and the cosine "
                   "of each output against gearbox fp32")
    p.add_argument("--work-dir", default=os.path.join(HERE, ".work"))
    p.add_argument("--ort-dir", default=os.path.join(HERE, ".ort"))
    p.add_argument("--json-out", help="also write the summary JSON here")
    p.add_argument("--spin", choices=["default", "off"], default="default",
                   help="off: idle worker threads block instead of spinning on both sides (gearbox "
                        "OMP_WAIT_POLICY=passive, ORT session.intra_op.allow_spinning=0); default: each "
                        "runtime's own default (both spin)")
    a = p.parse_args()
    if a.from_json:
        print(render_runs(a.from_json))
        return 0
    if a.rounds < 1 or a.runs < 1 or a.warmup < 0 or a.threads < 1:
        p.error("--rounds, --runs and --threads must be >= 1, --warmup >= 0")
    if not os.access(a.gearbox, os.X_OK):
        p.error(f"{a.gearbox} is not an executable gearbox binary (--gearbox)")
    node_path = ensure_ort(a.ort_dir)
    if a.corpus:
        return run_corpus(a, node_path)
    a.models = a.models or "resnet50,resnet50_b8,mobilenet_v2,bert"

    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_before = load_average()
    try:
        results = [bench_model(m, a, node_path) for m in a.models.split(",") if m]
    except RunnerFailed as e:
        raise SystemExit(f"{e}\n--- log tail ---\n{e.tail}")
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
            print(f"    output {out}: max abs diff {d['max_abs_diff']:.3g} (max |ORT| {d['max_abs_ort']:.3g}), "
                  f"cosine {d['cosine']:.7f}")
        if "speedup_over_fp32" in r:
            print(f"    {r['precision_mode']}: gearbox fp32 {r['gearbox_fp32_median_ms']:.2f} ms, speed-up "
                  f"{r['speedup_over_fp32']:.2f}x; cosine against gearbox fp32: " +
                  ", ".join(f"{o} {d['cosine']:.7f}" for o, d in r["outputs_vs_fp32"].items()))
    summary = {"ort_version": ORT_VERSION, "threads": a.threads, "spin": a.spin, "rounds": a.rounds, "runs": a.runs,
               "warmup": a.warmup, "started": started, "load_average_before": load_before,
               "load_average_after": load_after, "results": results}
    emit_summary(summary, a.json_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
