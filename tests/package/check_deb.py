#!/usr/bin/python3
"""The .deb as a user gets it: cpack -G DEB in the build tree, then in a scratch root unpacked
with dpkg -x (no root rights, nothing installed on the machine):
  1. the package lists what it must hold (CLI, library, headers, CMake config, pkg-config file,
     Python module in dist-packages, docs, man page) and depends on Debian's libraries;
  2. tests/capi/run_examples.py builds and runs the C and C++ examples against ROOT/usr with
     find_package(gearbox) and with `pkg-config --cflags --libs gearbox`, and the network API's
     training examples (gearbox::nn) with find_package;
  3. `python3 -c "import gearbox"` with ROOT's dist-packages loads the module from ROOT (not the
     build tree) and runs a model;
  4. ROOT's gearbox binary answers --help, and the man page holds every command.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--build-dir", required=True)
ap.add_argument("--source-dir", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--cpack", default="cpack")
ap.add_argument("--cmake", default="cmake")
ap.add_argument("--generator", default="Ninja")
ap.add_argument("--version", required=True)
a = ap.parse_args()

shutil.rmtree(a.work, ignore_errors=True)
os.makedirs(a.work)
failures = []


def sh(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=400, **kw)
    if p.returncode != 0:
        print("$", " ".join(cmd), "\n", p.stdout[-4000:], p.stderr[-4000:])
        sys.exit(f"command failed with exit {p.returncode}")
    return p


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


sh([a.cpack, "-G", "DEB", "--config", os.path.join(a.build_dir, "CPackConfig.cmake")], cwd=a.build_dir)
debs = glob.glob(os.path.join(a.build_dir, "package", f"gearbox_{a.version}_*.deb"))
expect(len(debs) == 1, f"cpack wrote one gearbox_{a.version}_*.deb ({debs})")
deb = debs[0]
print(f"{deb}: {os.path.getsize(deb) / 2**20:.1f} MiB")

info = sh(["dpkg-deb", "--field", deb, "Package", "Version", "Depends"]).stdout
print(info)
expect("Package: gearbox" in info and f"Version: {a.version}" in info, "package name and version")
for dep in ["libdnnl", "libprotobuf", "python3-numpy", "libc6"]:
    expect(dep in info, f"depends on {dep}")

files = sh(["dpkg-deb", "--contents", deb]).stdout
for f in ["./usr/bin/gearbox", "./usr/lib/libgearbox.so", "./usr/include/gearbox/gearbox.h",
          "./usr/lib/libgearbox_nn.so", "./usr/include/gearbox/nn.hpp", "./usr/include/gearbox/nn_graph.hpp",
          "./usr/include/gearbox/gearbox.hpp", "./usr/lib/cmake/gearbox/gearboxConfig.cmake",
          "./usr/lib/cmake/gearbox/gearboxTargets.cmake", "./usr/lib/pkgconfig/gearbox.pc",
          "./usr/lib/python3/dist-packages/gearbox/__init__.py",
          "./usr/lib/python3/dist-packages/gearbox/capi/onnxruntime_pybind11_state.py",
          "./usr/lib/python3/dist-packages/gearbox/_C.cpython-", "./usr/share/man/man1/gearbox.1",
          "./usr/share/doc/gearbox/README.md", "./usr/share/doc/gearbox/python.md", "./usr/share/doc/gearbox/cli.md"]:
    expect(f in files, f"holds {f}")
expect("__pycache__" not in files, "holds no __pycache__")

root = os.path.join(a.work, "root")
sh(["dpkg", "-x", deb, root])
usr = os.path.join(root, "usr")

r = subprocess.run([sys.executable, os.path.join(a.source_dir, "tests", "capi", "run_examples.py"), "--prefix", usr,
                    "--examples", os.path.join(a.source_dir, "examples"), "--work", os.path.join(a.work, "examples"),
                    "--pkg-config", os.path.join(usr, "lib", "pkgconfig"), "--cmake", a.cmake,
                    "--generator", a.generator], capture_output=True, text=True, timeout=500)
print(r.stdout[-6000:], r.stderr[-3000:])
expect(r.returncode == 0 and "6 passed, 0 failed" in r.stdout,
       "C and C++ examples built with find_package(gearbox) and pkg-config against the package run, "
       "and the network API's examples train")

dist = os.path.join(usr, "lib", "python3", "dist-packages")
env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GEARBOX_PYTHON_PATH")}
env["PYTHONPATH"] = dist
probe = ("import gearbox, numpy as np, sys; print(gearbox.__file__); "
         "s = gearbox.InferenceSession(sys.argv[1]); "
         "x = np.ones((2, 3), np.float32); print(s.run(None, {'x': x, 'y': -2 * x})[0].tolist())")
model = os.path.join(a.work, "examples", "add_relu.onnx")
p = subprocess.run([sys.executable, "-c", "import gearbox"], capture_output=True, text=True, env=env, cwd=a.work)
expect(p.returncode == 0, f'python3 -c "import gearbox" with the package ({p.stderr.strip()[-300:]})')
p = subprocess.run([sys.executable, "-c", probe, model], capture_output=True, text=True, env=env, cwd=a.work)
print(p.stdout, p.stderr[-2000:])
lines = p.stdout.splitlines()
expect(p.returncode == 0 and lines and lines[0].startswith(dist), "gearbox imported from the package's dist-packages")
expect(p.returncode == 0 and lines[-1] == "[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]", "the packaged module runs a model")

h = subprocess.run([os.path.join(usr, "bin", "gearbox"), "--help"], capture_output=True, text=True)
expect(h.returncode == 0 and "compile" in h.stdout, "the packaged gearbox answers --help")
man = open(os.path.join(usr, "share", "man", "man1", "gearbox.1")).read()
for c in ["run", "compile", "profile", "bench", "smi", "doctor", "explain", "serve", "demo"]:
    expect(f'.SS "gearbox {c}"' in man, f"man page documents gearbox {c}")
print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
sys.exit(1 if failures else 0)
