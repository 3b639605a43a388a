#!/usr/bin/env python3
"""Structure tests for `gearbox smi` and `gearbox doctor`.

usage: check_smi_doctor.py GEARBOX_BINARY WORK_DIR

Checks that smi's JSON has every documented field with the right types (and that the
pool and system-memory figures agree with each other and with /proc/meminfo), that --watch
emits one JSON document per refresh, that --calibrate fills and caches the peaks, and that
doctor prints PASS/WARN/FAIL lines with fixes and FAILs for a simulated missing ISA
feature, for a model (.onnx metadata or .gbm) compiled for a missing one, and for broken
settings; and which OpenMP runtime serves the parallel regions, with its spin time.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

GBX, WORK = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(args, env_extra=None, expect_rc=None):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("GEARBOX_", "OMP_", "KMP_")):
            del env[k]
    env["XDG_CACHE_HOME"] = os.path.join(WORK, "cache")
    env.update(env_extra or {})
    p = subprocess.run([GBX] + args, capture_output=True, text=True, env=env, timeout=120)
    if expect_rc is not None:
        check(p.returncode == expect_rc, f"{args} {env_extra}: exit {p.returncode}, expected {expect_rc}\n{p.stderr}")
    return p


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)

# ---- smi ------------------------------------------------------------------------------
p = run(["smi", "--json"], expect_rc=0)
doc = json.loads(p.stdout)
for key in ["timestamp", "devices", "system_memory", "temperatures"]:
    check(key in doc, f"smi: field {key}")
check(len(doc["devices"]) >= 1, "smi: at least one device")
dev = doc["devices"][0]
for key, typ in [("name", str), ("kind", str), ("index", int), ("vendor", str), ("model", str),
                 ("logical_cores", int), ("physical_cores", int), ("memory_bytes", int), ("caches", list),
                 ("isa", dict), ("simulated_missing_isa", list), ("calibration_cache", str), ("pool", dict)]:
    check(isinstance(dev.get(key), typ), f"smi: device field {key} is {typ.__name__}")
check(dev["name"] == "cpu:0" and dev["kind"] == "cpu", "smi: first device is cpu:0")
for flag in ["sse2", "avx2", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "amx_tile", "fma", "f16c"]:
    check(isinstance(dev["isa"].get(flag), bool), f"smi: isa flag {flag}")
check(dev["isa"]["sse2"] is True, "smi: an x86-64 CPU has sse2")
check(dev["peaks"] is None, "smi: not calibrated in a fresh cache")
pool = dev["pool"]
for key in ["capacity_bytes", "used_bytes", "free_bytes", "largest_free_block_bytes", "fragmentation",
            "peak_used_bytes", "live_allocations", "allocations", "frees", "failed_allocations",
            "block_size_histogram"]:
    check(key in pool, f"smi: pool field {key}")
# smi reports the pool of its own process, which runs no model (session tensors come from the
# pool, but only in the process that runs them): a fresh process reports an empty pool, and the
# free-block scan agrees with the counters.
check(pool["used_bytes"] == 0 and pool["live_allocations"] == 0, "smi: a fresh process has an empty pool")
check(pool["peak_used_bytes"] >= pool["used_bytes"], "smi: peak >= used")
check(0 < pool["largest_free_block_bytes"] <= pool["free_bytes"] == pool["capacity_bytes"],
      "smi: an empty pool has free blocks, none larger than the free total")
with open("/proc/meminfo") as f:
    total_kb = int(next(l for l in f if l.startswith("MemTotal:")).split()[1])
check(doc["system_memory"]["total_bytes"] == total_kb * 1024, "smi: system memory total matches /proc/meminfo")
check(pool["capacity_bytes"] == min(total_kb * 1024 // 2, 8 << 30) // 256 * 256, "smi: default pool capacity")
check(isinstance(doc["temperatures"], list), "smi: temperatures is a list")

p = run(["smi", "--json"], {"GEARBOX_DEVICE_MEMORY": "3M"}, expect_rc=0)
check(json.loads(p.stdout)["devices"][0]["pool"]["capacity_bytes"] == 3 << 20, "smi: GEARBOX_DEVICE_MEMORY=3M")
p = run(["smi"], {"GEARBOX_DEVICE_MEMORY": "lots"}, expect_rc=1)
check("GBX-E7004 DEVICE_MEMORY_INVALID" in p.stderr, "smi: bad GEARBOX_DEVICE_MEMORY is GBX-E7004")

p = run(["smi", "--json", "--watch", "0.05", "--count", "3"], expect_rc=0)
lines = [l for l in p.stdout.splitlines() if l.strip()]
check(len(lines) == 3, f"smi --watch --count 3: {len(lines)} documents")
for l in lines:
    check("devices" in json.loads(l), "smi --watch: each line is a JSON document")

p = run(["smi", "--json", "--calibrate", "--calibrate-ms", "20"], expect_rc=0)
peaks = json.loads(p.stdout)["devices"][0]["peaks"]
check(peaks is not None and peaks["fp32_gflops"] > 0 and peaks["bandwidth_gbs"] > 0, "smi --calibrate: peaks measured")
check((peaks["bf16_gflops"] is not None) == dev["isa"]["avx512_bf16"], "smi --calibrate: bf16 measured iff avx512_bf16")
check(os.path.exists(os.path.join(WORK, "cache", "gearbox", "calibration.json")), "smi --calibrate: cache written")
p = run(["smi", "--json"], expect_rc=0)
check(json.loads(p.stdout)["devices"][0]["peaks"] == peaks, "smi: reads the cached peaks back")
p = run(["smi"], expect_rc=0)
for word in ["cpu:0", "isa", "peaks", "memory pool", "fragmentation", "system memory", "temperatures"]:
    check(word in p.stdout, f"smi text: mentions {word}")
run(["smi", "--watch", "-1"], expect_rc=1)

# ---- doctor -----------------------------------------------------------------------------
def doctor(args=None, env=None, rc=None):
    p = run(["doctor", "--json"] + (args or []), env, expect_rc=rc)
    d = json.loads(p.stdout)
    for c in d["checks"]:
        check(c["status"] in ("PASS", "WARN", "FAIL"), f"doctor: status of {c['name']}")
        check(c["status"] == "PASS" or c["fix"], f"doctor: {c['name']} ({c['status']}) has a fix")
    counts = {s: sum(c["status"] == s for c in d["checks"]) for s in ("PASS", "WARN", "FAIL")}
    check(d["summary"] == {"pass": counts["PASS"], "warn": counts["WARN"], "fail": counts["FAIL"]}, "doctor: summary counts")
    return {c["name"]: c for c in d["checks"]}


checks = doctor(rc=0)
for name in ["device", "cpu.build_isa", "cpu.vector_isa", "library.oneDNN", "library.protobuf", "library.onnx",
             "env.variables", "threads", "op_plugins", "log_dir", "device.pool"]:
    check(name in checks, f"doctor: check {name}")
check(checks["cpu.build_isa"]["status"] == "PASS", "doctor: build ISA passes on the build machine")
check(checks["library.protobuf"]["status"] == "PASS", "doctor: protobuf loaded is the one linked")

# OpenMP: parallel regions run on the runtime gearbox was linked with (libomp in the default
# build, src/device/openmp.h), whose idle threads spin gearbox's 5 ms unless KMP_BLOCKTIME says
# otherwise; a libgomp loaded ahead of it (LD_PRELOAD) still runs everything, and is a WARN.
omp = checks["library.OpenMP"]
check(omp["status"] == "PASS", f"doctor: OpenMP runtime is the one linked: {omp}")
if "built against libomp" in omp["detail"]:
    check("runs on libomp" in omp["detail"] and "spin 5 ms" in omp["detail"], f"doctor: libomp, 5 ms default: {omp}")
    omp = doctor(env={"KMP_BLOCKTIME": "40"}, rc=0)["library.OpenMP"]
    check("spin 40 ms" in omp["detail"], f"doctor: the user's KMP_BLOCKTIME wins: {omp}")
    gomp = "/usr/lib/x86_64-linux-gnu/libgomp.so.1"
    if os.path.exists(gomp):
        omp = doctor(env={"LD_PRELOAD": gomp}, rc=0)["library.OpenMP"]
        check(omp["status"] == "WARN" and "libgomp" in omp["detail"] and omp["fix"],
              f"doctor: WARN when libgomp is loaded first: {omp}")

checks = doctor(env={"GEARBOX_SIMULATE_MISSING_ISA": "sse2"}, rc=1)
check(checks["cpu.build_isa"]["status"] == "FAIL" and "sse2" in checks["cpu.build_isa"]["detail"],
      "doctor: FAIL for a simulated missing build feature")
check(checks["env.GEARBOX_SIMULATE_MISSING_ISA"]["status"] == "WARN", "doctor: warns that simulation is on")

# A model compiled for avx512f (declared in its metadata).
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
helper.set_model_props(m, {"gearbox.required_isa": "avx512f,avx512bw"})
model_path = os.path.join(WORK, "avx512_model.onnx")
onnx.save(m, model_path)
checks = doctor([model_path], {"GEARBOX_SIMULATE_MISSING_ISA": "avx512f"}, rc=1)
check(checks["model.isa"]["status"] == "FAIL" and "avx512f" in checks["model.isa"]["detail"],
      "doctor: FAIL for a model compiled for a missing feature")
has512 = dev["isa"]["avx512f"] and dev["isa"]["avx512bw"]
checks = doctor([model_path], rc=0 if has512 else 1)
check(checks["model.isa"]["status"] == ("PASS" if has512 else "FAIL"), "doctor: model ISA matches the machine")
helper.set_model_props(m, {})
del m.metadata_props[:]
plain = os.path.join(WORK, "plain.onnx")
onnx.save(m, plain)
check(doctor([plain], rc=0)["model.isa"]["status"] == "PASS", "doctor: a model without requirements passes")

# A .gbm records the ISA it was compiled for (--target native: this build's features).
gbm_path, report_path = os.path.join(WORK, "native.gbm"), os.path.join(WORK, "native_report.json")
run(["compile", plain, "-o", gbm_path, "--target", "native", "--report", report_path], expect_rc=0)
with open(report_path) as f:
    gbm_isa = json.load(f)["required_isa"]
check(len(gbm_isa) >= 1, f"compile --target native records this build's features: {gbm_isa}")
checks = doctor([gbm_path], rc=0)
check(checks["model.isa"]["status"] == "PASS" and all(f in checks["model.isa"]["detail"] for f in gbm_isa),
      f"doctor model.gbm: ISA check passes and names {gbm_isa}: {checks['model.isa']}")
if gbm_isa:
    checks = doctor([gbm_path], {"GEARBOX_SIMULATE_MISSING_ISA": gbm_isa[-1]}, rc=1)
    check(checks["model.isa"]["status"] == "FAIL" and gbm_isa[-1] in checks["model.isa"]["detail"],
          f"doctor model.gbm: FAIL when {gbm_isa[-1]} is missing: {checks['model.isa']}")
generic = os.path.join(WORK, "generic.gbm")
run(["compile", plain, "-o", generic, "--target", "generic"], expect_rc=0)
check(doctor([generic], rc=0)["model.isa"]["status"] == "PASS", "doctor: a generic .gbm passes")
# The precision a model runs in: force_fp32 by default; a .gbm compiled in a bf16 mode names its
# bf16 nodes, and on a CPU without bf16 arithmetic (simulated) doctor warns they run in fp32.
check(doctor([plain], rc=0)["model.precision"]["status"] == "PASS" and
      "force_fp32" in doctor([plain], rc=0)["model.precision"]["detail"], "doctor: an .onnx runs in force_fp32")
mm = helper.make_graph([helper.make_node("MatMul", ["a", "w"], ["b"], name="mm")], "mm",
                       [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 32])],
                       [helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 32])],
                       [numpy_helper.from_array(np.ones((32, 32), np.float32), "w")])
mm_model = helper.make_model(mm, opset_imports=[helper.make_opsetid("", 13)])
mm_model.ir_version = 8
mm_path, mm_gbm = os.path.join(WORK, "mm.onnx"), os.path.join(WORK, "mm_bf16.gbm")
onnx.save(mm_model, mm_path)
run(["compile", mm_path, "-o", mm_gbm, "--precision-mode", "allow_mix_precision_bf16", "-q"], expect_rc=0)
if dev["isa"].get("avx512_bf16") or dev["isa"].get("amx_bf16"):
    prec = doctor([mm_gbm], rc=0)["model.precision"]
    check(prec["status"] == "PASS" and "allow_mix_precision_bf16" in prec["detail"] and
          "1 nodes compute in bfloat16" in prec["detail"], f"doctor: a bf16 .gbm names its mode and nodes: {prec}")
    prec = doctor([mm_gbm], {"GEARBOX_SIMULATE_MISSING_ISA": "avx512_bf16,amx_bf16"})["model.precision"]
    check(prec["status"] == "WARN" and "no bf16 arithmetic" in prec["detail"],
          f"doctor: WARN for bf16 nodes on a CPU without bf16: {prec}")
bad = os.path.join(WORK, "bad.onnx")
with open(bad, "wb") as f:
    f.write(b"\x00garbage")
check(doctor([bad], rc=1)["model.parse"]["status"] == "FAIL", "doctor: FAIL for an unreadable model")

checks = doctor(env={"GEARBOX_NUM_THREADS": "4", "OMP_NUM_THREADS": "8", "GEARBOX_OP_PATH": "/nonexistent/dir",
                     "GEARBOX_DEVICE_MEMORY": "lots", "GEARBOX_NUM_THREDS": "2",
                     "GEARBOX_LOG_FILE": "/proc/nonexistent/gearbox.log"}, rc=1)
check(checks["env.threads_conflict"]["status"] == "WARN", "doctor: GEARBOX_NUM_THREADS vs OMP_NUM_THREADS conflict")
check(checks["op_plugins"]["status"] == "FAIL", "doctor: missing op-plugin folder")
check(checks["env.GEARBOX_DEVICE_MEMORY"]["status"] == "FAIL", "doctor: invalid GEARBOX_DEVICE_MEMORY")
check(checks["device.pool"]["status"] == "FAIL", "doctor: pool cannot be sized")
check(checks["env.GEARBOX_NUM_THREDS"]["status"] == "WARN", "doctor: unknown GEARBOX_ variable (typo)")
check(checks["log_dir"]["status"] == "FAIL", "doctor: unwritable log folder")
check(checks["threads"]["status"] in ("PASS", "WARN"), "doctor: thread check present")
# Variables gearbox reads (docs/cli.md) are not "misspelt".
known = {"GEARBOX_ENGINES": "cpu.ref", "GEARBOX_PLAN_CACHE_SIZE": "4", "GEARBOX_DISABLE_PASSES": "conv_bn_fold",
         "GEARBOX_LOG_LEVEL": "critical", "GEARBOX_CONV_WINOGRAD": "0"}
checks = doctor(env=known, rc=0)
for name in known:
    check("env." + name not in checks, f"doctor: no warning for {name}: {checks.get('env.' + name)}")
check(doctor(env={"GEARBOX_LOG_LEVEL": "loud"})["env.GEARBOX_LOG_LEVEL"]["status"] == "WARN",
      "doctor: unknown log level")
checks = doctor(env={"GEARBOX_NUM_THREADS": "999"}, rc=0)
check(checks["threads"]["status"] == "WARN" and "oversubscribed" in checks["threads"]["detail"],
      "doctor: oversubscribed threads")

# doctor checks what it claims (issue 21): an engine list naming an engine this gearbox does
# not have FAILs (it used to pass GEARBOX_ENGINES=cuda), ...
checks = doctor(env={"GEARBOX_ENGINES": "cpu.simd,cuda"}, rc=1)
check(checks["engines"]["status"] == "FAIL" and "cuda" in checks["engines"]["detail"]
      and "ENGINE_UNKNOWN" in checks["engines"]["detail"], f"doctor: FAIL for GEARBOX_ENGINES=cuda: {checks.get('engines')}")
check(doctor(rc=0)["engines"]["status"] == "PASS", "doctor: the default engine list passes")
checks = doctor(env={"GEARBOX_NUM_THREADS": "abc"}, rc=1)
check(checks["session.options"]["status"] == "FAIL" and "GEARBOX_NUM_THREADS" in checks["session.options"]["detail"],
      f"doctor: GEARBOX_NUM_THREADS=abc is refused as a session would: {checks.get('session.options')}")
# ... the libraries on GEARBOX_OP_PATH are loaded as a session loads them: an empty folder is a
# WARN naming it, a file that is no shared library a FAIL naming it (tests/plugins checks the
# listing of plugins that load) ...
plugins = os.path.join(WORK, "plugins")
os.makedirs(plugins, exist_ok=True)
op = doctor(env={"GEARBOX_OP_PATH": plugins}, rc=0)["op_plugins"]
check(op["status"] == "WARN" and "op path searched: " + plugins in op["detail"] and op["fix"],
      f"doctor: a folder without plugins is a WARN naming it: {op}")
open(os.path.join(plugins, "libmyop.so"), "wb").close()
op = doctor(env={"GEARBOX_OP_PATH": plugins}, rc=1)["op_plugins"]
check(op["status"] == "FAIL" and "PLUGIN_LOAD_FAILED" in op["detail"] and "libmyop.so" in op["detail"],
      f"doctor: a library that does not load is a FAIL naming it: {op}")
# ... a model with an op no engine serves FAILs before any run, naming the op ...
g = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["y"])], "g", [x], [y])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
unknown_op = os.path.join(WORK, "unknown_op.onnx")
onnx.save(m, unknown_op)
checks = doctor([unknown_op], rc=1)
part = checks.get("model.partition", {})
check(part.get("status") == "FAIL" and "OP_UNSUPPORTED" in part.get("detail", "") and "NoSuchOp" in part["detail"],
      f"doctor: FAIL naming the op no engine serves: {part}")
part = doctor([plain], rc=0).get("model.partition", {})
check(part.get("status") == "PASS" and "cpu." in part.get("detail", ""), f"doctor: a servable model passes: {part}")
# ... and a .gbm shows the gearbox version that compiled it.
gbm_check = doctor([generic], rc=0).get("model.gbm", {})
check(gbm_check.get("status") == "PASS" and "compiled by gearbox " in gbm_check.get("detail", "")
      and "(not recorded)" not in gbm_check["detail"], f"doctor: the .gbm's gearbox version: {gbm_check}")

p = run(["doctor"], {"GEARBOX_SIMULATE_MISSING_ISA": "sse2"}, expect_rc=1)
lines = p.stdout.splitlines()
check(any(l.startswith("FAIL  cpu.build_isa") for l in lines), "doctor text: FAIL line")
check(any(l.strip().startswith("fix: ") for l in lines), "doctor text: fix lines")

# ---- doctor --ops: the operator list (docs/ops.md) as the registry has it -------------------
p = run(["doctor", "--ops"], expect_rc=0)
rows = {}
for line in p.stdout.splitlines():
    cells = [c.strip() for c in line.strip("|").split("|")]
    if line.startswith("| ") and len(cells) == 4 and cells[0] not in ("op", "---"):
        rows.setdefault(cells[0], cells)
check(rows.get("Relu", [None, None])[1] == "1-21", f"doctor --ops: Relu at every opset: {rows.get('Relu')}")
# Registered to 18, GridSample serves 19 but not 20, whose modes changed (KernelDef::serves).
check(rows.get("GridSample", [None, None])[1] == "16-19", f"doctor --ops: GridSample stops at 19: {rows.get('GridSample')}")
check(rows.get("GroupNormalization", [None, None])[1] == "18-21", f"doctor --ops: {rows.get('GroupNormalization')}")
check("com.microsoft.FusedMatMul" in p.stdout, "doctor --ops: the contrib ops rewritten at import")

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
