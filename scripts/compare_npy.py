#!/usr/bin/python3
"""Compare two .npy arrays for model parity: EXPECTED (the framework's output) and ACTUAL
(gearbox's output).

Usage: compare_npy.py EXPECTED ACTUAL [--rel-max-err 1e-3] [--min-cosine 0.99999]

Passes when both
  max|actual - expected| <= rel_max_err * max|expected|   (error relative to the output's scale,
                                                            so tiny logits are not judged by an
                                                            absolute bound meant for big ones)
  cosine(actual, expected) >= min_cosine                   (catches a wrong output that happens
                                                            to be small everywhere)
Prints both numbers on one line; exits 0 on pass, 1 on a numeric failure, 2 on a missing or
unreadable file or a shape/dtype mismatch.
"""
import argparse
import sys

import numpy as np


def load(path, what):
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        print(f"FAIL: {what} file not found: {path}")
    except Exception as e:  # a corrupt file must fail the test, not crash it with a traceback
        print(f"FAIL: cannot read {what} {path}: {e}")
    sys.exit(2)


def parity_stats(exp, act, rel_max_err=1e-3, min_cosine=0.99999):
    """(max_err, max|expected|, cosine, ok) of ACTUAL against EXPECTED (same shape, any float
    dtype): ok when max_err <= rel_max_err * max|expected|, cosine >= min_cosine, all finite."""
    e = exp.astype(np.float64).ravel()
    g = act.astype(np.float64).ravel()
    scale = float(np.max(np.abs(e))) if e.size else 0.0
    max_err = float(np.max(np.abs(g - e))) if e.size else 0.0
    ne, ng = np.linalg.norm(e), np.linalg.norm(g)
    if ne == 0.0 and ng == 0.0:
        cosine = 1.0
    elif ne == 0.0 or ng == 0.0:
        cosine = 0.0
    else:
        cosine = float(np.dot(e, g) / (ne * ng))
    ok = bool(np.all(np.isfinite(g))) and max_err <= rel_max_err * scale and cosine >= min_cosine
    return max_err, scale, cosine, ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("expected")
    p.add_argument("actual")
    p.add_argument("--rel-max-err", type=float, default=1e-3)
    p.add_argument("--min-cosine", type=float, default=0.99999)
    a = p.parse_args()

    exp = load(a.expected, "expected")
    act = load(a.actual, "actual")
    if exp.shape != act.shape:
        print(f"FAIL: shape mismatch: expected {list(exp.shape)}, actual {list(act.shape)}")
        return 2
    if exp.dtype != act.dtype:
        print(f"FAIL: dtype mismatch: expected {exp.dtype}, actual {act.dtype}")
        return 2

    if not np.all(np.isfinite(act)):
        bad = int(np.count_nonzero(~np.isfinite(act)))
        print(f"FAIL: actual has {bad} non-finite values of {act.size}")
        return 1
    max_err, scale, cosine, ok = parity_stats(exp, act, a.rel_max_err, a.min_cosine)
    bound = a.rel_max_err * scale
    print(f"{'PASS' if ok else 'FAIL'}: {a.actual}: shape={list(exp.shape)} dtype={exp.dtype} "
          f"max_abs_err={max_err:.3e} (bound {bound:.3e} = {a.rel_max_err:g} * max|expected| "
          f"{scale:.4g}) cosine={cosine:.9f} (1-cos {1.0 - cosine:.1e}; min {a.min_cosine})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
