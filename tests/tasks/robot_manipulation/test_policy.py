"""The VLA checkpoint as a plain obs -> action function (tasks/robot_manipulation/policy.py)."""

import numpy as np
import pytest

from tasks.robot_manipulation.policy import load_policy


@pytest.fixture(scope="module")
def greedy_policy():
    return load_policy("assets/tiny-vla-lift", image_size=112, greedy=True, threads=1)


def _obs(seed: int) -> dict:
    img = np.random.default_rng(seed).integers(0, 256, (112, 112, 3), dtype=np.uint8)
    return {"images": {"robot0_eye_in_hand": img}, "instruction": "lift the red cube"}


def test_policy_returns_a_decoded_action(greedy_policy):
    a = greedy_policy(_obs(0))
    assert a.shape == (7,) and np.isfinite(a).all()
    assert a[6] in (-1.0, 1.0)  # gripper binarised
    assert greedy_policy.invalid == 0  # constrained decoding: always 7 action tokens
    # greedy: the same observation gives the same action
    np.testing.assert_array_equal(a, greedy_policy(_obs(0)))


def test_policy_acts_on_its_own_camera(greedy_policy):
    with pytest.raises(KeyError, match="robot0_eye_in_hand"):
        greedy_policy({"images": {"agentview": _obs(0)["images"]["robot0_eye_in_hand"]}, "instruction": "x"})


def test_missing_action_stats_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no action statistics"):
        load_policy("assets/tiny-qwen2.5-vl", stats_path=str(tmp_path / "nope.json"))
