# The two commands a newcomer needs (see README.md):
#   make demo   install dependencies, build, train/export/compile/run the digits CNN (gearbox demo)
#   make test   install dependencies, build, run every test (unit, ONNX conformance,
#               model parity against torch, bad input)
#   make package  the .deb: CLI, library, headers, CMake and pkg-config files, Python module,
#               docs and man page
# plus `make test-asan`: the bad-input and unit tests under AddressSanitizer and
# UndefinedBehaviorSanitizer (.ci/run runs it too), and `make test-tsan`: the concurrency test
# (8 threads x 50 runs on one Session) under ThreadSanitizer, which `make test` runs last,
# and `make fuzz`: every libFuzzer target (fuzz/) for FUZZ_SECONDS (default 30) each, or for
# FUZZ_RUNS inputs from FUZZ_SEED (CI: the same inputs on every run, so a red is reproducible).
BUILD      ?= build
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
# test-asan runs in the fuzz tree (below: one clang ASan+UBSan tree for both).
ASAN_BUILD := $(FUZZ_BUILD)
FUZZ_SECONDS ?= 30
FUZZ_RUNS    ?=
FUZZ_SEED    ?=
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all deps build demo test test-asan test-tsan fuzz clean profile-screenshot package

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Trains, exports, compiles and runs the digits CNN (gearbox demo, docs/cli.md); its .onnx and
# .gbm stay in $(BUILD)/demo.
demo: build
	./$(BUILD)/gearbox demo --output-dir $(BUILD)/demo

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-tsan

# The sanitizer tree: clang-14, ASan+UBSan, shared by test-asan and fuzz (GEARBOX_FUZZ in
# CMakeLists.txt). One tree, not a gcc ASan tree beside the fuzz tree: the two compiled the same
# library twice (cold on 2 cores, 2026-12-05: the gcc ASan tree alone built in 923 s). Code the
# fuzz targets link is at -O1 with the fuzzer's coverage, as libFuzzer's documentation builds;
# the kernels, the CLI's commands, the server and the unit tests at -O0 without it
# (gearbox_not_fuzzed). -DGEARBOX_SANITIZE=ON still builds a gcc ASan tree by hand.
$(FUZZ_BUILD)/build.ninja: | deps
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_C_FLAGS_RELEASE=-O1 -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DGEARBOX_FUZZ=ON $(CMAKE_ARGS)

test-asan: deps $(FUZZ_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target gearbox gearbox_unit_tests
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -L bad_input
	# The unit tests as $(JOBS) gtest shards, one process each (scripts/run_gtest_shards.sh says
	# why), from tests/ as ctest would run them.
	cd $(ASAN_BUILD)/tests && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  bash $(CURDIR)/scripts/run_gtest_shards.sh ./gearbox_unit_tests $(JOBS)

# libFuzzer (fuzz/, docs/testing.md "Fuzzing"): builds the fuzz targets in the sanitizer tree
# (clang-14, ASan+UBSan) and runs each for FUZZ_SECONDS from its seed corpus
# (fuzz/corpus/<target>, copied: the committed seeds are not changed); any crash, leak,
# sanitizer report or timeout fails, its reproducer in $(FUZZ_BUILD)/fuzz/crashes/. -O1, as
# libFuzzer's documentation builds. Long campaigns: bench/fuzz.sh TARGET HOURS.
fuzz: deps $(FUZZ_BUILD)/build.ninja
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets
	FUZZ_RUNS=$(FUZZ_RUNS) FUZZ_SEED=$(FUZZ_SEED) bash fuzz/run_all.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# ThreadSanitizer: builds only gearbox_concurrency_tests (tests/CMakeLists.txt) in its own tree,
# -O1 without -g like test-asan, and runs it with one OpenMP thread per session (libgomp is not
# instrumented; tests/CMakeLists.txt says why).
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 \
	  -DCMAKE_C_FLAGS_RELEASE=-O1 -DGEARBOX_TSAN=ON $(CMAKE_ARGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target gearbox_concurrency_tests gearbox_capi_tests
	cd $(TSAN_BUILD) && ctest --output-on-failure -L tsan

# gearbox profile's report.html rendered by headless chromium (tests/profile/check_render.py,
# which also checks it loads without console errors); the screenshot is saved in $(BUILD).
profile-screenshot: build
	cd $(BUILD) && ctest --output-on-failure -R '^profile\.render$$'
	@echo "screenshot: $(BUILD)/profile_report.png"

# The .deb (CPack; CMakeLists.txt lists what goes in): $(BUILD)/package/gearbox_<version>_amd64.deb.
package: build
	cd $(BUILD) && cpack -G DEB

clean:
	rm -rf $(BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
