#!/usr/bin/env bash
# Fresh machine -> set up, then run the whole test suite (slow tests included; GPU tests are skipped
# and reported as skipped where no GPU exists). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" TOKENIZERS_PARALLELISM=false
exec .venv/bin/python -m pytest -q "$@"
