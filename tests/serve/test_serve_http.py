#!/usr/bin/python3
"""`gearbox serve`'s HTTP transport over raw loopback sockets (the bytes a proxy or an attacker
could send, which urllib would never write):

* strict framing: conflicting or malformed Content-Length, Content-Length with
  Transfer-Encoding, obs-folded header lines, HTTP/1.1 without Host and bad chunking are each
  answered 400 SERVE_HTTP_MALFORMED and the connection closed -- at once: the server runs with
  a 60 s header/body timeout, and each answer must come within the socket's 20 s timeout, so a
  server that waited for more bytes would fail here. Well-formed chunked and HTTP/1.0 requests
  still work (the checks do not reject everything).
* pipelining: three requests sent in one write get three responses, in order, each correct
  (the model adds 1; numpy gives the expected values); a request whose bytes arrive in two
  writes is answered as one.
* slow clients: a header or body that does not arrive within --header-timeout/--body-timeout
  is answered 408 SERVE_CLIENT_TOO_SLOW and the connection closed, also for a client that
  drips a byte every 0.1 s (the bound is on the whole header, not on each read).
* --max-queue: with one worker busy and the queue full, a request gets 503 SERVE_QUEUE_FULL
  with Retry-After.
* client disconnect: closing the connection of a 10^12-trip Loop request cancels its run; the
  model's one worker then answers the next request.
* drain: after SIGTERM, a request on a connection kept alive from before gets 503
  SERVE_SHUTTING_DOWN (and Connection: close); the stuck run is cancelled after the grace
  period and the server exits 0.
No latency is asserted; the socket timeouts only tell "answered" from "waited".

Usage: test_serve_http.py --gearbox PATH --data DIR (from make_serve_models.py) --work DIR
"""
import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import (RawConnection, Server, error_codes, http, json_tensor, metric_samples,  # noqa: E402
                        post_bytes)

ARGS = None
CODES = error_codes()
HUGE = 10**12
LOOP_X = np.arange(6, dtype=np.float32).reshape(2, 3)


def loop_body(trips):
    return json.dumps({"inputs": [json_tensor("M", np.array(trips, np.int64)), json_tensor("x", LOOP_X)]}).encode()


def loop_numpy(trips):
    y = LOOP_X.copy()
    for _ in range(trips):
        y = y * np.float32(0.5) + np.float32(1.0)
    return y


def metric(server, name, model):
    text = http("GET", server.metrics_url + "/metrics")[2].decode()
    return sum(v for labels, v in metric_samples(text, name) if labels.get("model") == model)


def wait_for(predicate, what, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class ServeHttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.models = {"fixed": os.path.join(ARGS.data, "fixed", "model.onnx"),
                      "loop": os.path.join(ARGS.data, "loop", "model.onnx")}

    def assert_error(self, status, headers, body, want_status, name):
        self.assertEqual(status, want_status, body)
        err = json.loads(body)["error"]
        self.assertTrue(err.startswith(f"GBX-E{CODES[name]} {name}: "), err)
        return err

    def fixed_body(self, x, rid):
        return json.dumps({"id": rid, "inputs": [json_tensor("x", x)]}).encode()

    def check_fixed_answer(self, answer, x, rid):
        status, headers, body = answer
        self.assertEqual(status, 200, body)
        out = json.loads(body)
        self.assertEqual(out["id"], rid)
        np.testing.assert_array_equal(np.array(out["outputs"][0]["data"], np.float32).reshape(2, 2),
                                      x + np.float32(1))

    def test_malformed_framing_is_rejected_at_once(self):
        path = "/v2/models/fixed/infer"
        start = f"POST {path} HTTP/1.1\r\n"
        cases = {
            "two differing Content-Length (the larger first)":
                start + "Host: a\r\nContent-Length: 10\r\nContent-Length: 5\r\n\r\nhello",
            "two differing Content-Length (the smaller first)":
                start + "Host: a\r\nContent-Length: 5\r\nContent-Length: 10\r\n\r\nhello",
            "Content-Length repeated": start + "Host: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
            "Content-Length +N": start + "Host: a\r\nContent-Length: +5\r\n\r\nhello",
            "Content-Length -N": start + "Host: a\r\nContent-Length: -5\r\n\r\nhello",
            "Content-Length non-digits": start + "Host: a\r\nContent-Length: 5x\r\n\r\nhello",
            "Content-Length hex": start + "Host: a\r\nContent-Length: 0x5\r\n\r\nhello",
            "Content-Length list": start + "Host: a\r\nContent-Length: 5, 5\r\n\r\nhello",
            "Content-Length then Transfer-Encoding":
                start + "Host: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            "Transfer-Encoding then Content-Length":
                start + "Host: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            "Transfer-Encoding not chunked": start + "Host: a\r\nTransfer-Encoding: gzip\r\n\r\nhello",
            "obs-folded header line": start + "Host: a\r\nX-Folded: one\r\n two\r\nContent-Length: 5\r\n\r\nhello",
            "obs-folded Content-Length": start + "Host: a\r\nContent-Length:\r\n 5\r\n\r\nhello",
            "HTTP/1.1 without Host": start + "Content-Length: 5\r\n\r\nhello",
            "HTTP/1.1 with two Host": start + "Host: a\r\nHost: b\r\nContent-Length: 5\r\n\r\nhello",
            "chunk size not hex": start + "Host: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
            "chunk data longer than its size":
                start + "Host: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n",
            "chunk size overflowing 64 bits":
                start + "Host: a\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\nhello\r\n0\r\n\r\n",
            "space before the colon": start + "Host: a\r\nContent-Length : 5\r\n\r\nhello",
        }
        with Server(ARGS.gearbox, self.models, "--header-timeout", "60", "--body-timeout", "60") as s:
            for name, raw in cases.items():
                with self.subTest(name):
                    c = RawConnection(s.url, timeout=20)
                    t0 = time.monotonic()
                    c.send(raw.encode())
                    status, headers, body = c.read_response()
                    print(f"  {name}: {status} after {1000 * (time.monotonic() - t0):.1f} ms", file=sys.stderr)
                    self.assert_error(status, headers, body, 400, "SERVE_HTTP_MALFORMED")
                    self.assertEqual(headers.get("connection"), "close")
                    self.assertTrue(c.closed_by_server())
                    c.close()
            # The same server still takes well-formed requests: chunked, and HTTP/1.0 without Host.
            x = np.array([[1, 2], [3, 4]], np.float32)
            body = self.fixed_body(x, "chunked")
            c = RawConnection(s.url)
            c.send((start + "Host: a\r\nTransfer-Encoding: chunked\r\n\r\n").encode() +
                   b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7]) for i in range(0, len(body), 7)) +
                   b"0\r\n\r\n")
            self.check_fixed_answer(c.read_response(), x, "chunked")
            c.send(b"GET /v2/health/live HTTP/1.0\r\n\r\n")
            status, headers, body = c.read_response()
            self.assertEqual((status, json.loads(body)), (200, {"live": True}))
            c.close()

    def test_pipelined_requests_are_answered_in_order(self):
        xs = [np.full((2, 2), k, np.float32) for k in (1.5, -2.0)]
        with Server(ARGS.gearbox, self.models) as s:
            c = RawConnection(s.url)
            c.send(post_bytes("/v2/models/fixed/infer", self.fixed_body(xs[0], "first")) +
                   post_bytes("/v2/models/fixed/infer", self.fixed_body(xs[1], "second")) +
                   b"GET /v2/health/live HTTP/1.1\r\nHost: a\r\n\r\n")
            self.check_fixed_answer(c.read_response(), xs[0], "first")
            self.check_fixed_answer(c.read_response(), xs[1], "second")
            status, _, body = c.read_response()
            self.assertEqual((status, json.loads(body)), (200, {"live": True}))
            c.close()

    def test_a_request_split_across_reads_is_one_request(self):
        # The request line in one write, the rest of the header and the body later: the server
        # once fed Beast's parser the consumed request line again and answered 400 "bad field"
        # (tests/serve/http_request_parser_test.cc splits at every byte).
        x = np.full((2, 2), 0.25, np.float32)
        wire = post_bytes("/v2/models/fixed/infer", self.fixed_body(x, "split"))
        line_end = wire.index(b"\r\n") + 2
        with Server(ARGS.gearbox, self.models) as s:
            for cut in (line_end, line_end + 3, wire.index(b"\r\n\r\n") + 4):
                c = RawConnection(s.url)
                c.send(wire[:cut])
                time.sleep(0.2)
                c.send(wire[cut:])
                self.check_fixed_answer(c.read_response(), x, "split")
                c.close()

    def test_slow_clients_are_cut_off(self):
        with Server(ARGS.gearbox, self.models, "--header-timeout", "1", "--body-timeout", "1") as s:
            def expect_408(c):
                status, headers, body = c.read_response()
                self.assert_error(status, headers, body, 408, "SERVE_CLIENT_TOO_SLOW")
                self.assertTrue(c.closed_by_server())
                c.close()

            # A header that stops half-way.
            c = RawConnection(s.url, timeout=20)
            c.send(b"POST /v2/models/fixed/infer HTTP/1.1\r\nHost: a\r\n")
            expect_408(c)
            # A header dripped a byte at a time: every read is quick, the whole is not.
            c = RawConnection(s.url, timeout=20)
            stop = threading.Event()

            def drip():
                for b in b"GET /v2/health/live HTTP/1.1\r\nHost: a\r\nX-Pad: " + b"a" * 10000:
                    if stop.is_set():
                        return
                    try:
                        c.send(bytes([b]))
                    except OSError:
                        return
                    time.sleep(0.1)

            t = threading.Thread(target=drip)
            t.start()
            try:
                expect_408(c)
            finally:
                stop.set()
                t.join()
            # A body shorter than its Content-Length.
            c = RawConnection(s.url, timeout=20)
            c.send(b"POST /v2/models/fixed/infer HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n{\"inputs\"")
            expect_408(c)
            # Well-behaved clients are served as before.
            x = np.ones((2, 2), np.float32)
            c = RawConnection(s.url)
            c.send(post_bytes("/v2/models/fixed/infer", self.fixed_body(x, "ok")))
            self.check_fixed_answer(c.read_response(), x, "ok")
            c.close()

    def test_full_queue_answers_503_with_retry_after(self):
        with Server(ARGS.gearbox, self.models, "--workers", "1", "--max-queue", "1") as s:
            running = RawConnection(s.url)
            running.send(post_bytes("/v2/models/loop/infer", loop_body(HUGE)))
            wait_for(lambda: metric(s, "gearbox_compute_busy_seconds_total", "loop") > 0, "the first request to run")
            queued = RawConnection(s.url)
            queued.send(post_bytes("/v2/models/loop/infer", loop_body(HUGE)))
            wait_for(lambda: metric(s, "gearbox_inference_queued_requests", "loop") == 1, "the second to queue")
            status, headers, body = http("POST", s.url + "/v2/models/loop/infer", loop_body(HUGE),
                                         {"Content-Type": "application/json"}, timeout=20)
            self.assert_error(status, headers, body, 503, "SERVE_QUEUE_FULL")
            self.assertEqual(headers.get("Retry-After"), "1")
            # Hanging up cancels both the running and the queued request.
            running.close()
            queued.close()
            wait_for(lambda: metric(s, "gearbox_inference_in_flight_requests", "loop") == 0, "the runs to end")
            status, headers, body = http("POST", s.url + "/v2/models/loop/infer", loop_body(4),
                                         {"Content-Type": "application/json"}, timeout=60)
            self.assertEqual(status, 200, body)

    def test_client_disconnect_cancels_the_run(self):
        with Server(ARGS.gearbox, self.models, "--workers", "1") as s:
            c = RawConnection(s.url)
            c.send(post_bytes("/v2/models/loop/infer", loop_body(HUGE)))
            wait_for(lambda: metric(s, "gearbox_compute_busy_seconds_total", "loop") > 0, "the run to start")
            c.close()
            wait_for(lambda: metric(s, "gearbox_inference_in_flight_requests", "loop") == 0, "the run to stop")
            # The one worker is free: the next request runs and is right.
            status, headers, body = http("POST", s.url + "/v2/models/loop/infer", loop_body(5),
                                         {"Content-Type": "application/json"}, timeout=60)
            self.assertEqual(status, 200, body)
            np.testing.assert_allclose(np.array(json.loads(body)["outputs"][0]["data"], np.float32).reshape(2, 3),
                                       loop_numpy(5), rtol=1e-6)
            self.assertEqual(metric(s, "gearbox_inference_requests_total", "loop"), 2)

    def test_drain_answers_kept_alive_connections_503(self):
        s = Server(ARGS.gearbox, self.models, "--grace-period", "3", "--keep-alive-timeout", "60")
        kept = RawConnection(s.url)
        kept.send(b"GET /v2/health/ready HTTP/1.1\r\nHost: a\r\n\r\n")
        self.assertEqual(kept.read_response()[0], 200)
        stuck = RawConnection(s.url, timeout=60)
        stuck.send(post_bytes("/v2/models/loop/infer", loop_body(HUGE)))
        wait_for(lambda: metric(s, "gearbox_inference_in_flight_requests", "loop") == 1, "the run to start")
        s.proc.send_signal(signal.SIGTERM)

        def refused():
            try:
                socket.create_connection(("127.0.0.1", int(s.url.rsplit(":", 1)[1])), timeout=5).close()
                return False
            except ConnectionRefusedError:
                return True

        wait_for(refused, "the listener to close")
        kept.send(post_bytes("/v2/models/fixed/infer", self.fixed_body(np.ones((2, 2), np.float32), "late")))
        status, headers, body = kept.read_response()
        self.assert_error(status, headers, body, 503, "SERVE_SHUTTING_DOWN")
        self.assertEqual(headers.get("connection"), "close")
        kept.close()
        status, headers, body = stuck.read_response()  # cancelled at the end of the grace period
        self.assert_error(status, headers, body, 503, "RUN_CANCELLED")
        stuck.close()
        self.assertEqual(s.stop(timeout=60), 0)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--work", required=True)
    ARGS, rest = p.parse_known_args()
    os.makedirs(ARGS.work, exist_ok=True)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
