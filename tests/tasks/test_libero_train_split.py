"""The LIBERO train split: fresh placements drawn from the seed, never the shipped init states the official
evaluation uses, reproducible per seed (so a copied env for G > 1 starts from the same scene)."""
import copy

import numpy as np
import pytest

pytest.importorskip("libero")

from tasks import libero as task  # noqa: E402

pytestmark = [pytest.mark.libero, pytest.mark.slow, pytest.mark.timeout(600)]


def _objects(env) -> np.ndarray:
    """Free-joint positions of the scene's objects (everything but the robot), from the MuJoCo state."""
    sim = env._sim._env.sim
    return np.concatenate([sim.data.get_joint_qpos(j)[:3] for j in sim.model.joint_names if "joint0" in j
                           and "robot" not in j and "gripper" not in j])


def test_train_split_draws_reproducible_placements_outside_the_shipped_init_states():
    cfg = task.Config(suite="libero_object", task_ids=[1], camera="agentview", render_size=64, image_size=32,
                      num_wait_steps=0, max_steps=3, tokenizer_path="assets/tiny-qwen2.5-vl")
    env = task.make_env(cfg, "train")
    try:
        obs = env.reset(11)
        assert obs.info["init_state"] == "random" and obs.info["trial"] is None and obs.info["task_id"] == 1
        first = _objects(env)
        again = copy.deepcopy(env)  # what run_episodes does for a group: the same scene
        assert np.allclose(_objects(again), first)
        again.close()
        env.reset(12)
        other = _objects(env)
        assert not np.allclose(other, first)
        env.reset(11)
        assert np.allclose(_objects(env), first)
        shipped = env._sim.init_states  # [50, state_dim]: MuJoCo states (time, qpos, qvel)
        state = env._sim.get_state()
        assert min(np.abs(shipped - state).max(axis=1)) > 1e-3  # not one of the evaluation's init states
        ev = task.make_env(cfg, "eval")
        o = ev.reset(0)
        assert o.info["init_state"] == 0 and o.info["trial"] == 0
        assert np.abs(ev._sim.get_state() - shipped[0]).max() < 1e-3  # the same distance finds a shipped state
        ev.close()
    finally:
        env.close()


def test_rl_trains_on_the_train_split(tmp_path, tiny_model_path):
    """One VLA-GRPO step of `vlrl/train.py task=libero` runs on train-split placements (3 policy steps each)."""
    import json

    from vlrl.config import load
    from vlrl.train import run

    out = tmp_path / "rl"
    cfg, mod = load(["task=libero", "task.suite=libero_object", "task.task_ids=[1]", "task.max_steps=3",
                     "task.render_size=64", "task.image_size=32", f"model.path={tiny_model_path}",
                     f"task.tokenizer_path={tiny_model_path}", "rollout.max_turns=3", "rollout.max_new_tokens=8",
                     "algo=vla_grpo", "algo.group_size=2", "trainer.prompts_per_step=1", "trainer.steps=1",
                     "trainer.threads=1", "trainer.progress=false", f"trainer.output_dir={out}"])
    run(cfg, mod)
    rec = [json.loads(ln) for ln in open(out / "metrics.jsonl")]
    assert rec[-1]["step"] == 1 and rec[-1]["episodes"] == 2 and rec[-1]["turns/mean"] == 3
