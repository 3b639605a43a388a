#!/usr/bin/env bash
# Installs every build and test dependency of gearbox from Debian's packages.
# Idempotent: packages already present are not touched, and apt is not even
# consulted when nothing is missing, so `make test` stays fast on a warm machine.
set -euo pipefail

PKGS=(
  # build
  cmake ninja-build g++ make pkg-config
  # ONNX import
  libonnx-dev libprotobuf-dev protobuf-compiler
  # kernels (libomp-dev: LLVM's OpenMP runtime, which serves oneDNN's and gearbox's parallel
  # regions in place of libgomp; CMakeLists.txt GEARBOX_OPENMP_RUNTIME)
  libdnnl-dev libhwy-dev libomp-dev
  # compiled-model format
  libflatbuffers-dev flatbuffers-compiler
  # utilities
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # test data: the ONNX node suite and torch exports
  python3 python3-numpy python3-onnx python3-torch python3-torchvision
  # tests/frontend and examples/train_mlp: sklearn's bundled digits data set
  python3-sklearn
  # serving (prometheus: promtool and a real server for tests/serve)
  libcpp-httplib-dev prometheus
  # profiler: tests/profile/check_render.py renders report.html in headless chromium
  chromium
  # the Python module (src/python, python/gearbox): pybind11 binds it, python3-dev has Python.h,
  # python3-pytest runs tests/python
  pybind11-dev python3-dev python3-pytest
  # packaging (make package): help2man writes the man page from --help; CPack's .deb takes its
  # library dependencies from dpkg-shlibdeps (dpkg-dev), which needs file
  help2man dpkg-dev file
  # collectives (src/comm): Gloo (TCP transport; the engine under torch.distributed's Gloo
  # backend) and OpenMPI (the second backend, and mpirun)
  libgloo-dev libopenmpi-dev openmpi-bin
  # fuzzing (make fuzz, fuzz/): clang with libFuzzer and the sanitizer runtimes
  clang-14 libclang-rt-14-dev
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
