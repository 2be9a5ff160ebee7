#!/usr/bin/env bash
# Fresh machine -> set up, then run the default job (GRPO on GUI grounding with the embedded tiny model).
# Extra arguments are Hydra overrides, e.g. `bash scripts/quickstart.sh trainer.steps=10`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# A fresh folder per run (Hydra's outputs/DATE/TIME convention) unless the caller names one: running the quick
# start twice must not be refused because the first run's folder exists.
case " $* " in
  *" trainer.output_dir="*) exec .venv/bin/python vlrl/train.py "$@" ;;
  *) exec .venv/bin/python vlrl/train.py "trainer.output_dir=outputs/quickstart/$(date +%Y-%m-%d_%H-%M-%S)" "$@" ;;
esac
