#!/usr/bin/python3
"""Generates the ONNX backend node test suite (onnx 1.12: 922 cases) into OUT_DIR/node.

Usage: /usr/bin/python3 scripts/gen_node_suite.py OUT_DIR [--force]

The cases come from Debian's python3-onnx via `onnx.backend.test.cmd_tools generate-data`;
no one here wrote their expected outputs, which is why the suite is gearbox's main
correctness oracle (tests/conformance). Run it with /usr/bin/python3: a pyenv python3 on
PATH usually lacks onnx.

Idempotent and cached: when OUT_DIR/node already holds the cases and the stamp file
OUT_DIR/.gearbox_suite_stamp records the same onnx version and case count, it does
nothing. Data is generated into a temporary folder next to OUT_DIR and moved into place,
so an interrupted run never leaves a half-written suite that a later run would trust.
"""
import os
import shutil
import sys
import tempfile

STAMP = ".gearbox_suite_stamp"


def count_cases(node_dir):
    if not os.path.isdir(node_dir):
        return 0
    return sum(
        1 for d in os.listdir(node_dir)
        if os.path.isfile(os.path.join(node_dir, d, "model.onnx")))


def read_stamp(out_dir):
    try:
        with open(os.path.join(out_dir, STAMP)) as f:
            fields = dict(line.strip().split("=", 1) for line in f if "=" in line)
        return fields
    except OSError:
        return {}


def generate(tmp_dir):
    # numpy >= 1.24 removed these aliases; onnx 1.12's test generators still use them.
    import numpy as np
    np.float = float
    np.int = int
    np.bool = bool
    np.object = object
    np.complex = complex
    np.str = str
    from onnx.backend.test.cmd_tools import main as onnx_cmd_main
    saved = sys.argv
    sys.argv = ["onnx-backend-test", "generate-data", "-o", tmp_dir]
    try:
        onnx_cmd_main()
    finally:
        sys.argv = saved


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    force = "--force" in argv[1:]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out_dir = os.path.abspath(args[0])
    try:
        import onnx
    except ImportError:
        print("gen_node_suite: this python (%s) has no onnx module; run it with /usr/bin/python3"
              % sys.executable, file=sys.stderr)
        return 1

    node_dir = os.path.join(out_dir, "node")
    stamp = read_stamp(out_dir)
    have = count_cases(node_dir)
    if (not force and have > 0 and stamp.get("onnx") == onnx.__version__
            and stamp.get("cases") == str(have)):
        print("gen_node_suite: %s already holds %d cases (onnx %s); nothing to do"
              % (node_dir, have, onnx.__version__))
        return 0

    os.makedirs(os.path.dirname(out_dir) or ".", exist_ok=True)
    tmp_dir = tempfile.mkdtemp(prefix=".gen_node_suite.", dir=os.path.dirname(out_dir) or ".")
    try:
        generate(tmp_dir)
        made = count_cases(os.path.join(tmp_dir, "node"))
        if made == 0:
            print("gen_node_suite: onnx generated no node cases", file=sys.stderr)
            return 1
        os.makedirs(out_dir, exist_ok=True)
        stamp_path = os.path.join(out_dir, STAMP)
        if os.path.exists(stamp_path):
            os.remove(stamp_path)
        # Replace each generated collection (node, real, simple) as a whole.
        for name in sorted(os.listdir(tmp_dir)):
            dest = os.path.join(out_dir, name)
            if os.path.isdir(dest):
                shutil.rmtree(dest)
            os.replace(os.path.join(tmp_dir, name), dest)
        with open(stamp_path, "w") as f:
            f.write("onnx=%s\ncases=%d\n" % (onnx.__version__, made))
        print("gen_node_suite: generated %d node cases (onnx %s) in %s"
              % (made, onnx.__version__, node_dir))
        return 0
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
