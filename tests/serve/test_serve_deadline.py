#!/usr/bin/python3
"""`gearbox serve` request deadlines and the SIGTERM grace period, over real HTTP, with a Loop
model whose trip count M is a request input: M = 10^12 runs for hours.

* --model-timeout: a request past it gets 504 RUN_DEADLINE_EXCEEDED, and the same worker then
  answers a normal request (M = 5) with y equal to numpy's.
* Gearbox-Timeout header: shortens the model's limit (never lengthens it); a malformed value is
  400 SERVE_TIMEOUT_INVALID naming the header.
* SIGTERM while a 10^12-trip request runs: after --grace-period the run is cancelled, the client
  gets 503 RUN_CANCELLED and the server exits 0.
No timing is asserted: the HTTP and process timeouts only catch a run that never stops.

Usage: test_serve_deadline.py --gearbox PATH --data DIR (from make_serve_models.py) --work DIR
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, decode_response, error_codes, http, json_tensor, metric_samples  # noqa: E402

ARGS = None
CODES = error_codes()
HUGE = 10**12


def loop_numpy(x, trips):
    y = x.copy()
    for _ in range(trips):  # float32 like the model
        y = y * np.float32(0.5) + np.float32(1.0)
    return y


class ServeDeadlineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = os.path.join(ARGS.data, "loop", "model.onnx")
        cls.x = np.arange(6, dtype=np.float32).reshape(2, 3) * np.float32(0.25) - np.float32(0.5)

    def infer(self, server, trips, headers=None, timeout=120):
        body = {"inputs": [json_tensor("M", np.array(trips, np.int64)), json_tensor("x", self.x)]}
        return http("POST", server.url + "/v2/models/loop/infer", body, headers, timeout=timeout)

    def assert_error(self, answer, status, name):
        code, _, body = answer
        self.assertEqual(code, status, body)
        err = json.loads(body)["error"]
        self.assertTrue(err.startswith(f"GBX-E{CODES[name]} {name}: "), err)

    def assert_loop_ok(self, server, trips, headers=None):
        code, headers, body = self.infer(server, trips, headers)
        self.assertEqual(code, 200, body)
        np.testing.assert_allclose(decode_response(headers, body)[1]["y"], loop_numpy(self.x, trips), rtol=1e-6)

    def test_model_timeout_answers_504_and_worker_serves_next(self):
        with Server(ARGS.gearbox, {"loop": self.model}, "--model-timeout", "loop=0.5", "--workers", "1") as s:
            self.assert_loop_ok(s, 5)
            answer = self.infer(s, HUGE)
            self.assert_error(answer, 504, "RUN_DEADLINE_EXCEEDED")
            self.assertIn("node 'loop' (Loop", json.loads(answer[2])["error"])
            self.assert_loop_ok(s, 5)  # the one worker is free again
            # a header cannot lengthen the model's limit
            self.assert_error(self.infer(s, HUGE, {"Gearbox-Timeout": "1000"}), 504, "RUN_DEADLINE_EXCEEDED")
            self.assert_loop_ok(s, 3)

    def test_header_deadline_and_bad_values(self):
        with Server(ARGS.gearbox, {"loop": self.model}, "--workers", "1") as s:
            self.assert_error(self.infer(s, HUGE, {"Gearbox-Timeout": "0.3"}), 504, "RUN_DEADLINE_EXCEEDED")
            self.assert_loop_ok(s, 5, {"Gearbox-Timeout": "60"})
            for bad in ("abc", "0", "-1", "5s", "inf", "nan", "1e999"):
                answer = self.infer(s, 5, {"Gearbox-Timeout": bad})
                self.assert_error(answer, 400, "SERVE_TIMEOUT_INVALID")
                self.assertIn("Gearbox-Timeout", json.loads(answer[2])["error"])
            self.assert_loop_ok(s, 2)

    def test_sigterm_cancels_stuck_run_after_grace_period(self):
        s = Server(ARGS.gearbox, {"loop": self.model}, "--grace-period", "1")
        result = {}

        def client():
            result["answer"] = self.infer(s, HUGE, timeout=120)

        t = threading.Thread(target=client)
        t.start()
        deadline = time.time() + 60
        while time.time() < deadline:  # wait until the server runs the request
            text = http("GET", s.metrics_url + "/metrics")[2].decode()
            if any(v >= 1 for _, v in metric_samples(text, "gearbox_inference_in_flight_requests")):
                break
            time.sleep(0.05)
        else:
            self.fail("the request never became in flight")
        s.proc.send_signal(signal.SIGTERM)
        self.assertEqual(s.stop(timeout=60), 0)
        t.join(60)
        self.assertFalse(t.is_alive())
        self.assert_error(result["answer"], 503, "RUN_CANCELLED")

    def test_bad_timeout_flags(self):
        for args in (["--model-timeout", "nosuch=1"], ["--model-timeout", "loop=abc"], ["--model-timeout", "loop"],
                     ["--request-timeout", "-1"], ["--grace-period", "-2"]):
            r = subprocess.run([ARGS.gearbox, "serve", "--port", "0", "--metrics-port", "-1",
                                "--model", "loop=" + self.model] + args, capture_output=True, text=True, timeout=60)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertIn(f"GBX-E{CODES['USAGE']} USAGE:", r.stderr, args)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--work", required=True)
    ARGS, rest = p.parse_known_args()
    os.makedirs(ARGS.work, exist_ok=True)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
