#!/usr/bin/python3
"""The oracle suite (issue 25 item 2): gearbox against ONNX Runtime 1.30 on the cases
make_cases.py writes, judged against the committed baseline (baseline.txt, the cases gearbox
passes).

Steps, all under --work-dir (the build tree):
  1. the cases, written again when make_cases.py changed (a stamp holds its hash);
  2. ONNX Runtime's outputs for them (ort_expected.js, onnxruntime-node installed by npm into
     --ort-dir on first use, as bench/ort_compare.py does), computed once per set of cases;
  3. `gearbox run` on each case, one process per case, compared with ORT's outputs: same dtype
     and shape, values within the case's rtol/atol (integers exactly, or within atol where the
     case says so: quantized outputs may round the other way), NaN where ORT has NaN.
A case ORT refuses (or crashes on) is listed and not counted. The run fails when a case of the baseline does
not pass (or no longer exists); cases passing outside it are listed, to be added with
--write-baseline.

Usage: check_oracle.py --gearbox PATH --work-dir DIR [--ort-dir DIR] [--filter REGEX] [--write-baseline]
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from ort_compare import ORT_VERSION, ensure_ort  # noqa: E402

BASELINE = os.path.join(HERE, "baseline.txt")


def read_baseline(path):
    with open(path) as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


def write_baseline(path, passed, total, refused):
    with open(path, "w") as f:
        f.write("# The oracle-suite cases gearbox passes against ONNX Runtime %s (check_oracle.py fails when one\n"
                "# of them no longer does). Written by check_oracle.py --write-baseline: %d of %d cases ORT runs\n"
                "# (%d more ORT refuses; listed by the run, not counted).\n" % (ORT_VERSION, len(passed), total, refused))
        for name in sorted(passed):
            f.write(name + "\n")


def prepare_cases(work, ort_dir):
    cases = os.path.join(work, "cases")
    stamp = os.path.join(work, "cases.stamp")
    with open(os.path.join(HERE, "make_cases.py"), "rb") as f:
        digest = hashlib.sha256(f.read() + ORT_VERSION.encode()).hexdigest()
    if os.path.exists(stamp) and open(stamp).read() == digest:
        return cases
    subprocess.run([sys.executable, os.path.join(HERE, "make_cases.py"), cases], check=True)
    node_path = ensure_ort(ort_dir)
    while True:
        r = subprocess.run(["node", os.path.join(HERE, "ort_expected.js"), cases],
                           env=dict(os.environ, NODE_PATH=node_path))
        if r.returncode == 0:
            break
        # ONNX Runtime took the process down: the case it was running is refused, the rest go on.
        crashed = [n for n in os.listdir(cases) if os.path.exists(os.path.join(cases, n, "ort_running"))]
        if not crashed:
            raise SystemExit("ort_expected.js failed (exit %d) outside any case" % r.returncode)
        for n in crashed:
            os.rename(os.path.join(cases, n, "ort_running"), os.path.join(cases, n, "ort_refused.txt"))
            with open(os.path.join(cases, n, "ort_refused.txt"), "w") as f:
                f.write("ONNX Runtime's process died on this case (exit %d)\n" % r.returncode)
    with open(stamp, "w") as f:
        f.write(digest)
    return cases


def compare(got, want, rtol, atol):
    """'' when got matches want, else why not."""
    if got.dtype != want.dtype:
        return "dtype %s, ONNX Runtime %s" % (got.dtype, want.dtype)
    if got.shape != want.shape:
        return "shape %s, ONNX Runtime %s" % (got.shape, want.shape)
    if want.dtype.kind in "iub":
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64)) if want.dtype.kind != "b" else got != want
        worst = int(diff.max()) if diff.size else 0
        return "" if worst <= atol else "max |diff| %d (allowed %g)" % (worst, atol)
    if not np.array_equal(np.isnan(got), np.isnan(want)):
        return "NaN where ONNX Runtime has none, or the reverse"
    ok = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if ok.all():
        return ""
    i = np.unravel_index(np.argmax(~ok), ok.shape)
    return "%d of %d values off, e.g. at %s: %r vs ONNX Runtime %r (rtol %g, atol %g)" % (
        (~ok).sum(), ok.size, tuple(int(k) for k in i), got[i], want[i], rtol, atol)


def run_case(gearbox, d):
    meta = json.load(open(os.path.join(d, "case.json")))
    out = os.path.join(d, "gearbox_out")
    cmd = [gearbox, "run", os.path.join(d, "model.onnx"), "--output-dir", out]
    for name in meta["inputs"]:
        cmd += ["--input", "%s=%s" % (name, os.path.join(d, "inputs", name + ".npy"))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        err = [line for line in r.stderr.splitlines() if "GBX-E" in line]
        return "gearbox exit %d: %s" % (r.returncode, (err[0] if err else r.stderr.strip()[-300:]))
    for name in meta["outputs"]:
        f = os.path.join(out, re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".npy")
        if not os.path.exists(f):
            return "no output '%s'" % name
        why = compare(np.load(f), np.load(os.path.join(d, "expected", name + ".npy")), meta["rtol"], meta["atol"])
        if why:
            return "output '%s': %s" % (name, why)
    return ""


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gearbox", required=True)
    p.add_argument("--work-dir", required=True)
    p.add_argument("--ort-dir", default=None, help="where onnxruntime-node is installed (default: WORK_DIR/ort)")
    p.add_argument("--filter", default=None)
    p.add_argument("--write-baseline", action="store_true")
    a = p.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    cases = prepare_cases(a.work_dir, a.ort_dir or os.path.join(a.work_dir, "ort"))
    baseline = read_baseline(BASELINE) if os.path.exists(BASELINE) else set()
    names = sorted(n for n in os.listdir(cases) if os.path.exists(os.path.join(cases, n, "case.json")))
    if a.filter:
        names = [n for n in names if re.search(a.filter, n)]
    passed, failed, refused = [], [], []
    for name in names:
        d = os.path.join(cases, name)
        if os.path.exists(os.path.join(d, "ort_refused.txt")):
            refused.append(name)
            print("ORT-REFUSED %s: %s" % (name, open(os.path.join(d, "ort_refused.txt")).read().strip()[:200]))
            continue
        why = run_case(a.gearbox, d)
        (failed if why else passed).append(name)
        print(("PASS %s" % name) if not why else ("FAIL %s: %s" % (name, why)), flush=True)
    total = len(passed) + len(failed)
    print("\ngearbox passes %d of the %d cases ONNX Runtime %s runs (%d more ORT refuses)" %
          (len(passed), total, ORT_VERSION, len(refused)))
    if a.write_baseline:
        write_baseline(BASELINE, passed, total, len(refused))
        print("baseline written: %s" % BASELINE)
        return 0
    selected = set(names)
    regressed = sorted(n for n in baseline & selected if n in failed)
    missing = sorted(n for n in baseline if n not in selected and not a.filter)
    fresh = sorted(n for n in passed if n not in baseline)
    if fresh:
        print("passing and not in the baseline (add with --write-baseline): " + " ".join(fresh))
    if regressed or missing:
        print("REGRESSED: " + " ".join(regressed + ["%s (missing)" % m for m in missing]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
