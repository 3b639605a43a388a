#!/usr/bin/python3
"""Run a command that must fail cleanly, and check how it failed.

Usage: expect_error.py --name ERROR_NAME [--errors-def errors.def] -- COMMAND ARGS...

Passes only when the command
  * exits with a non-zero status below 128 (not killed by a signal: a crash, an abort(), an
    uncaught exception or a sanitizer trap on bad input is a bug, not a clean refusal),
  * prints `GBX-E<code> <ERROR_NAME>:` on stderr, with <code> the one errors.def gives the name,
  * prints no AddressSanitizer / LeakSanitizer / UBSan report (sanitizer builds exit 1 on a
    report, which would otherwise look like an ordinary error exit).
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ERRORS_DEF = os.path.join(HERE, "..", "..", "src", "base", "errors.def")
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "SUMMARY: UndefinedBehaviorSanitizer")


def error_codes(path):
    codes = {}
    with open(path) as f:
        for m in re.finditer(r"GBX_ERROR\(\s*(\d+)\s*,\s*([A-Z0-9_]+)\s*,", f.read()):
            codes[m.group(2)] = int(m.group(1))
    return codes


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True, help="expected error name, e.g. FILE_NOT_FOUND")
    p.add_argument("--errors-def", default=DEFAULT_ERRORS_DEF)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--stderr-contains", action="append", default=[],
                   help="text stderr must also contain (repeatable), e.g. a figure of the message")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        p.error("no command given")

    codes = error_codes(a.errors_def)
    if a.name not in codes:
        print(f"FAIL: {a.name} is not in {a.errors_def}")
        return 1
    want = f"GBX-E{codes[a.name]} {a.name}:"

    print("$ " + " ".join(cmd), flush=True)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                           timeout=a.timeout)
    except subprocess.TimeoutExpired:
        print(f"FAIL: no answer within {a.timeout:.0f}s (a hang on bad input)")
        return 1
    print(f"exit status: {r.returncode}")
    print("stderr:\n" + r.stderr.rstrip())
    if r.stdout.strip():
        print("stdout:\n" + r.stdout.rstrip())

    ok = True
    if r.returncode == 0:
        print("FAIL: the command succeeded; it must refuse this input")
        ok = False
    elif r.returncode < 0 or r.returncode >= 128:
        sig = -r.returncode if r.returncode < 0 else r.returncode - 128
        print(f"FAIL: killed by signal {sig}: bad input must give an error, never a crash")
        ok = False
    if want not in r.stderr:
        got = re.findall(r"GBX-E\d+ [A-Z0-9_]+:", r.stderr)
        print(f"FAIL: stderr lacks '{want}' (error codes seen: {got or 'none'})")
        ok = False
    for text in a.stderr_contains:
        if text not in r.stderr:
            print(f"FAIL: stderr lacks '{text}'")
            ok = False
    for mark in SANITIZER_MARKS:
        if mark in r.stderr:
            print(f"FAIL: sanitizer report on stderr ('{mark}')")
            ok = False
            break
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
