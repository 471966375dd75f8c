# Everyday commands. `make test` is what CI runs (.ci/run).
#
#   make deps      install missing system and Python packages (into .venv
#                  unless a virtual environment is active; see PY below)
#   make venv      make the project environment .venv, nothing else
#   make build     configure and build the C++ release tree (build/release)
#   make python    build and install the Python package with its extension
#   make demo      the image-loading demo (dataset made on first run)
#   make demo-cpp  the C++ example pipeline
#   make test      C++ tests, the engine tests under TSan, then Python tests
#   make tsan      engine tests under ThreadSanitizer (build/tsan)
#   make asan      C++ tests and fuzzer build under ASan+UBSan (build/asan)
#   make fuzz-smoke  every fuzzer for a few seconds over its seeds (build/asan)
#   make fuzz      every fuzzer for FUZZ_SECONDS (60) each; findings kept as seeds
#   make soak      10 M items through 4 native stages; RSS growth and items/s
#   make soak-python  the same through the Python API (the binding seam)
#   make bench     C++ microbenchmarks and Python benchmarks vs baselines
#   make format    clang-format the C++ sources in place
#   make lint      format check, clang-tidy, ruff, mypy and the layer check
#   make stubs     regenerate the extension's type stubs (python/feedline)
#   make test-ext  build the test-only extension _feedline_testing
#   make test-pythons  the Python tests on each CPython 3.10-3.13 installed
#   make dist      an sdist and a wheel in build/dist (python -m build)
#   make test-wheel  builds both, installs the wheel into a fresh venv and
#                  runs tests/wheel/smoke.py there
#   make ffmpeg-compat  compile the FFmpeg code against newer FFmpeg headers
#   make clean     remove build/

PYTHON ?= python3
JOBS ?= 2

# The interpreter every recipe uses (scripts/python_env.sh): $(PYTHON) when
# it runs in a virtual or conda environment, else the active virtual
# environment, else the project environment .venv made from $(PYTHON) by
# `make deps` (or `make venv`). pip never installs into a system
# interpreter, so this works with a distribution's /usr/bin/python3
# (PEP 668). PYTHON_BASE is $(PYTHON) resolved before PATH changes below.
PYTHON_BASE := $(shell command -v '$(PYTHON)' || echo '$(PYTHON)')
PY := $(shell PYTHON='$(PYTHON_BASE)' scripts/python_env.sh)
ifeq ($(PY),)
$(error no usable Python: set PYTHON= to a CPython 3.10 or newer)
endif
# Tools pip installs into the environment (cmake, ruff) come first.
export PATH := $(dir $(PY)):$(PATH)

RELEASE_DIR := build/release
TSAN_DIR := build/tsan
ASAN_DIR := build/asan
# Configured with the Python extension and the test-only extension: builds
# _feedline_testing, and its compile_commands.json is what clang-tidy reads.
PYTEST_DIR := build/pytest

# gcc 12's TSan runtime aborts with "unexpected memory mapping" on kernels
# that randomise mmap addresses with more bits than it expects
# (vm.mmap_rnd_bits > 28, e.g. 32 on recent Ubuntu kernels). Running with
# ASLR disabled avoids it. Where personality() is not permitted (some
# container sandboxes), setarch -R fails and the tests run as they are.
ARCH := $(shell uname -m)
NO_ASLR := $(shell setarch $(ARCH) -R true >/dev/null 2>&1 && echo setarch $(ARCH) -R)

TSAN_ENV := TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
ASAN_ENV := ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" \
            UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"


.PHONY: test-pythons test-wheel dist venv deps build python demo demo-cpp test tsan asan bench format clean \
  lint lint-format lint-tidy lint-python lint-ruff lint-mypy lint-layers \
  stubs test-ext pytest-config fuzz-smoke fuzz soak soak-python

deps:
	PYTHON='$(PYTHON_BASE)' scripts/install_deps.sh

venv:
	@PYTHON='$(PYTHON_BASE)' scripts/python_env.sh --create >/dev/null

build: deps
	test -f $(RELEASE_DIR)/CMakeCache.txt || cmake --preset release
	cmake --build --preset release -j$(JOBS)

# --no-build-isolation: build against the nanobind and scikit-build-core that
# `make deps` installed, instead of fetching fresh copies into a temporary
# environment; this works offline and reuses build/<wheel tag> between runs.
# The build tree is build/python-<hash of the environment>, one for each
# environment, so that switching interpreters never reuses a CMake cache
# made for another.
ENV_HASH := import hashlib, sys; print(hashlib.sha1(sys.prefix.encode()).hexdigest()[:10])
python: deps
	$(PY) -m pip install --no-build-isolation -q \
	  --config-settings=build-dir="build/python-$$($(PY) -c '$(ENV_HASH)')" .

demo: python
	$(PY) examples/python/image_demo.py

demo-cpp: build
	$(RELEASE_DIR)/examples/cpp/pipeline_demo && $(RELEASE_DIR)/examples/cpp/clip_demo

test: deps build
	ctest --test-dir $(RELEASE_DIR) --output-on-failure --no-tests=error -j$(JOBS)
	$(MAKE) tsan
	$(MAKE) asan
	$(MAKE) fuzz-smoke
	$(MAKE) python
	$(MAKE) test-ext
	$(PY) -m pytest -q tests/python
	$(MAKE) test-wheel

# Builds only the test binaries labelled `engine` (and what they link).
tsan:
	test -f $(TSAN_DIR)/CMakeCache.txt || cmake --preset tsan
	cmake --build --preset tsan -j$(JOBS) --target feedline_tests_engine
	$(TSAN_ENV) $(NO_ASLR) ctest --test-dir $(TSAN_DIR) --output-on-failure \
	  --no-tests=error -L engine -j$(JOBS)

# The asan preset is also the clang build with -Wthread-safety -Werror.
asan:
	test -f $(ASAN_DIR)/CMakeCache.txt || cmake --preset asan
	cmake --build --preset asan -j$(JOBS)
	$(ASAN_ENV) ctest --test-dir $(ASAN_DIR) --output-on-failure \
	  --no-tests=error -j$(JOBS)

# FUZZ_SCALE=N multiplies each fuzzer's fixed number of mutations (default 1,
# about 10 s each).
fuzz-smoke:
	test -f $(ASAN_DIR)/CMakeCache.txt || cmake --preset asan
	cmake --build --preset asan -j$(JOBS)
	JOBS=$(JOBS) scripts/fuzz_smoke.sh $(ASAN_DIR)

# The fuzzing campaign: scripts/fuzz.sh (FUZZ_SECONDS per target, default 60;
# FUZZ_MERGE=1 merges new coverage into fuzz/corpus). Not part of `make test`.
FUZZERS := $(basename $(notdir $(wildcard fuzz/*_fuzzer.cc)))
fuzz:
	test -f $(ASAN_DIR)/CMakeCache.txt || cmake --preset asan
	cmake --build --preset asan -j$(JOBS) --target $(FUZZERS)
	JOBS=$(JOBS) scripts/fuzz.sh $(ASAN_DIR)

# The soak run: SOAK_ITEMS (10 M) items through 4 native stages on the
# release build, RSS sampled as it runs. Not part of `make test`.
SOAK_ITEMS ?= 10000000
soak:
	test -f $(RELEASE_DIR)/CMakeCache.txt || cmake --preset release
	cmake --build --preset release -j$(JOBS) --target soak
	$(RELEASE_DIR)/bench/cpp/soak --items $(SOAK_ITEMS)

soak-python: python test-ext
	$(PY) scripts/soak.py --items $(SOAK_ITEMS)

bench: build python test-ext
	PYTHON='$(PYTHON_BASE)' scripts/install_deps.sh --bench
	$(RELEASE_DIR)/bench/cpp/pipeline_benchmark
	$(PY) bench/python/pipeline_overhead.py
	$(PY) bench/python/images.py
	$(PY) bench/python/arrays.py
	$(PY) bench/python/png.py
	$(PY) bench/python/video.py
	$(PY) bench/python/encode.py

CXX_DIRS := include src tests/cpp tests/python/native bench/cpp fuzz examples \
  python/bindings
CXX_FILES = $(shell find $(wildcard $(CXX_DIRS)) -name '*.h' -o -name '*.cc')
PY_DIRS := python tests/python tests/wheel bench/python examples/python scripts tools

format:
	clang-format -i $(CXX_FILES)

# The tree the test extension and clang-tidy use: Release, the Python
# extension and the test extension on, C++ tests off.
# Configured anew when it was configured for another interpreter.
pytest-config: | venv
	@want="$$($(PY) -c 'import sys; print(sys.executable)')"; \
	have="$$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' \
	  $(PYTEST_DIR)/CMakeCache.txt 2>/dev/null)"; \
	if [ "$$want" != "$$have" ]; then \
	  rm -rf $(PYTEST_DIR) && cmake -S . -B $(PYTEST_DIR) -G Ninja \
	    -DCMAKE_BUILD_TYPE=Release -DFEEDLINE_BUILD_PYTHON=ON \
	    -DFEEDLINE_BUILD_PYTHON_TESTS=ON -DFEEDLINE_BUILD_TESTS=OFF \
	    -DFEEDLINE_BUILD_EXAMPLES=OFF -DPython_EXECUTABLE="$$want"; \
	fi

test-ext: pytest-config
	cmake --build $(PYTEST_DIR) --target _feedline_testing -j$(JOBS)

# The Python tests on every supported CPython installed (PYTHONS=, default
# 3.10 to 3.13), each in its own virtual environment under build/pythons/.
test-pythons:
	scripts/test_pythons.sh

dist: deps
	rm -rf build/dist
	$(PY) -m build --outdir build/dist .

test-wheel: deps
	PYTHON='$(PY)' scripts/test_wheel.sh

lint: deps
	$(MAKE) -k lint-format lint-layers lint-ruff lint-mypy lint-tidy

lint-format:
	clang-format --dry-run -Werror $(CXX_FILES)

lint-layers: | venv
	$(PY) tools/check_layers.py

lint-python: lint-ruff lint-mypy

lint-ruff: | venv
	$(PY) -m ruff check $(PY_DIRS)
	$(PY) -m ruff format --check $(PY_DIRS)

lint-mypy: | venv
	$(PY) -m mypy

# The project's own translation units (src/, python/bindings/) and, through
# HeaderFilterRegex, the headers they include; any finding fails.
lint-tidy: pytest-config
	$(PY) tools/run_clang_tidy.py -p $(PYTEST_DIR) -j $(JOBS) src python/bindings

# Regenerates python/feedline/_feedline_ext/*.pyi from the installed
# extension (run `make python` first).
stubs: | venv
	$(PY) tools/gen_stubs.py python/feedline

clean:
	rm -rf build

# Every file that includes FFmpeg headers compiled (-fsyntax-only, -Werror,
# deprecations included) against the FFmpeg headers of Debian trixie (7.1)
# and sid (the newest), fetched into build/ffmpeg-headers/ on first use:
# scripts/ffmpeg_headers_check.sh (FFMPEG_SUITES, FFMPEG_HEADERS=<dir>).
.PHONY: ffmpeg-compat
ffmpeg-compat:
	scripts/ffmpeg_headers_check.sh
