"""End-to-end: run_episodes with the tiny model on the multi-turn robot task.

Named to run before test_env.py: loading the model (which imports torchvision's extensions) after
robosuite's EGL contexts exist crashed the process here, so the model is loaded first.
"""

import pytest
import torch

pytest.importorskip("robosuite")

from tasks import robot_manipulation as task  # noqa: E402


@pytest.mark.sim
@pytest.mark.slow
def test_run_episodes_tiny_model(tiny_model_path):
    from vlrl.config import ModelConfig, RolloutConfig
    from vlrl.models import load_model, load_processor
    from vlrl.rollout import make_engine, run_episodes

    torch.set_num_threads(1)
    torch.manual_seed(0)
    mcfg = ModelConfig(path=tiny_model_path)
    engine = make_engine(RolloutConfig(max_new_tokens=8), load_model(mcfg), load_processor(mcfg))  # before any env
    cfg = task.Config(image_size=64, max_steps=50, invalid_penalty=-0.1)
    episodes = run_episodes(engine, lambda: task.make_env(cfg, "train"), [0, 1], 2, max_turns=3)
    assert len(episodes) == 4 and [ep.group_id for ep in episodes] == [0, 0, 1, 1]
    for ep in episodes:
        assert len(ep.turns) == 3 or ep.turns[-1].done
        for t in ep.turns:
            assert set(t.rewards) == {"success", "invalid_action"}
            assert "reason" in t.info and t.info["reason"] in (None, "invalid_action")
            assert len(t.response_ids) == len(t.logprobs) >= 1
        assert ep.turns[-1].done or ep.turns[-1].truncated
    rep = task.report(episodes, cfg)
    assert rep["count"] == 4 and 0.0 <= rep["invalid_action_rate"] <= 1.0
    # Constrained decoding (the default): every response is 7 action tokens then EOS, never invalid.
    tok = task.action_tokenizer(cfg)
    for t in (t for ep in episodes for t in ep.turns):
        assert all(tok.is_action_id(t.response_ids[:7])) and len(t.response_ids) == 8 and t.info["finished"]
    assert rep["invalid_action_rate"] == 0.0
