#!/usr/bin/python3
"""The shared session flags (src/tools/engine_option.h) are offered by every command that
builds a session -- run, bench, profile, serve, compile -- and mean the same in each.

For each command and each flag: the command line parses (CLI11 would exit 106 with "The
following arguments were not expected" / "not recognized"), and the command goes on to the
model, whose path does not exist, so it ends with FILE_NOT_FOUND. Then on a real model: the
thread count `run --json` reports is the one asked for (--threads, GEARBOX_NUM_THREADS),
--engines picks the list, and a misspelt engine in --engines or GEARBOX_ENGINES, or
GEARBOX_NUM_THREADS=abc, is refused with its code instead of being ignored; compile and run
with the same flags partition the model the same way.

Usage: check_session_flags.py --gearbox PATH --work-dir DIR
"""
import argparse
import json
import os
import re
import subprocess
import sys

import onnx
from onnx import TensorProto, helper

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gearbox", required=True)
    ap.add_argument("--work-dir", required=True)
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("GEARBOX_", "OMP_"))}
    base_env["GEARBOX_LOG_LEVEL"] = "error"

    def gbx(args, env=None):
        e = dict(base_env)
        e.update(env or {})
        return subprocess.run([a.gearbox] + args, capture_output=True, text=True, env=e, timeout=120)

    switch = os.path.join(a.work_dir, "switch.json")
    with open(switch, "w") as f:
        json.dump({"cse": "on"}, f)
    missing = os.path.join(a.work_dir, "does_not_exist.onnx")
    flags = {
        "--threads": ["--threads", "1"],
        "--engines": ["--engines", "cpu.ref"],
        "--engine": ["--engine", "Relu=cpu.ref"],
        "--disable-pass": ["--disable-pass", "cse"],
        "--fusion-switch": ["--fusion-switch", switch],
        "--no-winograd": ["--no-winograd"],
    }
    commands = {
        "run": ["run", missing],
        "bench": ["bench", missing],
        "profile": ["profile", missing, "--output-dir", os.path.join(a.work_dir, "prof")],
        "serve": ["serve", "--model", "m=" + missing, "--port", "0", "--metrics-port", "-1"],
        "compile": ["compile", missing, "-o", os.path.join(a.work_dir, "never.gbm")],
    }
    for cmd, args in commands.items():
        for flag, value in flags.items():
            p = gbx(args + value)
            out = p.stdout + p.stderr
            check("FILE_NOT_FOUND" in out and p.returncode not in (0, 106),
                  f"gearbox {cmd} accepts {flag}: exit {p.returncode}: {out.strip()[:300]}")

    # A real model: y = Relu(x), x float [2, 3].
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    model = os.path.join(a.work_dir, "relu.onnx")
    onnx.save(m, model)

    def run_json(extra, env=None):
        p = gbx(["run", model, "--random-inputs", "--json"] + extra, env)
        check(p.returncode == 0, f"run {extra} {env}: exit {p.returncode}: {p.stderr.strip()[:300]}")
        return json.loads(p.stdout) if p.returncode == 0 else {}

    check(run_json(["--threads", "1"]).get("threads") == 1, "run --threads 1 reports 1 thread")
    check(run_json([], {"GEARBOX_NUM_THREADS": "1"}).get("threads") == 1, "GEARBOX_NUM_THREADS=1 reports 1 thread")
    p = gbx(["run", model, "--random-inputs", "--engines", "cpu.ref"])
    check(p.returncode == 0 and "engine cpu.ref," in p.stdout, f"run --engines cpu.ref: {p.stdout.strip()[:300]}")
    for args, env, code in [(["--engines", "cpu.ref,cpu.dnn"], None, "ENGINE_UNKNOWN"),
                            ([], {"GEARBOX_ENGINES": "cuda"}, "ENGINE_UNKNOWN"),
                            ([], {"GEARBOX_NUM_THREADS": "abc"}, "ENV_VALUE_INVALID"),
                            (["--threads", "-1"], None, "USAGE")]:
        p = gbx(["run", model, "--random-inputs"] + args, env)
        check(p.returncode != 0 and code in p.stderr, f"run {args} {env}: {code} expected: {p.stderr.strip()[:300]}")

    # compile and run with the same flags place the nodes the same way.
    gbm = os.path.join(a.work_dir, "relu.gbm")
    same = ["--engines", "cpu.ref,cpu.dnnl", "--disable-pass", "cse"]
    p = gbx(["compile", model, "-o", gbm] + same)
    check(p.returncode == 0, f"compile {same}: {p.stderr.strip()[:300]}")
    compiled = re.search(r"^partition: (.*)$", p.stdout, re.M)
    p = gbx(["run", model, "--random-inputs"] + same)
    in_memory = re.search(r"^partition: (.*)$", p.stdout, re.M)
    check(compiled and in_memory and compiled.group(1) == in_memory.group(1),
          f"compile and run partition alike: {compiled and compiled.group(1)} vs {in_memory and in_memory.group(1)}")

    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
