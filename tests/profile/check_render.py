#!/usr/bin/python3
"""Renders gearbox profile's report.html in headless Chromium (Debian's chromium) and checks
that it loads without console or JavaScript errors; saves a screenshot.

Usage: check_render.py --gearbox BIN --work-dir DIR [--screenshot FILE.png]

* `gearbox profile` runs on a small model with planted problems (so the page has findings,
  a timeline, a roofline and a memory plot);
* Chromium (--headless --no-sandbox --disable-gpu, background networking, component updates
  and sync off) loads a copy of the page with a capture hook prepended (window.onerror,
  failed resource loads and console.error/warn, written into the DOM at load) and dumps the
  DOM: the hook must have caught nothing, Chromium's own log must hold no CONSOLE line, and
  the page's panels must be there;
* the same detector on a copy with one planted script error must report it (so this test
  can fail);
* a screenshot is saved and must be a PNG of the window's size that is not one flat colour.
Exits 77 (ctest: skipped, not passed) when no chromium is installed.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FAILS = []
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--enable-logging=stderr", "--v=0",
                  "--hide-scrollbars", "--allow-file-access-from-files"]
HOOK = """<script id="gbx-hook">(function(){var e=[];window.__gbx_errors=e;
window.addEventListener('error',function(ev){e.push('error: '+(ev.message||('failed to load '+
(ev.target&&(ev.target.src||ev.target.href)))));},true);
window.addEventListener('unhandledrejection',function(ev){e.push('unhandled rejection: '+ev.reason);});
['error','warn'].forEach(function(k){var f=console[k];console[k]=function(){e.push('console.'+k+': '+
Array.prototype.join.call(arguments,' '));return f.apply(console,arguments);};});
window.addEventListener('load',function(){var p=document.createElement('pre');p.id='gbx-errors';
p.textContent=JSON.stringify(e);document.body.appendChild(p);});})();</script>"""


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def model(path):
    # Transposes dominate (the copies finding) with a MatMul for the roofline plot.
    nodes = [helper.make_node("Transpose", ["x"], ["t0"], name="transpose0", perm=[0, 2, 1]),
             helper.make_node("Transpose", ["t0"], ["t1"], name="transpose1", perm=[0, 2, 1]),
             helper.make_node("MatMul", ["t1", "w"], ["y"], name="matmul")]
    w = numpy_helper.from_array(np.full((256, 64), 0.01, np.float32), "w")
    g = helper.make_graph(nodes, "render", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 512, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 512, 64])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, path)


def with_hook(html, extra=""):
    i = html.index("<head>") + len("<head>")
    return html[:i] + HOOK + extra + html[i:]


def chromium(binary, args, timeout=60):
    cmd = [binary] + CHROMIUM_FLAGS + args
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    print("$ " + " ".join(cmd[:1] + args) + f"  -> exit {r.returncode} ({time.time() - t0:.1f} s)")
    return r


def render_errors(binary, page):
    """Errors the hook caught plus Chromium's CONSOLE log lines, and the dumped DOM."""
    r = chromium(binary, ["--dump-dom", "file://" + os.path.abspath(page)])
    m = re.search(r'<pre id="gbx-errors">(.*?)</pre>', r.stdout, re.S)
    caught = json.loads(m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                        .replace("&amp;", "&")) if m else ["the capture hook did not run"]
    console = [line for line in r.stderr.splitlines() if ":CONSOLE" in line]
    return r.returncode, caught, console, r.stdout


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--work-dir", required=True)
    p.add_argument("--screenshot", default=None)
    a = p.parse_args()
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if not binary:
        print("SKIP: no chromium (scripts/install-deps.sh installs Debian's chromium)")
        return 77
    os.makedirs(a.work_dir, exist_ok=True)
    w = lambda *parts: os.path.join(a.work_dir, *parts)  # noqa: E731
    model(w("render.onnx"))
    out = w("profile")
    cmd = [a.gearbox, "profile", w("render.onnx"), "--random-inputs", "--loop", "2", "--output-dir", out,
           "--disable-pass", "transpose_reshape_cancel"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    print("$ " + " ".join(cmd) + f"  -> exit {r.returncode}")
    check(r.returncode == 0, "gearbox profile exits 0")
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        return 1
    html = open(os.path.join(out, "report.html")).read()

    page = w("report_hooked.html")
    with open(page, "w") as f:
        f.write(with_hook(html))
    rc, caught, console, dom = render_errors(binary, page)
    check(rc == 0, "chromium --dump-dom exits 0")
    check(caught == [], f"no JavaScript, resource or console error caught in the page ({caught})")
    check(console == [], f"no CONSOLE line in chromium's log ({console})")
    for label in ("timeline", "roofline", "memory", "arena"):
        check(f'aria-label="{label}"' in dom, f"the rendered DOM has the {label} plot")
    check('class="finding"' in dom and "copies" in dom, "the rendered DOM shows the advisor's copies finding")

    # The detector must see a planted error (else the checks above could not fail).
    bad = w("report_planted_error.html")
    with open(bad, "w") as f:
        f.write(with_hook(html, "<script>window.gbxPlanted.missing();</script>"))
    _, caught, console, _ = render_errors(binary, bad)
    check(any("missing" in c for c in caught) and any("missing" in c for c in console),
          f"a planted script error is caught by the hook and in chromium's log ({caught}, {console})")

    shot = os.path.abspath(a.screenshot or w("report.png"))
    if os.path.exists(shot):
        os.remove(shot)
    r = chromium(binary, ["--window-size=1280,1800", f"--screenshot={shot}",
                          "file://" + os.path.abspath(os.path.join(out, "report.html"))])
    check(r.returncode == 0 and os.path.exists(shot), f"screenshot saved to {shot}")
    if os.path.exists(shot):
        from PIL import Image
        img = Image.open(shot)
        px = np.asarray(img.convert("RGB"))
        check(img.format == "PNG" and img.size == (1280, 1800), f"screenshot is a 1280x1800 PNG ({img.format} {img.size})")
        check(len(np.unique(px.reshape(-1, 3), axis=0)) > 8, "screenshot is not one flat colour (the page rendered)")
    print("PASS" if not FAILS else f"FAILED: {len(FAILS)} check(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
