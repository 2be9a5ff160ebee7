#!/usr/bin/env bash
# When a GPU is lent: the vLLM engine checks with vLLM's GPU build. NOT RUN YET (no GPU lent so far).
#   1. the CPU-build test file (tests/vlrl/rollout/test_vllm_cpu.py: rollout vs training log-probs at T=0.7 / 1.0
#      on image prompts and left-padded mixed batches, VLA constrained decoding, two GRPO steps with weight sync,
#      greedy tokens equal to the HF engine's), vLLM on the GPU in fp32 against the fp32 training forward;
#   2. one GRPO step of a Qwen2.5-VL-3B-shaped model with random bf16 weights (scripts/vllm_gpu_step.py).
# Needs an env with vLLM's GPU build (the `vllm` extra, docs/INSTALL.md) at VLRL_VLLM_GPU_VENV (default .venv-vllm).
# GPU kernels (TF32, other attention backends) may not reach fp32's 1e-5: VLRL_VLLM_TOL loosens step 1 and is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${VLRL_VLLM_GPU_VENV:-.venv-vllm}/bin/python"
export VLLM_ENABLE_V1_MULTIPROCESSING=0 TOKENIZERS_PARALLELISM=false
"$py" -c "import torch, vllm; assert torch.cuda.is_available(), 'no CUDA GPU'; print('vllm', vllm.__version__, torch.cuda.get_device_name())"
echo "[gpu_check] tolerance ${VLRL_VLLM_TOL:-1e-5}"
"$py" -m pytest -q tests/vlrl/rollout/test_vllm_cpu.py tests/vlrl/rollout/test_vllm_engine.py
"$py" scripts/vllm_gpu_step.py
