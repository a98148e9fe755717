# tessera — the two commands (`make run`, `make test`) and friends.
# Wraps CMake: build/ is the normal build, build-asan/ the sanitizer build,
# build-fuzz/ the libFuzzer build (clang).

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_SECONDS ?= 60
RUN_WORKLOAD ?= matmul M=512 N=512 K=512 dtype=float32
RUN_TRIALS   ?= 1000
RUN_DB       ?= tessera.db

SOURCES = $(shell find tir schedule codegen runtime tuner cost_model rpc db cli bench graph include python tests \
            -name '*.[ch]' -not -path '*/corpus/*' 2>/dev/null)

PREFIX     ?= /usr/local

.PHONY: all deps build asan install run bench test test-normal test-asan format format-check fuzz fuzz-smoke clean

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

# The sanitizer tests read and add to the normal build's folder of built
# kernels (TS_TEST_KERNEL_CACHE in CMakeLists.txt).
$(ASAN_BUILD)/CMakeCache.txt:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTS_SANITIZE=ON \
	  -DTS_TEST_KERNEL_CACHE=$(abspath $(BUILD))/kernel-cache

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

asan: $(ASAN_BUILD)/CMakeCache.txt
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# bin/tessera, lib/libtessera_rt.so, include/tessera/model.h and
# lib/pkgconfig/tessera.pc under $(PREFIX) (DESTDIR is honoured).
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# The main job: a tuning job on the embedded measurement pool (about two
# minutes on a 2-core machine), ending with its summary; results go to
# $(RUN_DB).
run: deps
	@$(MAKE) --no-print-directory build
	./$(BUILD)/tessera tune --workload "$(RUN_WORKLOAD)" --trials $(RUN_TRIALS) --job make-run \
	  --db $(RUN_DB)

# The benchmark suite against vendor libraries (tunes or reuses the
# database's results): BUDGET=quick for a short run, full by default.
BUDGET ?= full
bench: deps
	@$(MAKE) --no-print-directory build
	./$(BUILD)/tessera bench --suite --budget $(BUDGET) --db bench/results/bench.db \
	  -o bench/results

# Formatting, the normal build's suite, the sanitizer build's. The fixed
# fuzz runs (`make fuzz-smoke`: a third build, with clang, about two and a
# half minutes on 2 cores) are not part of it; the fuzz targets' corpora
# are replayed as ctest tests in both builds.
test: deps
	@$(MAKE) --no-print-directory format-check
	@$(MAKE) --no-print-directory test-normal
	@$(MAKE) --no-print-directory test-asan

# The normal build's suite leaves out the allocation-failure walks
# (*_test_oom): the sanitizer build runs the same walks and sees more in
# them (a leak or a use after free on an error path), so here they only
# cost time (about 30 s of test time on 2 cores). `ctest` in the build
# folder still runs them.
NORMAL_EXCLUDE = _test_oom$$
test-normal: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -E '$(NORMAL_EXCLUDE)'

# The sanitizer build runs every test but four: the two that replay whole
# pages (the doc examples and the report in a browser), which drive the
# same CLI paths as the script tests the sanitizers do run, and the two
# script tests whose time is tuning searches (tune_cli, graph_model_cli:
# 150 s of the sanitizer suite's 370 on 2 cores), whose C code the tuner's
# and graph's cmocka suites run under the sanitizers. All four run in the
# normal build.
ASAN_EXCLUDE = ^(docs_examples|report_browser|tune_cli|graph_model_cli)$$
test-asan: asan
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -E '$(ASAN_EXCLUDE)'

format:
	clang-format -i $(SOURCES)

format-check:
	@clang-format --dry-run --Werror $(SOURCES) && echo "format: ok"

# libFuzzer for FUZZ_SECONDS on each target (needs clang): the TIR parser,
# the RPC request decoder, the trace JSON reader and the ONNX importer, each
# from its corpus in tests/fuzz/corpus/<name> (the importer's is
# tests/graph/corpus; FUZZ_TARGETS picks some).
FUZZ_TARGETS ?= tir_parser rpc_request trace_json onnx_import
# -O1 with line tables, as libFuzzer's documentation advises: the build
# takes a third of RelWithDebInfo's time (75 against 210 s on 2 cores),
# the smoke's fixed runs a few seconds more (54 against 46 s).
fuzz:
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DTS_FUZZ=ON -DCMAKE_BUILD_TYPE= \
	  -DCMAKE_C_FLAGS="-O1 -gline-tables-only"
	cmake --build $(FUZZ_BUILD) -j $(JOBS) $(addprefix --target fuzz_,$(FUZZ_TARGETS))
	set -e; for t in $(FUZZ_TARGETS); do \
	  src=tests/fuzz/corpus/$$t; [ "$$t" != onnx_import ] || src=tests/graph/corpus; \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t && cp $$src/* $(FUZZ_BUILD)/corpus/$$t/; \
	  ./$(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
	    -timeout=10 -rss_limit_mb=2048 $(FUZZ_FLAGS) $(FUZZ_BUILD)/corpus/$$t; \
	done

# A short fuzz run, when clang's libFuzzer exists: a
# fixed seed and a fixed number of inputs per target, so that its outcome
# does not depend on the speed of the machine or on luck (an open-ended
# search belongs in `make fuzz`; whatever it finds goes into the corpus).
fuzz-smoke:
	@if command -v clang >/dev/null 2>&1 && \
	    echo 'int LLVMFuzzerTestOneInput(const char*d,unsigned long n){return 0;}' | \
	    clang -x c -fsanitize=fuzzer -o /tmp/ts-fuzz-probe - >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory fuzz FUZZ_SECONDS=300 \
	    FUZZ_FLAGS="-seed=1 -runs=40000"; \
	else echo "fuzz-smoke: skipped (clang with libFuzzer not available)"; fi

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
