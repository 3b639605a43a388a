#!/usr/bin/python3
"""The control of the --timeout cases: a run that finishes in time is not disturbed.

Runs `gearbox run` on the Loop model of make_bad_inputs.py with M = 5 and --timeout 30, twice
(--loop 2, so a second run on the same session follows the first), and checks that it exits 0 and
that y equals numpy's result (expected_y_5.npy, computed by the fixture script).
"""
import argparse
import os
import subprocess
import sys

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--data", required=True, help="make_bad_inputs.py's loop/ folder")
    p.add_argument("--work-dir", required=True)
    a = p.parse_args()
    out = os.path.join(a.work_dir, "outputs")
    os.makedirs(out, exist_ok=True)
    cmd = [a.gearbox, "run", os.path.join(a.data, "model.onnx"), "--input", "x=" + os.path.join(a.data, "x.npy"),
           "--input", "M=" + os.path.join(a.data, "m_5.npy"), "--timeout", "30", "--loop", "2", "--output-dir", out]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        print(f"FAIL: exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
        return 1
    want = np.load(os.path.join(a.data, "expected_y_5.npy"))
    got = np.load(os.path.join(out, "y.npy"))
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-6, atol=1e-6):
        print(f"FAIL: y differs from numpy's\nwant {want}\ngot  {got}")
        return 1
    print("ok: 5 trips under --timeout 30 give numpy's y")
    return 0


if __name__ == "__main__":
    sys.exit(main())
