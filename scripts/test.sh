#!/usr/bin/env bash
# Sets up (idempotent: quick when .venv is already complete) and runs the test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k manifest`.
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
exec "$repo/.venv/bin/python" -m pytest -q "$@"
