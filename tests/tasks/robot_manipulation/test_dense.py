"""Dense rewards from a learned reward model (tasks/robot_manipulation/dense.py): per-turn values equal the
model's own per-step rewards, the final-frame rule, config errors, the no-op default, and one training
step through vlrl.train.run with a tiny random CLIP reward.

Named to run before test_e2e_rollout.py / test_env.py; the training test loads the policy (and the
reward model) before its first simulator exists (see test_e2e_rollout.py's docstring).
"""

import json
import os

import numpy as np
import pytest
import torch

pytest.importorskip("open_clip")

from tasks import robot_manipulation as task  # noqa: E402
from tasks.robot_manipulation import dense  # noqa: E402
from tasks.robot_manipulation.env import vla_observation  # noqa: E402
from vlrl.episode import Episode, Turn  # noqa: E402

SPEC = "clip:tiny-clip"  # open_clip's ~2M-parameter config with random weights: nothing is downloaded
INSTR = "lift the red cube"
RNG = np.random.default_rng(0)
FRAMES = RNG.integers(0, 255, (12, 64, 64, 3), dtype=np.uint8)


def _episode(frames, next_frame=None, bootstrap=None, seed=0):
    turns = [Turn(observation=vla_observation(f, INSTR), response_ids=[1], logprobs=[0.0],
                  rewards={"success": 0.0, "invalid_action": 0.0}, info={"reason": None}) for f in frames]
    if next_frame is not None:
        turns[-1].info["next_frame"] = next_frame
    ep = Episode(turns=turns, seed=seed)
    if bootstrap is not None:
        ep.info["bootstrap_observation"] = vla_observation(bootstrap, INSTR)
    return ep


def _episodes():
    return [_episode(FRAMES[0:3], next_frame=FRAMES[3], bootstrap=FRAMES[11]),  # env ended it: next_frame wins
            _episode(FRAMES[4:6], bootstrap=FRAMES[6], seed=1),  # cut at rollout.max_turns: bootstrap observation
            _episode(FRAMES[7:9], seed=2)]  # neither: the last frame repeated


def test_score_episodes_adds_weighted_model_rewards_and_picks_the_final_frame():
    from rewards.learned.base import Query
    from rewards.learned.clip_reward import ClipReward

    eps = _episodes()
    assert [dense.final_frame(ep)[1] for ep in eps] == ["next_frame", "bootstrap", "repeat"]
    cfg = task.Config(dense_reward=SPEC, dense_weight=0.5)
    dense.score_episodes(eps, cfg)
    # an independent instance of the same model (seeded random weights), called directly on the expected frames
    ref = ClipReward("tiny-clip", pretrained=None)
    expected_frames = [FRAMES[0:4], FRAMES[4:7], np.concatenate([FRAMES[7:9], FRAMES[8:9]])]
    expected = ref([Query(f, INSTR) for f in expected_frames])
    for ep, r in zip(eps, expected):
        assert len(r) == len(ep.turns)
        assert [t.rewards["dense"] for t in ep.turns] == pytest.approx(0.5 * r, abs=1e-9)
        assert all(set(t.rewards) == {"success", "invalid_action", "dense"} for t in ep.turns)
    # the repeated final frame scores the last seen frame again (a frame model: r_{T-1} == r_{T-2} here)
    assert expected[2][-1] == pytest.approx(expected[2][-2])
    # cached per spec: one model for the process
    assert dense.load_reward_model(SPEC) is dense.load_reward_model(SPEC)


@pytest.mark.parametrize("kind", ["progress", "prm"])
def test_vlm_reward_model_specs(kind, tmp_path, tiny_model_path):
    """progress:DIR and prm:DIR load a saved (here: untrained) VLM reward model; values match a direct call."""
    import dataclasses

    from rewards.learned.base import Query
    from rewards.learned.prm import PRM_CONFIG, PRMReward
    from rewards.learned.progress_model import ProgressReward
    from rewards.learned.vlm_reward import VLMReward, VLMRewardConfig

    torch.manual_seed(0)
    base = PRM_CONFIG if kind == "prm" else VLMRewardConfig()
    VLMReward(dataclasses.replace(base, model_path=tiny_model_path)).save(tmp_path / kind)
    eps = _episodes()[:2]
    dense.score_episodes(eps, task.Config(dense_reward=f"{kind}:{tmp_path / kind}", dense_weight=2.0))
    ref = (PRMReward if kind == "prm" else ProgressReward).load(str(tmp_path / kind))
    expected = ref([Query(FRAMES[0:4], INSTR), Query(FRAMES[4:7], INSTR)])
    for ep, r in zip(eps, expected):
        assert [t.rewards["dense"] for t in ep.turns] == pytest.approx(2.0 * r, abs=1e-6)
    dense.load_reward_model.cache_clear()  # free the model (the temp dir goes away)


def test_without_dense_reward_nothing_changes(monkeypatch):
    eps = _episodes()
    before = [[dict(t.rewards) for t in ep.turns] for ep in eps]

    def boom(spec):
        raise AssertionError("no model may be loaded")

    monkeypatch.setattr(dense, "load_reward_model", boom)
    dense.score_episodes(eps, task.Config())
    assert [[t.rewards for t in ep.turns] for ep in eps] == before


@pytest.mark.parametrize("override, field", [
    ("task.dense_reward=bogus:x", "task.dense_reward"),
    ("task.dense_reward=progress", "task.dense_reward"),
    ("task.dense_reward=prm:/no/such/dir", "task.dense_reward"),
    ("task.dense_reward=clip:", "task.dense_reward"),
    ("task.dense_weight=nan", "task.dense_weight"),
])
def test_bad_dense_config_names_the_field(override, field):
    from vlrl.config import load

    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        load(["task=robot_manipulation", override])


@pytest.mark.sim
@pytest.mark.slow
def test_train_step_logs_the_dense_reward(tmp_path, monkeypatch):
    pytest.importorskip("robosuite")
    from vlrl.config import load
    from vlrl.train import run

    out = tmp_path / "run"
    cfg, mod = load(["task=robot_manipulation", "model=tiny", "task.image_size=64", "task.max_steps=3",
                     "rollout.max_turns=3", "rollout.max_new_tokens=8", "algo.group_size=2", "trainer.steps=1",
                     "trainer.prompts_per_step=1", "trainer.progress=false", "trainer.save_every=0",
                     "trainer.eval_examples=0", f"task.dense_reward={SPEC}", f"trainer.output_dir={out}"])
    seen = []
    original = mod.score_episodes

    def spy(episodes, task_cfg):
        original(episodes, task_cfg)
        seen.extend(episodes)

    monkeypatch.setattr(mod, "score_episodes", spy)
    run(cfg, mod)
    assert len(seen) == 2
    model = dense.load_reward_model(SPEC)
    for ep in seen:
        assert len(ep.turns) == 3  # the env's step limit (3) ends it: the env hands over the frame after the action
        nf = ep.turns[-1].info["next_frame"]
        assert nf.dtype == np.uint8 and nf.shape == (64, 64, 3) and dense.final_frame(ep)[1] == "next_frame"
        assert all("next_frame" not in t.info for t in ep.turns[:-1])
        from rewards.learned.base import Query

        r = model([Query(dense.episode_frames(ep), INSTR)])[0]
        assert [t.rewards["dense"] for t in ep.turns] == pytest.approx(r, abs=1e-9)
    rows = [json.loads(ln) for ln in open(os.path.join(out, "metrics.jsonl"))]
    step = [r for r in rows if "reward/dense" in r]
    assert step, rows
    mean_dense = np.mean([t.rewards["dense"] for ep in seen for t in ep.turns])
    assert step[-1]["reward/dense"] == pytest.approx(mean_dense, abs=1e-6)
    assert "reward/success" in step[-1]


def test_success_is_the_simulators_not_a_positive_dense_total():
    from vlrl.task import load_task

    def episode(success):
        obs = vla_observation(np.zeros((8, 8, 3), np.uint8), "lift the cube")
        turns = [Turn(obs, [1], [0.0], rewards={"success": 0.0, "dense": 0.3}),
                 Turn(obs, [1], [0.0], rewards={"success": float(success), "dense": 0.2})]
        return Episode(turns=turns)

    loaded = load_task(task)  # what the trainer's success rate and seed curriculum call
    assert loaded.episode_success(episode(False), task.Config()) == 0.0  # total 0.5 > 0, yet no success
    assert loaded.episode_success(episode(True), task.Config()) == 1.0
    assert task.report([episode(False), episode(True)], task.Config())["overall"] == 0.5
