#!/bin/sh
# doc_examples.sh TESSERA [SOURCE_DIR [MODELS_DIR]] — runs every command
# example of README.md and docs/*.md against the binary TESSERA and fails
# when one fails (ctest: docs_examples). The work is done by
# doc_examples.py beside this script, under the system python3 (numpy and
# onnx, as scripts/gen_models.py needs); its docstring lists what counts as
# an example, the markers a doc can put before a block
# (<!-- doc-test: skip (REASON) -->, <!-- doc-test: expect-exit N -->) and
# the rewrites that keep the examples short. MODELS_DIR: the small models
# of `scripts/gen_models.py --small` (generated when not given).
set -u
[ $# -ge 1 ] || { echo "usage: $0 TESSERA [SOURCE_DIR [MODELS_DIR]]" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
T="$1"
SRC="${2:-$HERE/../..}"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
if [ $# -ge 3 ]; then
  exec "$PY" "$HERE/doc_examples.py" "$T" "$SRC" "$3"
fi
exec "$PY" "$HERE/doc_examples.py" "$T" "$SRC"
