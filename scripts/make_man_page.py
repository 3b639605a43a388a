#!/usr/bin/python3
"""Writes the gearbox(1) man page from the CLI's own help (the build runs this; CMakeLists.txt).

Usage: make_man_page.py --gearbox BIN --help2man HELP2MAN --version V -o gearbox.1

help2man (Debian's help2man) turns `gearbox --help` into the page; a COMMANDS section added
to it holds each subcommand's `gearbox CMD --help`, verbatim, so the page says what the
binary says and changes with it.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def roff_verbatim(text):
    # Inside .nf/.fi: backslashes are escapes and a line starting with '.' or "'" is a request.
    lines = []
    for line in text.rstrip().splitlines():
        line = line.replace("\\", "\\e")
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--help2man", default="help2man")
    p.add_argument("--version", required=True)
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args()

    top = subprocess.run([a.gearbox, "--help"], capture_output=True, text=True, check=True).stdout
    # CLI11 lists the commands under "SUBCOMMANDS:" (or "Subcommands:"), one per line.
    m = re.search(r"^subcommands:\s*$(.*?)(?:^\S|\Z)", top, re.M | re.S | re.I)
    commands = re.findall(r"^\s+(\S+)", m.group(1), re.M) if m else []
    if not commands:
        sys.exit("make_man_page: found no subcommands in `gearbox --help`:\n" + top)
    sections = ["[COMMANDS]"]
    for c in commands:
        text = subprocess.run([a.gearbox, c, "--help"], capture_output=True, text=True, check=True).stdout
        sections += [f'.SS "gearbox {c}"', ".nf", roff_verbatim(text), ".fi"]
    sections += ["[SEE ALSO]", "The documents in /usr/share/doc/gearbox (cli.md, python.md, errors.md); "
                 "`gearbox explain CODE` for an error code."]
    os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".h2m", delete=False) as inc:
        inc.write("\n".join(sections) + "\n")
    try:
        subprocess.run([a.help2man, "--no-info", "--no-discard-stderr", f"--version-string={a.version}",
                        "--name=compile, run and diagnose deep-learning models", f"--include={inc.name}",
                        f"--output={a.output}", a.gearbox], check=True)
    finally:
        os.unlink(inc.name)


if __name__ == "__main__":
    main()
