#!/usr/bin/python3
"""gearbox's .npy reader refuses exactly the files numpy refuses.

Usage: check_npy_agreement.py --gearbox GEARBOX --model-dir DIR --work WORK

DIR is bad_input's `add` model (z = x + y, float32 [2,3], with x.npy, y.npy). Each case below
is a variant of x.npy's bytes: header syntax (quotes, spacing, trailing commas, key order,
extra or duplicate keys, tuple forms, int literal forms), format versions, descr forms and the
data length. numpy is the oracle: np.load decides whether a case is readable, and for each
readable one the array it returns. gearbox must then:
  * readable by numpy: run the model (exit 0) and write z equal to numpy's x + y;
  * refused by numpy: exit non-zero with NPY_INVALID or NPY_UNSUPPORTED_DTYPE, never a crash.
Two deliberate differences, where gearbox is stricter than numpy (REFUSED_BY_DESIGN): bytes
after the data, which numpy ignores, are refused unless --npy-allow-trailing-bytes is given
(then read like numpy); a header that gives a key twice (Python's dict keeps the last one) is
refused as ambiguous. Prints one line per case.
"""
import argparse
import os
import re
import struct
import subprocess
import sys

import numpy as np

ACCEPTED_CODES = ("NPY_INVALID", "NPY_UNSUPPORTED_DTYPE")
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
REFUSED_BY_DESIGN = ("trailing_bytes", "duplicate_shape")


def npy_bytes(header_text, data, version=(1, 0), pad=True):
    """A .npy file with `header_text` verbatim (padded and newline-terminated like numpy's)."""
    h = header_text.encode("latin1")
    prefix_len = 10 if version[0] == 1 else 12
    if pad:
        h += b" " * ((64 - (prefix_len + len(h) + 1) % 64) % 64) + b"\n"
    size = struct.pack("<H", len(h)) if version[0] == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes(version) + size + h + data


def cases(x):
    d = x.astype("<f4").tobytes()
    std = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
    yield "numpy_own", npy_bytes(std, d)
    yield "double_quotes", npy_bytes('{"descr": "<f4", "fortran_order": False, "shape": (2, 3)}', d)
    yield "no_trailing_comma", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", d)
    yield "keys_reordered", npy_bytes("{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}", d)
    yield "tight_spacing", npy_bytes("{'descr':'<f4','fortran_order':False,'shape':(2,3)}", d)
    yield "tuple_trailing_comma", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3,), }", d)
    yield "native_order", npy_bytes("{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3), }", d)
    yield "no_padding_newline", npy_bytes(std, d, pad=False)
    yield "version_2", npy_bytes(std, d, version=(2, 0))
    yield "version_3", npy_bytes(std, d, version=(3, 0))
    yield "version_1_1", npy_bytes(std, d, version=(1, 1))
    yield "version_4", npy_bytes(std, d, version=(4, 0))
    yield "extra_key", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", d)
    yield "duplicate_shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), 'shape': (2, 3)}", d)
    yield "missing_fortran", npy_bytes("{'descr': '<f4', 'shape': (2, 3), }", d)
    yield "missing_descr", npy_bytes("{'fortran_order': False, 'shape': (2, 3), }", d)
    yield "text_after_dict", npy_bytes(std + " junk", d)
    yield "not_closed", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", d)
    yield "empty_commas_in_shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,, 3), }", d)
    yield "leading_zero_dim", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (02, 3), }", d)
    yield "negative_dim", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, -3), }", d)
    yield "float_dim", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3), }", d)
    yield "shape_list", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", d)
    yield "fortran_int", npy_bytes("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }", d)
    yield "fortran_lowercase", npy_bytes("{'descr': '<f4', 'fortran_order': false, 'shape': (2, 3), }", d)
    yield "bad_order_char", npy_bytes("{'descr': 'xf4', 'fortran_order': False, 'shape': (2, 3), }", d)
    yield "descr_unquoted", npy_bytes("{'descr': f4, 'fortran_order': False, 'shape': (2, 3), }", d)
    yield "big_endian", npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
                                  x.astype(">f4").tobytes())
    yield "short_data", npy_bytes(std, d[:-4])
    yield "trailing_bytes", npy_bytes(std, d + b"\0" * 8)
    yield "not_a_dict", npy_bytes("('<f4', False, (2, 3))", d)
    # A 1-tuple without its comma is an int in Python, not a shape: a [6] array read as (6)
    # would be numpy's error, and gearbox must not take it for a [6] tensor either.
    yield "one_tuple_without_comma", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", d)


def numpy_verdict(path):
    try:
        return np.load(path, allow_pickle=False), None
    except Exception as e:  # numpy's refusal, whatever its type
        return None, f"{type(e).__name__}: {e}"


def run_gearbox(args, model_dir, x_path, out_dir, extra):
    cmd = [args.gearbox, "run", os.path.join(model_dir, "model.onnx"), "--input", f"x={x_path}",
           "--input", f"y={os.path.join(model_dir, 'y.npy')}", "--output-dir", out_dir] + extra
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--model-dir", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    x = np.load(os.path.join(args.model_dir, "x.npy"))
    y = np.load(os.path.join(args.model_dir, "y.npy"))
    failures, readable, refused = [], 0, 0
    for name, data in cases(x):
        path = os.path.join(args.work, name + ".npy")
        with open(path, "wb") as f:
            f.write(data)
        arr, why = numpy_verdict(path)
        # Bytes after the data: numpy reads them; gearbox refuses unless told to ignore them.
        runs = [([], arr is not None and name not in REFUSED_BY_DESIGN)]
        if name == "trailing_bytes":
            runs.append((["--npy-allow-trailing-bytes"], arr is not None))
        for extra, should_read in runs:
            out_dir = os.path.join(args.work, name + "_out")
            r = run_gearbox(args, args.model_dir, path, out_dir, extra)
            label = name + (" " + " ".join(extra) if extra else "")
            if any(m in r.stderr for m in SANITIZER_MARKS) or r.returncode < 0 or r.returncode >= 128:
                failures.append(f"{label}: crashed (exit {r.returncode})\n{r.stderr[-2000:]}")
                continue
            if should_read:
                readable += 1
                if r.returncode != 0:
                    failures.append(f"{label}: numpy reads it, gearbox refused: {r.stderr.strip()[:400]}")
                    continue
                z = np.load(os.path.join(out_dir, "z.npy"))
                want = (arr.astype(np.float32) + y) if arr.shape == x.shape else None
                if want is None or z.shape != want.shape or not np.array_equal(z, want):
                    failures.append(f"{label}: gearbox's z differs from numpy's x + y")
                    continue
                print(f"ok   {label}: read by both")
            else:
                refused += 1
                m = re.search(r"GBX-E\d+ ([A-Z0-9_]+):", r.stderr)
                if r.returncode == 0 or not m or m.group(1) not in ACCEPTED_CODES:
                    failures.append(f"{label}: {'numpy refuses it (' + why + ')' if why else 'must be refused'}, "
                                    f"gearbox exit {r.returncode}: {r.stderr.strip()[:400]}")
                    continue
                print(f"ok   {label}: refused by {'both' if why else 'gearbox (by design)'} ({m.group(1)})")
    if readable < 10 or refused < 15:  # the case list itself must exercise both verdicts
        failures.append(f"only {readable} readable and {refused} refused cases")
    print(f"{readable} readable, {refused} refused, {len(failures)} disagreements")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
