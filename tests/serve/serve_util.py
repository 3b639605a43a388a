"""Helpers for the `gearbox serve` tests: start the real server binary on free loopback ports,
talk KServe v2 to it over real HTTP (urllib), and convert numpy arrays to and from the
protocol's JSON and binary tensors."""
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ERRORS_DEF = os.path.join(HERE, "..", "..", "src", "base", "errors.def")

KSERVE = {  # numpy dtype -> KServe v2 datatype
    np.dtype(np.bool_): "BOOL", np.dtype(np.uint8): "UINT8", np.dtype(np.uint16): "UINT16",
    np.dtype(np.uint32): "UINT32", np.dtype(np.uint64): "UINT64", np.dtype(np.int8): "INT8",
    np.dtype(np.int16): "INT16", np.dtype(np.int32): "INT32", np.dtype(np.int64): "INT64",
    np.dtype(np.float16): "FP16", np.dtype(np.float32): "FP32", np.dtype(np.float64): "FP64",
}
NUMPY = {v: k for k, v in KSERVE.items()}


def error_codes(path=ERRORS_DEF):
    with open(path) as f:
        return {m.group(2): int(m.group(1))
                for m in re.finditer(r"GBX_ERROR\(\s*(\d+)\s*,\s*([A-Z0-9_]+)\s*,", f.read())}


class Server:
    """A running `gearbox serve`; use as a context manager (SIGTERM + wait on exit)."""

    def __init__(self, gearbox, models, *args, timeout=120, env=None):
        cmd = [gearbox, "serve", "--port", "0", "--metrics-port", "0"]
        for name, path in models.items():
            cmd += ["--model", f"{name}={path}"]
        cmd += list(args)
        print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        line = self._read_line(timeout)
        m = re.search(r"listening on (http://[^:]+:(\d+))(?:, metrics on (http://[^/]+)/metrics)?", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"gearbox serve did not start: {line!r} (exit {self.proc.poll()})")
        self.url = m.group(1)
        self.metrics_url = m.group(3)

    def _read_line(self, timeout):
        end = time.time() + timeout
        while time.time() < end:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if r:
                return self.proc.stdout.readline()
            if self.proc.poll() is not None:
                return ""
        return ""

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"gearbox serve did not exit within {timeout}s of signal {sig}")
        finally:
            self.proc.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        rc = self.stop()
        if exc[0] is None:
            assert rc == 0, f"gearbox serve exited with {rc} after SIGTERM"


def http(method, url, body=None, headers=None, timeout=60):
    """Returns (status, headers, body bytes); 4xx/5xx are answers, not exceptions."""
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", **(headers or {})}
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def json_tensor(name, a):
    data = a.flatten().tolist()  # bools stay bools, float16 becomes exact Python floats
    return {"name": name, "shape": list(a.shape), "datatype": KSERVE[a.dtype], "data": data}


def binary_request(tensors, outputs=None, binary_outputs=True):
    """A binary-data-extension request: (body, headers). tensors: {name: array}."""
    inputs, blobs = [], []
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        inputs.append({"name": name, "shape": list(a.shape), "datatype": KSERVE[a.dtype],
                       "parameters": {"binary_data_size": len(raw)}})
        blobs.append(raw)
    head = {"inputs": inputs}
    if outputs is not None:
        head["outputs"] = [{"name": o, "parameters": {"binary_data": binary_outputs}} for o in outputs]
    elif binary_outputs:
        head["parameters"] = {"binary_data_output": True}
    head_bytes = json.dumps(head).encode()
    return head_bytes + b"".join(blobs), {"Inference-Header-Content-Length": str(len(head_bytes)),
                                           "Content-Type": "application/octet-stream"}


def decode_response(headers, body):
    """{output name: numpy array} from a JSON or binary infer response."""
    n = headers.get("Inference-Header-Content-Length")
    head = json.loads(body[: int(n)] if n is not None else body)
    out, offset = {}, int(n) if n is not None else 0
    for o in head["outputs"]:
        dt = NUMPY[o["datatype"]]
        size = (o.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            a = np.frombuffer(body[offset: offset + size], dtype=dt).reshape(o["shape"])
            offset += size
        else:
            a = np.array(o["data"], dtype=dt).reshape(o["shape"])
        out[o["name"]] = a
    return head, out


def gearbox_run(gearbox, model, inputs, out_dir):
    """Outputs of `gearbox run` on the same model and inputs: {name: array}."""
    os.makedirs(out_dir, exist_ok=True)
    cmd = [gearbox, "run", model, "--output-dir", out_dir, "--json"]
    for name, path in inputs.items():
        cmd += ["--input", f"{name}={path}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"gearbox run failed: {r.stderr}"
    report = json.loads(r.stdout)
    return {o["name"]: np.load(o["file"]) for o in report["outputs"]}


def metric_samples(text, name):
    """[(labels dict, value)] of one metric in a Prometheus text exposition."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if m and m.group(1) == name:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
            out.append((labels, float(m.group(4))))
    return out


class RawConnection:
    """One TCP connection to the server, written to byte for byte (malformed framing,
    pipelining, slow clients) and read back as HTTP/1.1 responses."""

    def __init__(self, url, timeout=30):
        import socket
        host, port = url.split("//", 1)[1].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("the server closed the connection")
        self.buf += chunk

    def read_response(self):
        """(status, {lowercased header: value}, body bytes) of the next response."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, headers, body

    def closed_by_server(self):
        """True when the server has closed the connection (reads EOF, or a reset)."""
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()


def post_bytes(path, body, content_type="application/json", extra=""):
    """A well-formed HTTP/1.1 POST as bytes."""
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body
