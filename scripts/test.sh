#!/usr/bin/env bash
# Fresh machine -> set up, then run the whole test suite (slow tests included; GPU tests are skipped
# and reported as skipped where no GPU exists). Extra arguments go to pytest.
# Where the vLLM CPU-build env exists (VLRL_VLLM_CPU=1 bash scripts/setup.sh; path VLRL_VLLM_CPU_VENV,
# default .venv-vllm-cpu), the vLLM engine tests then run with its python; otherwise the skip is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" TOKENIZERS_PARALLELISM=false
VLLM_TESTS=tests/vlrl/rollout/test_vllm_cpu.py
vllm_py="${VLRL_VLLM_CPU_VENV:-.venv-vllm-cpu}/bin/python"
rc=0
.venv/bin/python -m pytest -q "$@" || rc=$?
if [ $# -gt 0 ]; then exit $rc; fi  # a chosen subset: the main env only
if [ -x "$vllm_py" ]; then
  echo "[test] vLLM engine on CPU: $vllm_py -m pytest -q $VLLM_TESTS"
  VLLM_ENABLE_V1_MULTIPROCESSING=0 "$vllm_py" -m pytest -q "$VLLM_TESTS" || rc=$?
else
  echo "[test] SKIPPED $VLLM_TESTS: no vLLM CPU env at ${vllm_py%/bin/python} (VLRL_VLLM_CPU=1 bash scripts/setup.sh)"
fi
exit $rc
