#!/usr/bin/python3
"""gearbox plan through the CLI: JSON output, the memory limit held, plain data parallelism
avoided when it does not fit, the sweep's SVG, and bad input refused with its code.

  check_plan_cli.py GEARBOX LINKS_JSON WORK_DIR
"""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

gbx, links, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def plan(*args):
    return subprocess.run([gbx, "plan", *args], capture_output=True, text=True, timeout=300)


GIB = 1 << 30
p = plan("gpt-175b", "--devices", "1024", "--memory-per-device", "80G", "--links", links, "--json")
check(p.returncode == 0, f"175B on 1024: exit {p.returncode} {p.stderr[-300:]}")
if p.returncode == 0:
    doc = json.loads(p.stdout)
    c = doc["chosen"]
    lay = c["layout"]
    check(lay["dp"] * lay["tp"] * lay["pp"] == 1024, f"degrees multiply to 1024: {lay}")
    check(c["estimate"]["memory_bytes"]["total"] <= 80 * GIB, f"chosen fits 80 GiB: {c['estimate']['memory_bytes']}")
    check(sum(lay["stage_units"]) == 96 + 2, f"stages cover 98 units: {lay['stage_units']}")
    for r in doc["runners_up"]:
        check(r["estimate"]["memory_bytes"]["total"] <= 80 * GIB, "runner-up fits")
        check(r["estimate"]["step_s"] >= c["estimate"]["step_s"], "runners-up are not faster than the chosen one")
    print(f"175B on 1024 devices: {lay['dp']}x{lay['tp']}x{lay['pp']}, {c['estimate']['step_s']:.2f} s/step, "
          f"search {doc['search_seconds']:.2f} s")

p = plan("gpt-1b", "--devices", "8", "--memory-per-device", "16G", "--links", links, "--json")
check(p.returncode == 0, f"1.3B on 8: exit {p.returncode} {p.stderr[-300:]}")
if p.returncode == 0:
    doc = json.loads(p.stdout)
    lay = doc["chosen"]["layout"]
    check(doc["data_parallel"]["fits"] is False, "plain DP of 1.3B does not fit 16 GiB")
    check(not (lay["dp"] == 8 and lay["zero"] == 0 and not lay["recompute"] and lay["micro_batches"] == 1),
          f"1.3B on 8 x 16 GiB is not plain DP: {lay}")

svg = os.path.join(work, "sweep.svg")
p = plan("gpt-13b", "--sweep", "8,64", "--memory-per-device", "80G", "--links", links, "--svg", svg)
check(p.returncode == 0 and "13b" in p.stdout, f"sweep: exit {p.returncode} {p.stderr[-300:]}")
if os.path.exists(svg):
    root = ET.parse(svg).getroot()
    rects = [e for e in root.iter() if e.tag.endswith("rect")]
    check(len(rects) == 1 + 2 * 2, f"sweep plot has a background and two bars per device count: {len(rects)} rects")
else:
    check(False, "sweep wrote no SVG")

# Per-layer split choices: on links whose latency dwarfs a small network's arithmetic, every
# tensor-parallel layout runs some units whole; --no-replicate splits them all.
slow_links = os.path.join(work, "slow_links.json")
with open(slow_links, "w") as f:
    json.dump({"devices_per_node": 4, "intra_node": {"bandwidth_gbs": 1, "latency_us": 650},
               "device": {"peak_tflops": 0.17, "memory_bandwidth_gbs": 80, "memory_gb": 4, "compute_share": 0.5}}, f)
small = os.path.join(work, "small.json")
with open(small, "w") as f:
    json.dump({"name": "small", "layers": 2, "hidden": 32, "heads": 4, "vocab": 64, "seq": 8, "global_batch": 8,
               "dtype": "fp32"}, f)
for extra, want_whole in [([], True), (["--no-replicate"], False)]:
    p = plan(small, "--devices", "4", "--links", slow_links, "--top", "200", "--json", *extra)
    check(p.returncode == 0, f"small on slow links {extra}: exit {p.returncode} {p.stderr[-300:]}")
    if p.returncode == 0:
        doc = json.loads(p.stdout)
        rows = [doc["chosen"]] + doc["runners_up"]
        whole = [r for r in rows if r["layout"]["replicated_units"]]
        check(bool(whole) == want_whole, f"{extra}: layouts with units run whole: {len(whole)} of {len(rows)}")
        for r in whole:
            lay = r["layout"]
            check(lay["tp"] > 1 and lay["replicated_units"] == sorted(set(lay["replicated_units"])) and
                  all(0 <= u < 4 for u in lay["replicated_units"]) and
                  (0 in lay["replicated_units"]) == (3 in lay["replicated_units"]),
                  f"units run whole: tp > 1, ascending, in range, the tied embedding with the head: {lay}")
p = plan(small, "--devices", "4", "--links", slow_links, "--top", "200")
check(p.returncode == 0 and any(l.startswith(" #") and " whole " in l for l in p.stdout.splitlines()),
      f"the table has a whole column: {p.stdout[:600]}")

bad_links = os.path.join(work, "bad_links.json")
with open(bad_links, "w") as f:
    f.write('{"intra_node": {"bandwidth_gbs": -1}}')
for args, code in [(["no-such-net", "--devices", "8"], "PLAN_SPEC_INVALID"),
                   (["gpt-13b", "--devices", "2", "--memory-per-device", "1G", "--links", links], "PLAN_INFEASIBLE"),
                   (["gpt-tiny", "--devices", "4", "--links", bad_links], "PLAN_SPEC_INVALID"),
                   (["gpt-tiny", "--devices", "4", "--memory-per-device", "lots"], "DEVICE_MEMORY_INVALID"),
                   (["gpt-tiny"], "USAGE")]:
    p = plan(*args)
    check(p.returncode != 0 and code in p.stderr and "Traceback" not in p.stderr,
          f"{args}: non-zero exit with {code}: exit {p.returncode}, {p.stderr.strip()[:300]}")

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
