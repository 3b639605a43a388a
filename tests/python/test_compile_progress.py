"""`gearbox compile` shows its phases on stderr: one plain line per phase when stderr is not a
terminal, a redrawn bar on a terminal; stdout keeps only the result."""
import os
import pty
import re
import select
import subprocess

PHASES = ["read", "check", "infer shapes", "import", "passes", "plan", "partition", "pack weights", "write"]


def test_plain_lines_when_not_a_terminal(models, tmp_path):
    out = tmp_path / "m.gbm"
    r = subprocess.run([os.environ["GEARBOX_BIN"], "compile", models["matmul_chain"], "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("compile: ")]
    assert [re.match(r"compile: (\S+(?: \S+)?)\s+\d+\.\d\d s", l).group(1) for l in lines] == PHASES, r.stderr
    weights = next(l for l in lines if "pack weights" in l)
    assert "(24.0 MB of 24.0 MB)" in weights  # 24 weights of 512 x 512 floats
    assert "\r" not in r.stderr and "\033" not in r.stderr
    assert r.stdout.startswith("compiled ") and "compile:" not in r.stdout
    q = subprocess.run([os.environ["GEARBOX_BIN"], "compile", models["add_relu"], "-o", str(out), "--quiet"],
                       capture_output=True, text=True, timeout=300)
    assert q.returncode == 0 and "compile:" not in q.stderr


def test_bar_on_a_terminal(models, tmp_path):
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm")
    p = subprocess.Popen([os.environ["GEARBOX_BIN"], "compile", models["matmul_chain"], "-o", str(tmp_path / "m.gbm")],
                         stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 300)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    stdout = p.stdout.read().decode()
    assert p.wait(timeout=60) == 0
    text = seen.decode(errors="replace")
    assert "\r\033[K" in text  # lines redrawn in place
    assert re.search(r"compile: passes\s+\[[#.]+\]", text), text  # a bar while the passes ran
    for phase in PHASES:
        assert re.search(rf"compile: {phase}\s+\d+\.\d\d s", text), phase
    assert "\033" not in stdout and stdout.startswith("compiled ")
