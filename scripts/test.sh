#!/usr/bin/env bash
# Sets up (idempotent: quick when .venv is already complete) and runs the test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k manifest`.
# `bash scripts/test.sh --real-size` runs only the real-size Qwen3-TTS request instead (tests/test_real_size.py:
# builds or reuses a 2.7 GB checkpoint under $OMNI_CACHE_DIR/models/, needs about 8 GB free; docs/testing.md).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bash "$repo/scripts/setup.sh"
cd "$repo"
# A bounded KV cache and a private model cache keep test runs independent of the user's.
export OMNI_CACHE_DIR="${OMNI_CACHE_DIR:-$repo/.cache/omni-test}"
# House rules first (pyproject.toml's [tool.ruff]): cheap, and they fail fast.
"$repo/.venv/bin/ruff" check "$repo"
# The type checker (pyproject.toml's [tool.mypy], basic mode, the pydantic plugin).
(cd "$repo" && "$repo/.venv/bin/python" -m mypy)
if [ "${1:-}" = "--real-size" ]; then
  shift
  export OMNI_REAL_SIZE=1
  exec "$repo/.venv/bin/python" -m pytest -q -m real_size "$repo/tests/test_real_size.py" "$@"
fi
exec "$repo/.venv/bin/python" -m pytest -q "$@"
