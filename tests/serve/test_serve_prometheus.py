#!/usr/bin/python3
"""gearbox serve's /metrics with Debian's Prometheus: promtool accepts deploy/'s config and
alert rules; a real Prometheus on loopback scrapes a running gearbox serve and answers a
query for a gearbox metric with the value the server counted; the Grafana dashboard parses
and every metric it references is a family that /metrics exports.

Prometheus comes from scripts/install-deps.sh (package `prometheus`); this test installs nothing.

Usage: test_serve_prometheus.py --gearbox PATH --data DIR --deploy DIR --work DIR
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import unittest
import urllib.parse

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, http, json_tensor, metric_samples  # noqa: E402

ARGS = None
PROMETHEUS_DEADLINE_S = 45


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric_families(text):
    return set(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


class PrometheusTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in ("prometheus", "promtool"):
            if not shutil.which(tool):
                raise RuntimeError(f"{tool} not found: run scripts/install-deps.sh (Debian package prometheus)")
        cls.config = os.path.join(ARGS.deploy, "prometheus", "prometheus.yml")
        cls.rules = os.path.abspath(os.path.join(ARGS.deploy, "prometheus", "alerts.yml"))
        cls.dashboard = os.path.join(ARGS.deploy, "grafana", "gearbox-dashboard.json")

    def test_promtool_checks_deploy(self):
        for args in (["check", "config", self.config], ["check", "rules", self.rules]):
            r = subprocess.run(["promtool"] + args, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_prometheus_scrapes_gearbox_and_dashboard_metrics_exist(self):
        x = np.load(os.path.join(ARGS.data, "mlp", "x.npy"))
        with Server(ARGS.gearbox, {"mlp": os.path.join(ARGS.data, "mlp", "model.onnx")}) as s:
            requests = 3
            for _ in range(requests):
                code, _, body = http("POST", s.url + "/v2/models/mlp/infer", {"inputs": [json_tensor("x", x)]})
                self.assertEqual(code, 200, body)
            text = http("GET", s.metrics_url + "/metrics")[2].decode()
            self.check_dashboard(text)
            self.check_prometheus(s.metrics_url.split("//")[1], requests)

    def check_dashboard(self, metrics_text):
        with open(self.dashboard) as f:
            dash = json.load(f)
        exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
        self.assertGreater(len(exprs), 5)
        families = {name for name, _ in metric_families(metrics_text)}
        histograms = {name for name, kind in metric_families(metrics_text) if kind == "histogram"}
        referenced = set()
        for e in exprs:
            for name in re.findall(r"\bgearbox_[a-z0-9_]+", e):
                base = re.sub(r"_(bucket|sum|count)$", "", name)
                referenced.add(base if base in histograms else name)
        missing = referenced - families
        self.assertFalse(missing, f"dashboard references metrics /metrics does not export: {sorted(missing)}")
        # every metric family is also reported with samples except sensors this machine may lack
        self.assertTrue(metric_samples(metrics_text, "gearbox_process_resident_memory_bytes"))

    def check_prometheus(self, target, requests):
        work = os.path.join(ARGS.work, "prometheus")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        with open(self.config) as f:
            cfg = f.read()
        # deploy/'s own config, pointed at this server, scraping every second
        self.assertIn('"localhost:8002"', cfg)
        cfg = cfg.replace('"localhost:8002"', f'"{target}"').replace("scrape_interval: 15s", "scrape_interval: 1s")
        cfg = cfg.replace("- alerts.yml", f"- {self.rules}")
        cfg_path = os.path.join(work, "prometheus.yml")
        with open(cfg_path, "w") as f:
            f.write(cfg)
        port = free_port()
        log = open(os.path.join(work, "prometheus.log"), "w")
        prom = subprocess.Popen(["prometheus", f"--config.file={cfg_path}", f"--storage.tsdb.path={work}/data",
                                 f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
        try:
            api = f"http://127.0.0.1:{port}/api/v1"
            query = 'gearbox_inference_requests_total{model="mlp",outcome="success"}'
            deadline, value = time.time() + PROMETHEUS_DEADLINE_S, None
            while time.time() < deadline and value is None:
                time.sleep(1)
                self.assertIsNone(prom.poll(), "prometheus exited; see " + log.name)
                try:
                    code, _, body = http("GET", f"{api}/query?query={urllib.parse.quote(query)}", timeout=5)
                except OSError:
                    continue  # not listening yet
                if code == 200:
                    result = json.loads(body)["data"]["result"]
                    if result:
                        value = float(result[0]["value"][1])
                        labels = result[0]["metric"]
            self.assertIsNotNone(value, f"Prometheus had no {query} within {PROMETHEUS_DEADLINE_S}s; see {log.name}")
            self.assertEqual(value, requests)
            self.assertEqual(labels["device"], "cpu")
            self.assertEqual(labels["version"], "1")
            self.assertEqual(labels["job"], "gearbox")
            code, _, body = http("GET", f"{api}/rules")
            names = {r["name"] for g in json.loads(body)["data"]["groups"] for r in g["rules"]}
            self.assertIn("GearboxFailureRatioHigh", names)
            self.assertIn("GearboxIdleCapacity", names)
        finally:
            prom.terminate()
            try:
                prom.wait(30)
            except subprocess.TimeoutExpired:
                prom.kill()
                prom.wait()
            log.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--deploy", required=True)
    p.add_argument("--work", required=True)
    ARGS, rest = p.parse_known_args()
    os.makedirs(ARGS.work, exist_ok=True)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
