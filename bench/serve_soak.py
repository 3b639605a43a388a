#!/usr/bin/python3
"""Soak of `gearbox serve` under mixed valid and invalid traffic: the server must answer every
request as expected for the whole run, and its memory must stay flat after warm-up.

  /usr/bin/python3 bench/serve_soak.py --gearbox build/gearbox --duration 3600   # the record
  /usr/bin/python3 bench/serve_soak.py --gearbox build/gearbox --duration 30     # CI smoke

--clients threads each loop over a fixed mix (in the same order, offset per client):
  * valid JSON infers on a small model (z = x + 1 on a 2x2 tensor; checked against numpy),
    kept alive on one connection;
  * invalid requests whose answer is known: not JSON (400 SERVE_REQUEST_INVALID), a wrong shape
    (400 INPUT_SHAPE_MISMATCH), an unknown model (404), conflicting Content-Length and
    obs-fold (400 SERVE_HTTP_MALFORMED, on their own connections);
  * a client that hangs up half-way through its body.
An error is any answer other than the expected one (status and GBX code), or an exception.
Every --interval seconds it records requests, errors, p50/p99 latency of the valid infers and
the server's RSS (/proc/PID/status). It fails (exit 1) on any error, or when RSS grows by more
than --rss-growth-mib between the end of the warm-up (--warmup seconds) and the end. Prints one
JSON object on stdout.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "serve"))
from serve_util import RawConnection, Server, error_codes, json_tensor, post_bytes  # noqa: E402

CODES = error_codes()


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def gbx_code(body):
    try:
        err = json.loads(body)["error"]
        return int(err.split(" ", 1)[0][len("GBX-E"):])
    except Exception:  # noqa: BLE001 - any other body is simply not a GBX error
        return None


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.errors = {}
        self.latencies = []  # seconds of the valid infers in the current window

    def ok(self, latency=None):
        with self.lock:
            self.requests += 1
            if latency is not None:
                self.latencies.append(latency)

    def error(self, kind, what):
        with self.lock:
            self.requests += 1
            key = f"{kind}: {what}"[:200]
            self.errors[key] = self.errors.get(key, 0) + 1


def client(url, index, stop, stats):
    rng = np.random.default_rng(index)
    path = "/v2/models/fixed/infer"
    kept = None

    def expect(kind, answer, status, code):
        got_status, _, body = answer
        if got_status != status or (code is not None and gbx_code(body) != CODES[code]):
            stats.error(kind, f"{got_status} {body[:120]!r}")
        else:
            stats.ok()

    def once(raw, kind, status, code):
        c = RawConnection(url, timeout=30)
        try:
            c.send(raw)
            expect(kind, c.read_response(), status, code)
        finally:
            c.close()

    mix = ["valid", "valid", "valid", "not_json", "valid", "bad_shape", "valid", "no_model", "valid",
           "two_lengths", "valid", "obs_fold", "valid", "hang_up"]
    step = index
    while not stop.is_set():
        kind = mix[step % len(mix)]
        step += 1
        try:
            if kind == "valid":
                x = rng.standard_normal((2, 2)).astype(np.float32)
                body = json.dumps({"inputs": [json_tensor("x", x)]}).encode()
                if kept is None:
                    kept = RawConnection(url, timeout=30)
                t0 = time.monotonic()
                kept.send(post_bytes(path, body))
                status, headers, answer = kept.read_response()
                latency = time.monotonic() - t0
                if headers.get("connection") == "close":
                    kept.close()
                    kept = None
                if status != 200:
                    stats.error(kind, f"{status} {answer[:120]!r}")
                    continue
                z = np.array(json.loads(answer)["outputs"][0]["data"], np.float32).reshape(2, 2)
                if not np.array_equal(z, x + np.float32(1)):
                    stats.error(kind, "wrong values")
                    continue
                stats.ok(latency)
            elif kind == "not_json":
                once(post_bytes(path, b"{not json"), kind, 400, "SERVE_REQUEST_INVALID")
            elif kind == "bad_shape":
                body = json.dumps({"inputs": [json_tensor("x", np.zeros((3, 3), np.float32))]}).encode()
                once(post_bytes(path, body), kind, 400, "INPUT_SHAPE_MISMATCH")
            elif kind == "no_model":
                once(post_bytes("/v2/models/nosuch/infer", b"{}"), kind, 404, "SERVE_MODEL_NOT_FOUND")
            elif kind == "two_lengths":
                once(f"POST {path} HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\nContent-Length: 2\r\n\r\n{{}}".encode(),
                     kind, 400, "SERVE_HTTP_MALFORMED")
            elif kind == "obs_fold":
                once(f"POST {path} HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\nContent-Length: 2\r\n\r\n{{}}".encode(),
                     kind, 400, "SERVE_HTTP_MALFORMED")
            elif kind == "hang_up":
                c = RawConnection(url, timeout=30)
                c.send(f"POST {path} HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n{{\"inputs\"".encode())
                c.close()
                stats.ok()
        except Exception as e:  # noqa: BLE001 - every failure is counted, the soak goes on
            stats.error(kind, f"{type(e).__name__}: {e}")
            if kept is not None:
                kept.close()
                kept = None
    if kept is not None:
        kept.close()


def percentile(values, q):
    return float(np.percentile(values, q)) if values else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gearbox", required=True)
    p.add_argument("--duration", type=float, default=120, help="seconds of traffic (default 120)")
    p.add_argument("--interval", type=float, default=10, help="seconds between samples (default 10)")
    p.add_argument("--warmup", type=float, default=None, help="seconds before the RSS baseline (default: 1/4 of it)")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--rss-growth-mib", type=float, default=16, help="allowed RSS growth after warm-up (MiB)")
    a = p.parse_args()
    warmup = a.warmup if a.warmup is not None else a.duration / 4

    with tempfile.TemporaryDirectory() as data:
        subprocess.run([sys.executable, os.path.join(HERE, "..", "tests", "serve", "make_serve_models.py"), data],
                       check=True, capture_output=True)
        with Server(a.gearbox, {"fixed": os.path.join(data, "fixed", "model.onnx")},
                    "--header-timeout", "5", "--body-timeout", "5") as s:
            stats, stop = Stats(), threading.Event()
            threads = [threading.Thread(target=client, args=(s.url, i, stop, stats)) for i in range(a.clients)]
            for t in threads:
                t.start()
            samples, start, baseline = [], time.monotonic(), None
            next_sample = start + a.interval
            while True:
                now = time.monotonic()
                end = start + a.duration
                time.sleep(max(0.0, min(next_sample, end) - now))
                now = time.monotonic()
                with stats.lock:
                    lat, stats.latencies = stats.latencies, []
                    sample = {"t": round(now - start, 1), "requests": stats.requests,
                              "errors": sum(stats.errors.values()),
                              "p50_ms": round(1000 * percentile(lat, 50), 2),
                              "p99_ms": round(1000 * percentile(lat, 99), 2),
                              "rss_mib": round(rss_mib(s.proc.pid), 1)}
                samples.append(sample)
                print(json.dumps(sample), file=sys.stderr, flush=True)
                if baseline is None and now - start >= warmup:
                    baseline = sample["rss_mib"]
                if now >= end:
                    break
                next_sample += a.interval
            stop.set()
            for t in threads:
                t.join()
    growth = samples[-1]["rss_mib"] - (baseline if baseline is not None else samples[0]["rss_mib"])
    result = {"duration_s": a.duration, "clients": a.clients, "requests": stats.requests,
              "errors": sum(stats.errors.values()), "error_kinds": stats.errors,
              "rss_baseline_mib": baseline, "rss_growth_mib": round(growth, 1),
              "rss_growth_limit_mib": a.rss_growth_mib, "samples": samples}
    print(json.dumps(result, indent=1))
    failed = result["errors"] > 0 or growth > a.rss_growth_mib
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
