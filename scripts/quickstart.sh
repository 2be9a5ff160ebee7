#!/usr/bin/env bash
# Fresh machine -> set up, then run the default job (GRPO on GUI grounding with the embedded tiny model).
# Extra arguments are Hydra overrides, e.g. `bash scripts/quickstart.sh trainer.steps=10`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python vlrl/train.py "$@"
