#!/usr/bin/python3
"""Load test of `gearbox serve` on loopback: throughput and p50/p99 latency with and without
dynamic batching, then RSS before and after a soak. Prints one JSON object on stdout.

  /usr/bin/python3 scripts/export_models.py /tmp/gbx_models --only mobilenet_v2
  /usr/bin/python3 bench/serve_load.py --gearbox build/gearbox --model-dir /tmp/gbx_models/mobilenet_v2

Closed loop: --clients threads each send one binary-tensor request (one 1x3x224x224 image)
and wait for the answer, for --duration seconds per round. The unbatched and batched servers
alternate for --rounds rounds each (the shared machine is noisy: compare them as ratios of the
same run). The soak keeps the batched server under the same load for --soak seconds and reads
gearbox_process_resident_memory_bytes from /metrics before and after.

The export has a fixed batch of 1; batching needs a symbolic first dim, so the model is
copied with its input and output batch dims renamed to "N" (MobileNetV2 has no op that fixes
the batch: its flatten is Flatten(axis=1)).
"""
import argparse
import json
import os
import sys
import threading
import time

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serve"))
from serve_util import Server, binary_request, decode_response, http, metric_samples  # noqa: E402


def dynamic_batch_copy(src, dst):
    m = onnx.load(src)
    for v in list(m.graph.input) + list(m.graph.output):
        d = v.type.tensor_type.shape.dim[0]
        d.ClearField("dim_value")
        d.dim_param = "N"
    del m.graph.value_info[:]  # intermediate shapes carry the old batch of 1; re-inferred at load
    onnx.save(m, dst)


def load(url, body, headers, clients, duration, expect):
    latencies, errors, stop = [], [0], time.time() + duration
    lock = threading.Lock()

    def client():
        while time.time() < stop:
            t0 = time.perf_counter()
            code, h, b = http("POST", url, body, headers, timeout=600)
            dt = time.perf_counter() - t0
            ok = code == 200
            if ok:
                out = decode_response(h, b)[1]["logits"]
                ok = np.array_equal(out, expect)
            with lock:
                if ok:
                    latencies.append(dt)
                else:
                    errors[0] += 1

    t0 = time.time()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    lat = np.array(latencies) * 1000
    return {"requests": len(latencies), "errors": errors[0], "wall_s": round(wall, 2),
            "throughput_rps": round(len(latencies) / wall, 3),
            "p50_ms": round(float(np.percentile(lat, 50)), 1) if len(lat) else None,
            "p99_ms": round(float(np.percentile(lat, 99)), 1) if len(lat) else None}


def scrape(server, name):
    text = http("GET", server.metrics_url + "/metrics")[2].decode()
    return metric_samples(text, name)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--model-dir", required=True, help="export of scripts/export_models.py --only mobilenet_v2")
    p.add_argument("--work", default="/tmp/gbx_serve_bench")
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--duration", type=float, default=20)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--max-batch", type=int, default=4)
    p.add_argument("--batch-timeout-us", type=int, default=20000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--soak", type=float, default=120)
    p.add_argument("--soak-server", choices=["batched", "unbatched"], default="batched")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "mobilenet_v2_dynamic.onnx")
    dynamic_batch_copy(os.path.join(a.model_dir, "model.onnx"), model)
    x = np.load(os.path.join(a.model_dir, "input.npy")).astype(np.float32)
    body, headers = binary_request({"input": x})

    common = ["--threads", str(a.threads)]
    configs = {"unbatched": common + ["--max-batch", "1"],
               "batched": common + ["--max-batch", str(a.max_batch), "--batch-timeout-us", str(a.batch_timeout_us)]}
    servers = {k: Server(a.gearbox, {"mobilenet_v2": model}, *v) for k, v in configs.items()}
    result = {"model": "mobilenet_v2", "clients": a.clients, "duration_s": a.duration, "threads": a.threads,
              "max_batch": a.max_batch, "batch_timeout_us": a.batch_timeout_us, "rounds": {}}
    try:
        # every answer must equal an unbatched single call's (also the warm-up)
        code, h, b = http("POST", servers["unbatched"].url + "/v2/models/mobilenet_v2/infer", body, headers, timeout=600)
        assert code == 200, b
        expect = decode_response(h, b)[1]["logits"]
        code, h, b = http("POST", servers["batched"].url + "/v2/models/mobilenet_v2/infer", body, headers, timeout=600)
        assert code == 200 and np.array_equal(decode_response(h, b)[1]["logits"], expect)
        for r in range(a.rounds):
            for name, s in servers.items():
                res = load(s.url + "/v2/models/mobilenet_v2/infer", body, headers, a.clients, a.duration, expect)
                result["rounds"].setdefault(name, []).append(res)
                print(f"round {r} {name}: {res}", file=sys.stderr, flush=True)
        if a.rounds > 0:
            for name, s in servers.items():
                runs = scrape(s, "gearbox_inference_batches_total")[0][1]
                samples = scrape(s, "gearbox_inference_samples_total")[0][1]
                result.setdefault("mean_batch_rows", {})[name] = round(samples / runs, 2)
            rps = {k: sum(r["throughput_rps"] for r in v) / len(v) for k, v in result["rounds"].items()}
            result["batched_vs_unbatched_throughput"] = round(rps["batched"] / rps["unbatched"], 2)

        if a.soak > 0:
            # RSS every soak/6 seconds: growth that levels off (allocator arenas, one cached
            # plan per batch size) is not a leak; steady growth to the end is.
            s = servers[a.soak_server]
            result["soak_server"] = a.soak_server
            rss = [scrape(s, "gearbox_process_resident_memory_bytes")[0][1]]
            requests = errors = 0
            for _ in range(6):
                part = load(s.url + "/v2/models/mobilenet_v2/infer", body, headers, a.clients, a.soak / 6, expect)
                requests, errors = requests + part["requests"], errors + part["errors"]
                rss.append(scrape(s, "gearbox_process_resident_memory_bytes")[0][1])
            result["soak"] = {"seconds": a.soak, "requests": requests, "errors": errors,
                              "rss_mib": [round(r / 2**20, 1) for r in rss],
                              "rss_after_over_before": round(rss[-1] / rss[0], 3),
                              "rss_after_over_mid": round(rss[-1] / rss[3], 3)}
    finally:
        for s in servers.values():
            s.stop()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
