"""The robosuite task as a multi-turn Env: config, expert labels, reference answers, invalid actions,
copies, and an end-to-end rollout with the tiny model."""

import copy

import numpy as np
import pytest

pytest.importorskip("robosuite")

from tasks import robot_manipulation as task  # noqa: E402
from tasks.robot_manipulation.action_tokenizer import text_to_action  # noqa: E402
from tasks.robot_manipulation.env import hf_tokenizer  # noqa: E402

CFG = task.Config(image_size=64, max_steps=50)


def test_config_composes():
    from vlrl.config import load

    cfg, mod = load(["task=robot_manipulation"])
    assert mod.__name__ == "tasks.robot_manipulation"
    assert isinstance(cfg.task, task.Config) and cfg.task.env == "Lift" and cfg.task.image_size == 64
    with pytest.raises(ValueError, match="task.invalid_penalty"):
        task.Config(invalid_penalty=1.0)


@pytest.fixture(scope="module")
def env():
    e = task.make_env(CFG, "train")
    yield e
    e.close()


@pytest.mark.sim
def test_reset_observation_and_reference_answer(env):
    obs = env.reset(3)
    text = obs.messages[0]["content"][1]["text"]
    assert text == "In: What action should the robot take to lift the red cube?\nOut:"
    assert obs.images[0].size == (64, 64)
    expert = np.array(obs.info["expert_action"])
    answer = task.reference_answer(obs, CFG)
    tok, hf = task.action_tokenizer(CFG), hf_tokenizer(CFG.tokenizer_path)
    ids = hf(answer, add_special_tokens=False)["input_ids"]
    assert all(tok.is_action_id(ids)) and len(ids) == 7  # what sft.py trains on
    back = text_to_action(answer, hf, tok)
    assert np.all(np.abs(back[:6] - np.clip(expert[:6], -1, 1)) <= tok.max_error()[:6] + 1e-9)
    assert back[6] == (1.0 if expert[6] > 0 else -1.0)
    # the same seed gives the same start
    assert env.reset(3).info["expert_action"] == obs.info["expert_action"]


@pytest.mark.sim
def test_step_valid_and_invalid(env):
    obs = env.reset(0)
    res = env.step(task.reference_answer(obs, CFG))
    assert res.info["reason"] is None and res.rewards == {"success": 0.0, "invalid_action": 0.0}
    assert not res.done and res.observation.info["step"] == 1
    pen = task.make_env(task.Config(image_size=64, max_steps=50, invalid_penalty=-0.5), "train")
    pen.reset(0)
    eef0 = pen._sim.raw_obs["robot0_eef_pos"].copy()
    res = pen.step("not an action")
    assert res.info["reason"] == "invalid_action" and res.rewards["invalid_action"] == -0.5
    assert res.info["action"] == [0.0] * 7
    assert np.abs(pen._sim.raw_obs["robot0_eef_pos"] - eef0).max() < 0.005  # held still
    pen.close()


@pytest.mark.sim
@pytest.mark.slow
def test_expert_answers_solve_lift(env):
    """Feeding the expert's tokenised actions back as responses lifts the cube (quantisation is harmless)."""
    obs, steps = env.reset(1), 0
    while True:
        res = env.step(task.reference_answer(obs, CFG))
        steps += 1
        if res.done or res.truncated:
            break
        obs = res.observation
    assert res.done and res.rewards["success"] == 1.0 and res.info["success"], steps


@pytest.mark.sim
def test_deepcopy_same_state(env):
    """run_episodes copies an env right after reset: the copy starts from the same state and follows it."""
    obs = env.reset(5)
    twin = copy.deepcopy(env)
    assert twin._sim._t == 0 and twin._expert.phase == env._expert.phase
    for _ in range(2):
        a = env.step(task.reference_answer(obs, CFG))
        b = twin.step(task.reference_answer(obs, CFG))
        obs = a.observation
    assert a.observation.info["step"] == b.observation.info["step"] == 2
    for key in ("robot0_eef_pos", "cube_pos"):  # same physical state (renders may differ in a few pixels)
        np.testing.assert_allclose(env._sim.raw_obs[key], twin._sim.raw_obs[key], atol=2e-3)
    twin.close()


@pytest.mark.sim
def test_noisy_demos_and_frames_env(tmp_path):
    from tasks.robot_manipulation.demos import collect

    cfg = task.Config(image_size=64, max_steps=6)
    data = collect(cfg, episodes=2, noise=0.3, progress=False)
    assert data["images"].shape == (12, 64, 64, 3) and data["actions"].shape == (12, 7)
    assert list(data["episode"]) == [0] * 6 + [1] * 6 and list(data["step"][:6]) == list(range(6))
    # Labels are the clean expert actions: the expert hovers with the gripper open and never rotates about x/y.
    assert np.all(data["actions"][:, 6] == -1) and np.all(data["actions"][:, 3:5] == 0)
    path = tmp_path / "frames.npz"
    np.savez_compressed(path, **data)
    frames = task.make_env(task.Config(image_size=64, demo_path=str(path)), "train")
    obs = frames.reset(5)
    i = obs.info["frame"]
    assert obs.info["expert_action"] == [float(v) for v in data["actions"][i]]
    assert np.array_equal(np.asarray(obs.images[0]), data["images"][i])
    assert len(obs.allowed_ids) == 8 and obs.allowed_ids[0] == range(2899 - 256, 2899)
    assert {frames.reset(s).info["frame"] for s in range(12)} == set(range(12))  # a permutation of all frames
    with pytest.raises(RuntimeError, match="cannot be stepped"):
        frames.step("x")
    with pytest.raises(ValueError, match="task.image_size"):
        task.make_env(task.Config(image_size=112, demo_path=str(path)), "train")
    assert isinstance(task.make_env(task.Config(image_size=64, demo_path=str(path)), "eval"), task.RobotManipulationEnv)


@pytest.mark.sim
def test_simulators_are_pooled_and_reset_identically():
    from tasks.robot_manipulation import env as env_mod

    a = task.make_env(CFG, "train")
    first = a.reset(4)
    sim = a._sim
    state = sim.get_state()
    obs = first
    for _ in range(5):  # move the arm, so a reused simulator starts from a different state
        obs = a.step_ids(task.reference_ids(obs, CFG)).observation
    a.close()
    assert any(s is sim for s in env_mod._IDLE[repr(sim.cfg)])
    b = task.make_env(CFG, "train")
    again = b.reset(4)
    assert b._sim is sim  # reused, not rebuilt
    # The same scene: a soft reset of a used simulator matches a fresh one up to MuJoCo's warm-start
    # noise (~1e-4 in the state; a few edge pixels), not bit for bit.
    assert np.allclose(b._sim.get_state()[1:], state[1:], atol=1e-3)
    assert np.allclose(first.info["expert_action"], again.info["expert_action"], atol=1e-2)
    b.close()
