"""A robot session's config fails at construction, naming the bad field."""

import pytest

from tasks.robot_manipulation.session_config import SessionConfig
from vlrl.config import RolloutConfig


def test_defaults_are_valid_and_keep_the_robot_local():
    cfg = SessionConfig()
    assert cfg.uri.startswith("ws://127.0.0.1:")
    assert cfg.interventions == "demo" and cfg.task.expert_labels is False


@pytest.mark.parametrize("kwargs, field", [
    (dict(interventions="ignore"), "interventions"),
    (dict(episodes=0), "episodes"),
    (dict(max_steps=0), "max_steps"),
    (dict(episodes_per_update=0), "episodes_per_update"),
    (dict(demo_advantage=0.0), "demo_advantage"),
    (dict(baseline_window=0), "baseline_window"),
    (dict(rollout=RolloutConfig(max_new_tokens=7)), "rollout.max_new_tokens"),
])
def test_invalid_value_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"'{field}'"):
        SessionConfig(**kwargs)
