#!/usr/bin/env bash
# Create .venv and install vlrl with everything the CPU product and its tests use.
# Idempotent: re-running after a successful install with unchanged pyproject.toml / this script is a no-op.
#   bash scripts/setup.sh            # all CPU extras (default)
#   VLRL_EXTRAS=dev bash scripts/setup.sh   # a smaller install
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
EXTRAS="${VLRL_EXTRAS:-dev,lora,video,clip,sim,libero,bridge,logging,classification}"
# torch and torchvision are pinned together in ONE pip call: a bare `torch` pulls a multi-GB CUDA
# build, and installing torchvision later can upgrade torch (docs/INSTALL.md).
TORCH_PINS=("torch==2.14.1" "torchvision==0.29.1")
if [ "$(uname -m)" = "aarch64" ]; then TORCH_PINS=("torch==2.9.1" "torchvision==0.24.1"); fi

stamp=".venv/.vlrl-setup-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)-${EXTRAS//,/_}"
if [ -f "$stamp" ]; then exit 0; fi

# Offscreen MuJoCo rendering: EGL (Mesa) with OSMesa as the fallback.
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
  need=()
  for pkg in libegl1 libgl1 libosmesa6 ffmpeg; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  if [ ${#need[@]} -gt 0 ]; then
    echo "[setup] apt-get install ${need[*]}"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null) \
      || echo "[setup] warning: could not install ${need[*]} (rendering tests may fail)"
  fi
fi

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
echo "[setup] installing vlrl[$EXTRAS] into .venv (first time: a few minutes)"
.venv/bin/python -m pip install -q --disable-pip-version-check "${TORCH_PINS[@]}" -e ".[$EXTRAS]" 2>&1 \
  | grep -v "is ignored: it is neither a file nor a directory" || true
.venv/bin/python -c "import torch, torchvision, transformers, vlrl" || { echo "[setup] import check failed"; exit 1; }
rm -f .venv/.vlrl-setup-*
touch "$stamp"
echo "[setup] ok: $(.venv/bin/python -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
