#!/usr/bin/python3
"""`gearbox smi` shows the traffic of running collective groups (issue 26 item 6).

Two ranks started by `gearbox launch` each run N allreduces and 2 broadcasts of a known size
(gearbox_comm_rank --traffic) and then wait. Meanwhile:
* `gearbox smi --json` lists group 'world' for ranks 0 and 1 with exactly the calls and bytes
  the ranks made (1 + N allreduces: the rank program's first one carries one int64; 2
  broadcasts), time spent > 0, no timeouts or lost peers;
* `gearbox smi --prometheus` is valid exposition text for Prometheus' own checker
  (`promtool check metrics`) and carries the same numbers;
* the text view names the group.
After the ranks exit, smi lists no group (each rank removed its file).

Usage: check_smi_comm.py GEARBOX GEARBOX_COMM_RANK WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import time

N, FLOATS = 7, 1000


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    gearbox, rank_prog, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, GEARBOX_STATS_DIR=os.path.join(work, "stats"))
    hold = os.path.join(work, "go")
    job = subprocess.Popen([gearbox, "launch", "-n", "2", "--timeout", "120", "--", rank_prog,
                            "--traffic", str(N), str(FLOATS), "--hold-until", hold], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 60
        while not all(os.path.exists(f"{hold}.ready.{r}") for r in (0, 1)):
            if time.time() > deadline or job.poll() is not None:
                fail("the ranks did not get ready: " + (job.stdout.read() if job.poll() is not None else ""))
            time.sleep(0.05)

        want_allreduce = {"calls": 1 + N, "bytes": 8 + N * FLOATS * 4}
        want_broadcast = {"calls": 2, "bytes": 2 * FLOATS * 4}
        # The counts reach the files within 0.5 s of the ranks going idle.
        deadline = time.time() + 10
        while True:
            doc = json.loads(subprocess.run([gearbox, "smi", "--json"], env=env, check=True,
                                            capture_output=True, text=True).stdout)
            groups = {g["rank"]: g for g in doc["comm_groups"] if g["group"] == "world"}
            if (set(groups) == {0, 1} and
                    all(g["ops"].get("allreduce", {}).get("calls") == want_allreduce["calls"] and
                        g["ops"].get("broadcast", {}).get("calls") == want_broadcast["calls"]
                        for g in groups.values())):
                break
            if time.time() > deadline:
                fail("smi --json did not show both ranks' final counts: " + json.dumps(doc["comm_groups"]))
            time.sleep(0.2)
        for r, g in groups.items():
            for op, want in (("allreduce", want_allreduce), ("broadcast", want_broadcast)):
                got = g["ops"][op]
                if got["bytes"] != want["bytes"]:
                    fail(f"rank {r} {op}: {got['bytes']} bytes, the rank sent {want['bytes']}")
                if not got["seconds"] > 0:
                    fail(f"rank {r} {op}: {got['seconds']} s")
            if (g["size"], g["backend"], g["timeouts"], g["rank_failures"]) != (2, "gloo", 0, 0):
                fail(f"rank {r}: {g}")

        prom = subprocess.run([gearbox, "smi", "--prometheus"], env=env, check=True, capture_output=True,
                              text=True).stdout
        check = subprocess.run(["promtool", "check", "metrics"], input=prom, capture_output=True, text=True)
        if check.returncode != 0:
            fail("promtool check metrics: " + check.stdout + check.stderr + "\n" + prom)
        for r in (0, 1):
            for metric, value in (("gearbox_comm_collectives_total", want_allreduce["calls"]),
                                  ("gearbox_comm_bytes_total", want_allreduce["bytes"])):
                line = [ln for ln in prom.splitlines() if ln.startswith(metric + "{") and f'rank="{r}"' in ln
                        and 'op="allreduce"' in ln and 'group="world"' in ln]
                if len(line) != 1 or float(line[0].rsplit(" ", 1)[1]) != value:
                    fail(f"{metric} rank {r}: {line}, want {value}\n{prom}")

        text = subprocess.run([gearbox, "smi"], env=env, check=True, capture_output=True, text=True).stdout
        if "group 'world' rank 0/2 gloo" not in text or "group 'world' rank 1/2 gloo" not in text:
            fail("the text view lacks the groups:\n" + text)
    finally:
        open(hold, "w").close()
        out, _ = job.communicate(timeout=60)
    if job.returncode != 0:
        fail(f"gearbox launch exited {job.returncode}:\n{out}")
    doc = json.loads(subprocess.run([gearbox, "smi", "--json"], env=env, check=True, capture_output=True,
                                    text=True).stdout)
    if doc["comm_groups"]:
        fail("groups still listed after the ranks exited: " + json.dumps(doc["comm_groups"]))
    print(f"smi showed both ranks' counts ({want_allreduce['calls']} allreduces, {want_allreduce['bytes']} bytes; "
          f"2 broadcasts), promtool accepted the exposition, and the files went with the ranks")


if __name__ == "__main__":
    main()
