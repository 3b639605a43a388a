#!/usr/bin/python3
"""`gearbox serve` over real HTTP: every KServe v2 endpoint, JSON and binary inference against
`gearbox run` on the same model and inputs (and numpy for the MLP), every bad request with its
status and catalogue code (the server keeps serving after each), bearer-token authentication,
and a graceful SIGTERM that drains a request in flight and exits 0.

Usage: test_serve_api.py --gearbox PATH --data DIR (from make_serve_models.py) --work DIR
"""
import argparse
import json
import os
import signal
import sys
import threading
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import (KSERVE, Server, binary_request, decode_response, error_codes,  # noqa: E402
                        gearbox_run, http, json_tensor, metric_samples)

ARGS = None
CODES = error_codes()


def mlp_numpy(x):
    import onnx
    from onnx import numpy_helper
    m = onnx.load(os.path.join(ARGS.data, "mlp", "model.onnx"))
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    h = np.maximum(x @ w["w1"] + w["b1"], 0)
    return h @ w["w2"] + w["b2"], h


class ServeApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.models = {"mlp": os.path.join(ARGS.data, "mlp", "model.onnx"),
                      "dtypes": os.path.join(ARGS.data, "dtypes", "model.onnx")}
        cls.server = Server(ARGS.gearbox, cls.models, "--max-request-bytes", "65536")
        cls.x = np.load(os.path.join(ARGS.data, "mlp", "x.npy"))
        cls.run_mlp = gearbox_run(ARGS.gearbox, cls.models["mlp"], {"x": os.path.join(ARGS.data, "mlp", "x.npy")},
                                  os.path.join(ARGS.work, "run_mlp"))
        cls.dtype_inputs = {f"in_{t}": os.path.join(ARGS.data, "dtypes", f"in_{t}.npy")
                            for t in ("fp32", "fp64", "fp16", "int8", "int16", "int32", "int64", "uint8", "uint16",
                                      "uint32", "uint64", "bool")}
        cls.run_dtypes = gearbox_run(ARGS.gearbox, cls.models["dtypes"], cls.dtype_inputs,
                                     os.path.join(ARGS.work, "run_dtypes"))

    @classmethod
    def tearDownClass(cls):
        rc = cls.server.stop()
        assert rc == 0, f"server exit status {rc} after SIGTERM"

    def url(self, path):
        return self.server.url + path

    def infer_json(self, model, body, headers=None):
        return http("POST", self.url(f"/v2/models/{model}/infer"), body, headers)

    def assert_error(self, answer, status, name):
        code, _, body = answer
        self.assertEqual(code, status, body)
        err = json.loads(body)["error"]
        self.assertTrue(err.startswith(f"GBX-E{CODES[name]} {name}: "), err)
        # the server keeps serving: health and a good inference still answer
        self.assertEqual(http("GET", self.url("/v2/health/live"))[0], 200)
        self.check_mlp_json()

    def check_mlp_json(self):
        code, headers, body = self.infer_json("mlp", {"inputs": [json_tensor("x", self.x)]})
        self.assertEqual(code, 200, body)
        _, out = decode_response(headers, body)
        np.testing.assert_array_equal(out["y"], self.run_mlp["y"])
        return out

    # ---- endpoints -------------------------------------------------------------------
    def test_health_and_server_metadata(self):
        code, _, body = http("GET", self.url("/v2/health/live"))
        self.assertEqual(code, 200)
        self.assertEqual(http("GET", self.url("/v2/health/ready"))[0], 200)
        code, _, body = http("GET", self.url("/v2"))
        self.assertEqual(code, 200)
        meta = json.loads(body)
        self.assertEqual(meta["name"], "gearbox")
        self.assertIn("binary_tensor_data", meta["extensions"])

    def test_model_metadata_and_ready(self):
        for path in ("/v2/models/mlp", "/v2/models/mlp/versions/1"):
            code, _, body = http("GET", self.url(path))
            self.assertEqual(code, 200, body)
            meta = json.loads(body)
            self.assertEqual(meta["name"], "mlp")
            self.assertEqual(meta["versions"], ["1"])
            self.assertEqual(meta["inputs"], [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}])
            self.assertEqual([o["name"] for o in meta["outputs"]], ["y", "h"])
            self.assertEqual(meta["outputs"][0]["shape"], [-1, 3])
        for path in ("/v2/models/mlp/ready", "/v2/models/mlp/versions/1/ready"):
            code, _, body = http("GET", self.url(path))
            self.assertEqual(code, 200, body)
            self.assertTrue(json.loads(body)["ready"])
        meta = json.loads(http("GET", self.url("/v2/models/dtypes"))[2])
        self.assertEqual({i["name"]: i["datatype"] for i in meta["inputs"]},
                         {f"in_{t}": t.upper() for t in
                          ("fp32", "fp64", "fp16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                           "uint64", "bool")})

    # ---- inference -------------------------------------------------------------------
    def test_json_inference_matches_gearbox_run(self):
        code, headers, body = self.infer_json("mlp", {"id": "req-7", "inputs": [json_tensor("x", self.x)]})
        self.assertEqual(code, 200, body)
        head, out = decode_response(headers, body)
        self.assertEqual(head["id"], "req-7")
        self.assertEqual(head["model_name"], "mlp")
        self.assertEqual(head["model_version"], "1")
        self.assertEqual(set(out), {"y", "h"})
        for name in ("y", "h"):
            self.assertEqual(out[name].dtype, np.float32)
            np.testing.assert_array_equal(out[name], self.run_mlp[name])
        y_ref, h_ref = mlp_numpy(self.x.astype(np.float64))
        np.testing.assert_allclose(out["y"], y_ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out["h"], h_ref, rtol=1e-5, atol=1e-5)

    def test_binary_inference_matches_gearbox_run(self):
        body, headers = binary_request({"x": self.x})
        code, rh, rb = http("POST", self.url("/v2/models/mlp/infer"), body, headers)
        self.assertEqual(code, 200, rb)
        self.assertIsNotNone(rh.get("Inference-Header-Content-Length"))
        head, out = decode_response(rh, rb)
        self.assertTrue(all("data" not in o for o in head["outputs"]))
        for name in ("y", "h"):
            np.testing.assert_array_equal(out[name], self.run_mlp[name])

    def test_requested_outputs(self):
        # one output, as JSON, from a binary request
        body, headers = binary_request({"x": self.x}, outputs=["h"], binary_outputs=False)
        code, rh, rb = http("POST", self.url("/v2/models/mlp/infer"), body, headers)
        self.assertEqual(code, 200, rb)
        head, out = decode_response(rh, rb)
        self.assertEqual(list(out), ["h"])
        self.assertIn("data", head["outputs"][0])
        np.testing.assert_array_equal(out["h"], self.run_mlp["h"])
        # mixed: y binary, h JSON, in the order asked
        req = {"inputs": [json_tensor("x", self.x)],
               "outputs": [{"name": "y", "parameters": {"binary_data": True}}, {"name": "h"}]}
        code, rh, rb = self.infer_json("mlp", req)
        self.assertEqual(code, 200, rb)
        head, out = decode_response(rh, rb)
        self.assertEqual([o["name"] for o in head["outputs"]], ["y", "h"])
        self.assertIn("binary_data_size", head["outputs"][0]["parameters"])
        np.testing.assert_array_equal(out["y"], self.run_mlp["y"])
        np.testing.assert_array_equal(out["h"], self.run_mlp["h"])

    def test_every_datatype_json_and_binary(self):
        arrays = {n: np.load(p) for n, p in self.dtype_inputs.items()}
        code, rh, rb = self.infer_json("dtypes", {"inputs": [json_tensor(n, a) for n, a in arrays.items()]})
        self.assertEqual(code, 200, rb)
        _, out_json = decode_response(rh, rb)
        body, headers = binary_request(arrays)
        code, rh, rb = http("POST", self.url("/v2/models/dtypes/infer"), body, headers)
        self.assertEqual(code, 200, rb)
        _, out_bin = decode_response(rh, rb)
        for n, a in arrays.items():
            o = "out_" + n[3:]
            for out in (out_json, out_bin):
                self.assertEqual(out[o].dtype, a.dtype, o)
                np.testing.assert_array_equal(out[o], self.run_dtypes[o], o)
                np.testing.assert_array_equal(out[o], a, o)  # Identity: the input itself

    def test_nested_json_data(self):
        t = json_tensor("x", self.x)
        t["data"] = self.x.tolist()  # [[...], [...]]: row-major nesting is accepted too
        code, rh, rb = self.infer_json("mlp", {"inputs": [t]})
        self.assertEqual(code, 200, rb)
        np.testing.assert_array_equal(decode_response(rh, rb)[1]["y"], self.run_mlp["y"])

    # ---- bad requests ----------------------------------------------------------------
    def test_malformed_json(self):
        self.assert_error(self.infer_json("mlp", b"{\"inputs\": [", {"Content-Type": "application/json"}), 400,
                          "SERVE_REQUEST_INVALID")
        self.assert_error(self.infer_json("mlp", {"inputs": 3}), 400, "SERVE_REQUEST_INVALID")
        self.assert_error(self.infer_json("mlp", {"inputs": [{"name": "x", "datatype": "FP32", "data": [1]}]}), 400,
                          "SERVE_REQUEST_INVALID")

    def test_wrong_datatype(self):
        t = json_tensor("x", self.x.astype(np.int32))
        self.assert_error(self.infer_json("mlp", {"inputs": [t]}), 400, "INPUT_DTYPE_MISMATCH")
        t = json_tensor("x", self.x)
        t["datatype"] = "FP99"
        self.assert_error(self.infer_json("mlp", {"inputs": [t]}), 400, "SERVE_DATATYPE_UNKNOWN")
        t = json_tensor("in_int8", np.zeros((2, 3), np.int8))
        t["data"][0] = 300  # out of INT8's range
        self.assert_error(self.infer_json("dtypes", {"inputs": [t]}), 400, "SERVE_TENSOR_DATA_INVALID")

    def test_shape_data_length_mismatch(self):
        t = json_tensor("x", self.x)
        t["data"] = t["data"][:-1]
        self.assert_error(self.infer_json("mlp", {"inputs": [t]}), 400, "SERVE_TENSOR_DATA_INVALID")
        t = json_tensor("x", np.zeros((2, 5), np.float32))  # consistent, but the model wants [N,4]
        self.assert_error(self.infer_json("mlp", {"inputs": [t]}), 400, "INPUT_SHAPE_MISMATCH")
        self.assert_error(self.infer_json("mlp", {"inputs": []}), 400, "INPUT_MISSING")
        t = json_tensor("nosuch", self.x)
        self.assert_error(self.infer_json("mlp", {"inputs": [json_tensor("x", self.x), t]}), 400, "INPUT_UNKNOWN")

    def test_binary_size_mismatch(self):
        body, headers = binary_request({"x": self.x})
        # binary_data_size says 4 bytes fewer than the tensor needs
        head_len = int(headers["Inference-Header-Content-Length"])
        head = json.loads(body[:head_len])
        head["inputs"][0]["parameters"]["binary_data_size"] -= 4
        hb = json.dumps(head).encode()
        bad = hb + body[head_len:]
        self.assert_error(http("POST", self.url("/v2/models/mlp/infer"), bad,
                               {**headers, "Inference-Header-Content-Length": str(len(hb))}),
                          400, "SERVE_BINARY_DATA_INVALID")
        # the body ends before the tensor does
        self.assert_error(http("POST", self.url("/v2/models/mlp/infer"), body[:-4], headers), 400,
                          "SERVE_BINARY_DATA_INVALID")
        # the header length points past the body
        self.assert_error(http("POST", self.url("/v2/models/mlp/infer"), body,
                               {**headers, "Inference-Header-Content-Length": str(len(body) + 10)}),
                          400, "SERVE_BINARY_DATA_INVALID")

    def test_oversized_body(self):
        big = json_tensor("x", np.zeros((3000, 4), np.float32))
        big["data"] = [0.123456789] * 12000  # ~150 KB of JSON, over the server's 64 KiB limit
        body = json.dumps({"inputs": [big]}).encode()
        self.assertGreater(len(body), 65536)
        self.assert_error(self.infer_json("mlp", body, {"Content-Type": "application/json"}), 413,
                          "SERVE_REQUEST_TOO_LARGE")

    def test_unknown_model_version_route_output(self):
        self.assert_error(self.infer_json("nosuch", {"inputs": [json_tensor("x", self.x)]}), 404,
                          "SERVE_MODEL_NOT_FOUND")
        self.assert_error(http("GET", self.url("/v2/models/nosuch")), 404, "SERVE_MODEL_NOT_FOUND")
        self.assert_error(http("POST", self.url("/v2/models/mlp/versions/7/infer"),
                               {"inputs": [json_tensor("x", self.x)]}), 404, "SERVE_MODEL_VERSION_NOT_FOUND")
        self.assert_error(http("GET", self.url("/v2/models/mlp/versions/7/ready")), 404,
                          "SERVE_MODEL_VERSION_NOT_FOUND")
        self.assert_error(http("GET", self.url("/v3/nothing")), 404, "SERVE_ROUTE_NOT_FOUND")
        self.assert_error(self.infer_json("mlp", {"inputs": [json_tensor("x", self.x)], "outputs": [{"name": "z"}]}),
                          400, "SERVE_OUTPUT_UNKNOWN")

    def test_failures_are_counted(self):
        text = http("GET", self.server.metrics_url + "/metrics")[2].decode()
        before = {l["outcome"]: v for l, v in metric_samples(text, "gearbox_inference_requests_total")
                  if l["model"] == "mlp"}
        self.infer_json("mlp", {"inputs": 1})
        self.check_mlp_json()
        text = http("GET", self.server.metrics_url + "/metrics")[2].decode()
        after = {l["outcome"]: v for l, v in metric_samples(text, "gearbox_inference_requests_total")
                 if l["model"] == "mlp"}
        self.assertEqual(after["failure"], before["failure"] + 1)
        self.assertEqual(after["success"], before["success"] + 1)


class ServePoolMetricsTest(unittest.TestCase):
    """The device pool gauges describe the models' memory: sessions allocate from the pool."""

    def test_device_pool_metrics_show_model_memory(self):
        capacity = 64 << 20
        env = dict(os.environ, GEARBOX_DEVICE_MEMORY="64M")
        x = np.load(os.path.join(ARGS.data, "mlp", "x.npy"))
        with Server(ARGS.gearbox, {"mlp": os.path.join(ARGS.data, "mlp", "model.onnx")}, env=env) as s:
            def pool():
                text = http("GET", s.metrics_url + "/metrics")[2].decode()
                got = {}
                for name in ("capacity_bytes", "used_bytes", "free_bytes", "largest_free_block_bytes",
                             "used_span_bytes", "fragmentation_ratio", "peak_used_bytes",
                             "allocation_failures_total"):
                    samples = metric_samples(text, "gearbox_device_memory_pool_" + name)
                    self.assertEqual([labels["device"] for labels, _ in samples], ["cpu:0"], name)
                    got[name] = samples[0][1]
                return got

            before = pool()
            self.assertEqual(before["capacity_bytes"], capacity)
            self.assertEqual(before["used_bytes"], 0, "nothing has run yet")
            self.assertEqual(before["peak_used_bytes"], 0)
            self.assertEqual(before["free_bytes"], capacity)

            code, headers, body = http("POST", s.url + "/v2/models/mlp/infer", {"inputs": [json_tensor("x", x)]})
            self.assertEqual(code, 200, body)
            _, out = decode_response(headers, body)
            after = pool()
            # Both outputs were in the pool at once when the run returned them; each takes at
            # least its own bytes.
            self.assertGreaterEqual(after["peak_used_bytes"], out["y"].nbytes + out["h"].nbytes)
            # The prepared plan keeps its buffers cached for the next request of this shape.
            self.assertGreater(after["used_bytes"], 0)
            self.assertLessEqual(after["used_bytes"], after["peak_used_bytes"])
            self.assertEqual(after["used_bytes"] + after["free_bytes"], capacity)
            self.assertLessEqual(after["largest_free_block_bytes"], after["free_bytes"])
            # Fragmentation counts only the holes among the live blocks (the used span): a few
            # buffers in a 64 MiB pool read far below the former 1 - largest free / free.
            self.assertGreaterEqual(after["used_span_bytes"], after["used_bytes"])
            self.assertLessEqual(after["used_span_bytes"], capacity)
            self.assertGreaterEqual(after["fragmentation_ratio"], 0)
            self.assertLess(after["fragmentation_ratio"], 1)
            if after["used_span_bytes"] == after["used_bytes"]:
                self.assertEqual(after["fragmentation_ratio"], 0, "no hole in the span")
            self.assertEqual(before["fragmentation_ratio"], 0, "nothing live")
            self.assertEqual(after["allocation_failures_total"], 0)


class ServeAuthTest(unittest.TestCase):
    def test_bearer_token(self):
        token_file = os.path.join(ARGS.work, "token")
        with open(token_file, "w") as f:
            f.write("s3cret-token\n")
        x = np.load(os.path.join(ARGS.data, "mlp", "x.npy"))
        req = {"inputs": [json_tensor("x", x)]}
        with Server(ARGS.gearbox, {"mlp": os.path.join(ARGS.data, "mlp", "model.onnx")},
                    "--auth-token-file", token_file) as s:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
                code, _, body = http("POST", s.url + "/v2/models/mlp/infer", req, headers)
                self.assertEqual(code, 401, body)
                err = json.loads(body)["error"]
                self.assertTrue(err.startswith(f"GBX-E{CODES['SERVE_UNAUTHORIZED']} SERVE_UNAUTHORIZED: "), err)
            self.assertEqual(http("GET", s.url + "/v2/models/mlp")[0], 401)
            # probes need no token
            self.assertEqual(http("GET", s.url + "/v2/health/live")[0], 200)
            code, _, body = http("POST", s.url + "/v2/models/mlp/infer", req,
                                 {"Authorization": "Bearer s3cret-token"})
            self.assertEqual(code, 200, body)


class ServeShutdownTest(unittest.TestCase):
    def test_sigterm_drains_in_flight_request(self):
        # A batch timeout of 3 s keeps a lone request queued, so SIGTERM lands while it is in flight.
        x = np.load(os.path.join(ARGS.data, "mlp", "x.npy"))
        s = Server(ARGS.gearbox, {"mlp": os.path.join(ARGS.data, "mlp", "model.onnx")},
                   "--max-batch", "64", "--batch-timeout-us", "3000000")
        result = {}

        def client():
            result["answer"] = http("POST", s.url + "/v2/models/mlp/infer", {"inputs": [json_tensor("x", x)]})

        t = threading.Thread(target=client)
        t.start()
        deadline = time.time() + 60
        while time.time() < deadline:  # wait until the server holds the request
            text = http("GET", s.metrics_url + "/metrics")[2].decode()
            if any(v >= 1 for _, v in metric_samples(text, "gearbox_inference_in_flight_requests")):
                break
            time.sleep(0.05)
        else:
            self.fail("the request never became in flight")
        s.proc.send_signal(signal.SIGTERM)
        t.join(120)
        self.assertEqual(s.stop(), 0)
        code, headers, body = result["answer"]
        self.assertEqual(code, 200, body)
        y_ref, _ = mlp_numpy(x.astype(np.float64))
        np.testing.assert_allclose(decode_response(headers, body)[1]["y"], y_ref, rtol=1e-5, atol=1e-5)
        # and it no longer accepts connections
        with self.assertRaises(OSError):
            http("GET", s.url + "/v2/health/live", timeout=5)

    def test_bad_command_lines(self):
        import subprocess
        model = os.path.join(ARGS.data, "mlp", "model.onnx")
        for args, name in ((["--model", "mlp"], "USAGE"),
                           (["--model", "m=" + os.path.join(ARGS.data, "nosuch.onnx")], "FILE_NOT_FOUND"),
                           (["--model", "m=" + model, "--auth-token-file", "/nonexistent/token"], "FILE_NOT_FOUND")):
            r = subprocess.run([ARGS.gearbox, "serve", "--port", "0", "--metrics-port", "-1"] + args,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 1 if name != "USAGE" else r.returncode, r.stderr)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(f"GBX-E{CODES[name]} {name}:", r.stderr)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--work", required=True)
    ARGS, rest = p.parse_known_args()
    os.makedirs(ARGS.work, exist_ok=True)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
