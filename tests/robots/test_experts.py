"""Scripted experts solve their tasks and the demo recorder writes a readable HDF5 dataset."""

import numpy as np
import pytest

from robots.env import RobosuiteConfig, make_env
from robots.experts import SPECS, PickPlaceExpert, run_episode
from robots.recorder import HDF5Recorder, read_episodes

pytestmark = pytest.mark.timeout(300)


@pytest.mark.sim
def test_lift_expert_succeeds_and_records_demos(tmp_path):
    env = make_env(RobosuiteConfig(task="Lift", cameras=("agentview",), image_size=32, max_steps=150))
    rec = HDF5Recorder(tmp_path / "lift.h5")
    try:
        for seed in (0,):  # one episode: camera rendering dominates the time
            ok, steps, ep = run_episode(env, PickPlaceExpert(SPECS["Lift"]), seed=seed, record=True)
            assert ok and steps < 150
            rec.write(ep)
    finally:
        env.close()
    eps = read_episodes(tmp_path / "lift.h5")
    assert len(eps) == 1 and all(e["success"] and e["language"] == "lift the red cube" for e in eps)
    e = eps[0]
    T = e["num_steps"]
    assert e["images"]["agentview"].shape == (T, 32, 32, 3) and e["actions"].shape == (T, 7)
    assert e["proprio"].shape == (T, 8) and e["states"].shape[0] == T and e["meta"]["seed"] == 0
    assert np.all(np.abs(e["actions"]) <= 1) and not e["intervention"].any()


@pytest.mark.sim
def test_stack_expert():
    env = make_env(RobosuiteConfig(task="Stack", cameras=(), max_steps=250))
    try:
        assert run_episode(env, PickPlaceExpert(SPECS["Stack"]), seed=0)[0]
    finally:
        env.close()


@pytest.mark.libero
@pytest.mark.slow
def test_libero_object_expert():
    from robots.libero_env import LiberoConfig

    env = make_env(LiberoConfig(suite="libero_object", task_id=1, cameras=(), hard_reset=False))
    try:
        ok, steps, _ = run_episode(env, PickPlaceExpert(SPECS["libero_object/1"]), init_state=0)
        assert ok and steps <= 280
    finally:
        env.close()
