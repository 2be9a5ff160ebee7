"""LIBERO evaluation protocol on a random policy for a few trials (the full 50-trial eval is slow)."""

import json

import pytest

from robots.libero_eval import LiberoEvalConfig, evaluate, random_policy

pytestmark = [pytest.mark.libero, pytest.mark.timeout(600)]


@pytest.mark.slow
def test_protocol_few_trials_random_policy(tmp_path):
    calls = []
    rand = random_policy(0)

    def policy(obs):
        calls.append(obs["images"]["agentview"].shape)
        return rand(obs)

    cfg = LiberoEvalConfig(suites=("libero_goal",), task_ids=(1,), num_trials=2, num_envs=1, image_size=32,
                           cameras=("agentview",),
                           max_steps={"libero_goal": 8}, video_dir=str(tmp_path / "videos"))
    report = evaluate(policy, cfg, out_json=str(tmp_path / "report.json"))
    task = report["suites"]["libero_goal"]["tasks"][0]
    assert task["trials"] == 2 and [e["init_state"] for e in task["episodes"]] == [0, 1]
    assert all(e["steps"] == 8 or e["success"] for e in task["episodes"])
    assert task["worker_failures"] == 0 and 0.0 <= task["success_rate"] <= 1.0
    # Warm-up steps are no-ops the policy never sees: 2 trials x 8 policy steps.
    assert len(calls) == 16 and calls[0] == (1, 32, 32, 3)
    assert json.loads((tmp_path / "report.json").read_text())["suites"]["libero_goal"]["trials"] == 2
    video = task["episodes"][0]["video"]
    assert video.endswith(".mp4") and (tmp_path / "videos").exists()
    import av

    with av.open(video) as f:
        assert sum(1 for _ in f.decode(video=0)) == 10 + 8


def test_protocol_constants():
    from robots.libero_env import SUITE_MAX_STEPS

    cfg = LiberoEvalConfig()
    assert cfg.num_trials == 50 and cfg.num_warmup_steps == 10 and cfg.seed == 7
    assert SUITE_MAX_STEPS == {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300,
                               "libero_10": 520, "libero_90": 400}
