#!/bin/sh
# run.sh SOURCE_DIR BUILD_DIR [PYTEST ARGS...] — the Python package's tests
# (ctest: python_package). Makes a virtual environment in
# BUILD_DIR/python-venv that sees the project's .venv packages (numpy,
# onnxruntime, pytest, scikit-build-core) through a .pth file, installs the
# package into it with `pip install .` from the libraries this build tree
# already holds (TS_PYTHON_PREBUILT: nothing is compiled again), and runs
# pytest on tests/python with the build's generated models. Exits 77
# (skipped) when there is no .venv with those packages (no network when
# scripts/install-deps.sh ran).
set -u
SRC=$(cd "$1" && pwd)
BUILD=$(cd "$2" && pwd)
shift 2
PY="$SRC/.venv/bin/python"
if [ ! -x "$PY" ] ||
   ! "$PY" -c "import numpy, onnxruntime, pytest, scikit_build_core" 2>/dev/null; then
  echo "skipped: no .venv with numpy, onnxruntime, pytest and scikit-build-core" \
       "(scripts/install-deps.sh makes it)"
  exit 77
fi
if [ ! -e "$BUILD/libtessera.so.0" ]; then
  echo "FAIL: $BUILD has no libtessera.so.0 (build the tessera_lib target)"
  exit 1
fi
V="$BUILD/python-venv"
if [ ! -x "$V/bin/python" ]; then
  "$PY" -m venv "$V" || { echo "FAIL: cannot create $V"; exit 1; }
fi
SITE=$("$V/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
"$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" >"$SITE/tessera-project-venv.pth"

t0=$(date +%s)
# the package from this build's libraries, built in a folder of its own
if ! (cd "$SRC" && env -u TESSERA_LIBRARY -u TESSERA_RUNTIME_DIR \
        "$V/bin/python" -m pip install --quiet --no-build-isolation --no-deps \
        --no-index --force-reinstall \
        --config-settings "cmake.define.TS_PYTHON_PREBUILT=$BUILD" \
        --config-settings "build-dir=$BUILD/python-package" .) >"$BUILD/python-install.log" 2>&1; then
  cat "$BUILD/python-install.log"
  echo "FAIL: pip install . did not succeed"
  exit 1
fi
t1=$(date +%s)
echo "pip install .: $((t1 - t0)) s"

WORK="$BUILD/python-tests"
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
env -u TESSERA_LIBRARY -u TESSERA_RUNTIME_DIR \
  TESSERA_TEST_MODELS="$BUILD/graph_models" TESSERA_SOURCE_DIR="$SRC" \
  "$V/bin/python" -m pytest -q -p no:cacheprovider "$SRC/tests/python" "$@"
rc=$?
echo "pytest: $(( $(date +%s) - t1 )) s"
exit $rc
