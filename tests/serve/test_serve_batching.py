#!/usr/bin/python3
"""Dynamic batching under 16 concurrent clients gives the outputs of sequential, unbatched
calls: each client's rows come back to that client, unchanged by the rows merged with them.

Usage: test_serve_batching.py --gearbox PATH --data DIR (from make_serve_models.py) --work DIR
"""
import argparse
import os
import sys
import threading
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, binary_request, decode_response, http, json_tensor, metric_samples  # noqa: E402

ARGS = None
CLIENTS = 16


def concurrent_calls(url, inputs, binary, model="mlp"):
    answers = [None] * len(inputs)
    start = threading.Barrier(len(inputs))

    def client(i):
        if binary:
            body, headers = binary_request({"x": inputs[i]})
        else:
            body, headers = {"inputs": [json_tensor("x", inputs[i])]}, None
        start.wait()
        answers[i] = http("POST", url + "/v2/models/" + model + "/infer", body, headers)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return answers


class BatchingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        rng = np.random.default_rng(3)
        cls.model = {"mlp": os.path.join(ARGS.data, "mlp", "model.onnx")}
        # rows per client: 1 for the first round, 1-3 for the mixed round
        cls.single = [rng.standard_normal((1, 4)).astype(np.float32) for _ in range(CLIENTS)]
        cls.mixed = [rng.standard_normal((1 + i % 3, 4)).astype(np.float32) for i in range(CLIENTS)]
        cls.reference = {}
        with Server(ARGS.gearbox, cls.model) as s:  # no batching: one model run per request
            for key, inputs in (("single", cls.single), ("mixed", cls.mixed)):
                outs = []
                for x in inputs:
                    code, h, b = http("POST", s.url + "/v2/models/mlp/infer", {"inputs": [json_tensor("x", x)]})
                    assert code == 200, b
                    outs.append(decode_response(h, b)[1])
                cls.reference[key] = outs

    def check(self, answers, key):
        for i, (code, h, b) in enumerate(answers):
            self.assertEqual(code, 200, b)
            out = decode_response(h, b)[1]
            for name in ("y", "h"):
                self.assertEqual(out[name].shape, self.reference[key][i][name].shape)
                np.testing.assert_array_equal(out[name], self.reference[key][i][name], f"client {i} output {name}")

    def test_sixteen_single_row_clients_form_one_batch(self):
        # max_batch 16 with a long timeout: the batch closes when all 16 rows are in, so the
        # test knows a merge happened without depending on timing.
        with Server(ARGS.gearbox, self.model, "--max-batch", "16", "--batch-timeout-us", "30000000") as s:
            self.check(concurrent_calls(s.url, self.single, binary=False), "single")
            text = http("GET", s.metrics_url + "/metrics")[2].decode()
            runs = metric_samples(text, "gearbox_inference_batches_total")[0][1]
            self.assertEqual(runs, 1, "16 rows, max batch 16: one merged model run")
            sizes = {l["le"]: v for l, v in metric_samples(text, "gearbox_inference_batch_size_bucket")}
            self.assertEqual(sizes["8"], 0)
            self.assertEqual(sizes["16"], 1)

    def test_mixed_rows_json_and_binary(self):
        with Server(ARGS.gearbox, self.model, "--max-batch", "8", "--batch-timeout-us", "20000") as s:
            self.check(concurrent_calls(s.url, self.mixed, binary=False), "mixed")
            self.check(concurrent_calls(s.url, self.mixed, binary=True), "mixed")
            text = http("GET", s.metrics_url + "/metrics")[2].decode()
            samples = metric_samples(text, "gearbox_inference_samples_total")[0][1]
            self.assertEqual(samples, 2 * sum(x.shape[0] for x in self.mixed))

    def test_fixed_batch_model_is_not_batched(self):
        fixed = {"fixed": os.path.join(ARGS.data, "fixed", "model.onnx")}
        with Server(ARGS.gearbox, fixed, "--max-batch", "8") as s:
            meta = http("GET", s.url + "/v2/models/fixed")[2]
            self.assertIn(b'"dynamic_batching":false', meta)
            x = np.arange(4, dtype=np.float32).reshape(2, 2)
            code, h, b = http("POST", s.url + "/v2/models/fixed/infer", {"inputs": [json_tensor("x", x)]})
            self.assertEqual(code, 200, b)
            np.testing.assert_array_equal(decode_response(h, b)[1]["z"], x + 1)

    def test_unbatched_output_turns_batching_off_once(self):
        # s = column sums of x: the symbolic first dim makes the model look batchable, but a
        # merged run's output has no batch dim. The first batch falls back to one run per
        # request; from then on batching is off, so later requests are not computed twice.
        colsum = {"colsum": os.path.join(ARGS.data, "colsum", "model.onnx")}
        with Server(ARGS.gearbox, colsum, "--max-batch", "16", "--batch-timeout-us", "30000000") as s:
            self.assertIn(b'"dynamic_batching":true', http("GET", s.url + "/v2/models/colsum")[2])
            for round_ in range(2):
                answers = concurrent_calls(s.url, self.single, binary=False, model="colsum")
                for i, (code, h, b) in enumerate(answers):
                    self.assertEqual(code, 200, b)
                    out = decode_response(h, b)[1]["s"]
                    self.assertEqual(out.shape, (4,))
                    np.testing.assert_allclose(out, self.single[i].sum(axis=0), rtol=1e-6,
                                               err_msg=f"round {round_} client {i}")
            self.assertIn(b'"dynamic_batching":false', http("GET", s.url + "/v2/models/colsum")[2])
            text = http("GET", s.metrics_url + "/metrics")[2].decode()
            runs = metric_samples(text, "gearbox_inference_batches_total")[0][1]
            # round 1: one merged run of 16 rows, then 16 single runs; round 2: 16 single runs
            # (34 if the second round merged and fell back again)
            self.assertEqual(runs, 1 + CLIENTS + CLIENTS)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--gearbox", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--work", required=True)
    ARGS, rest = p.parse_known_args()
    os.makedirs(ARGS.work, exist_ok=True)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
