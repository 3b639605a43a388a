"""tests/python/ort_api_script.py, written for ONNX Runtime's API, runs unchanged on gearbox."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_onnxruntime_script_runs_on_gearbox(models):
    r = subprocess.run([sys.executable, os.path.join(HERE, "ort_api_script.py"), models["add_relu"],
                        "--runtime", "gearbox"], capture_output=True, text=True, timeout=120)
    print(r.stdout, r.stderr)
    assert r.returncode == 0
    assert r.stdout.rstrip().endswith("ALL OK")
