"""Python threads and the GIL: 8 threads running one session give what sequential runs give,
and another Python thread runs while a run is in flight (the GIL is released)."""
import sys
import threading
import time

import numpy as np

import gearbox
from conftest import small_cnn_reference


def test_eight_threads_on_one_session_match_sequential_runs(models):
    s = gearbox.Session(models["small_cnn"], threads=2)
    feeds = [{"x": np.random.default_rng(100 + i).standard_normal((2, 3, 32, 32)).astype(np.float32)}
             for i in range(8)]
    sequential = [s.run(f)["probs"] for f in feeds]
    for f, got in zip(feeds, sequential):  # the model computes what numpy does
        np.testing.assert_allclose(got, small_cnn_reference(f["x"], models["small_cnn"]), rtol=1e-4, atol=1e-6)
    results = [[None] * 5 for _ in feeds]
    errors = []
    start = threading.Barrier(len(feeds))

    def worker(i):
        try:
            start.wait()
            for k in range(5):
                results[i][k] = s.run(feeds[i])["probs"]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(feeds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, runs in enumerate(results):
        for got in runs:
            np.testing.assert_array_equal(got, sequential[i])  # bit for bit


def counter_moves_during_run(run):
    """True when a Python thread executed bytecode while `run()` was inside gearbox.

    With a switch interval of 1000 s the interpreter never takes the GIL from a thread that
    runs Python code, so between reading `count` before and after the call the counting thread
    can only run if the call itself released the GIL. The counter releases the GIL by itself
    (sleep(0)) every hundred counts, so the caller gets it back when the run is over."""
    count = [0]
    stop = threading.Event()

    def counter():
        while not stop.is_set():
            count[0] += 1
            if count[0] % 100 == 0:
                time.sleep(0)

    previous = sys.getswitchinterval()
    t = threading.Thread(target=counter)
    sys.setswitchinterval(1000)
    try:
        t.start()
        moved = False
        for _ in range(20):  # a loaded machine may not schedule the counter during one run
            before = count[0]
            run()
            after = count[0]
            if after > before:
                moved = True
                break
    finally:
        stop.set()
        sys.setswitchinterval(previous)
        t.join()
    return moved


def test_gil_is_released_during_runs(models):
    x = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)
    s = gearbox.Session(models["matmul_chain"], threads=1)
    assert counter_moves_during_run(lambda: s.run({"x": x}))
    ort = gearbox.InferenceSession(models["matmul_chain"])
    assert counter_moves_during_run(lambda: ort.run(None, {"x": x}))
    assert counter_moves_during_run(lambda: s.profile({"x": x}, loop=1, warmup=0))


def test_the_check_fails_when_the_gil_is_held():
    # The control: a call that keeps the GIL shows no progress of the counter, so the test
    # above can fail.
    def held():
        sorted(range(200_000), key=lambda v: -v)  # pure Python: never gives the GIL up

    assert not counter_moves_during_run(held)
