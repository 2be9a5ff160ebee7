"""trainer.threads holds for evaluation too (a config field that changes behaviour, never silently ignored)."""

import os

import torch

from vlrl.config import compose, validate
from vlrl.evaluate import evaluate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = ["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]", "rollout.max_new_tokens=4",
       "eval.num_examples=2"]


def test_evaluation_runs_on_trainer_threads():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        evaluate(*validate(compose(TOY + ["trainer.threads=1"])), progress=False)
        assert torch.get_num_threads() == 1
        torch.set_num_threads(2)
        evaluate(*validate(compose(TOY)), progress=False)  # 0: torch's own setting stays
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
