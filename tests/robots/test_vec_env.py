"""Vectorized envs: batching, auto-reset, seeds, and recovery from crashing / hanging / raising workers."""

import functools
import os
import sys
import time

import numpy as np
import pytest

# fake_envs must be importable by module name: spawned workers unpickle the env factories from it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_envs import FakeEnv, broken_env  # noqa: E402

from robots.vec_env import VecEnv, VecEnvConfig

pytestmark = pytest.mark.timeout(120)


def _make(fault=None, marker=None, episode_len=4):
    return functools.partial(FakeEnv, episode_len=episode_len, fault=fault, fault_step=2, marker=marker)


@pytest.mark.parametrize("inline_last", [False, True])
def test_batching_seeds_and_auto_reset(inline_last):
    with VecEnv([_make(), _make()], VecEnvConfig(seed=10, inline_last=inline_last)) as venv:
        assert (venv._procs[1] is None) == inline_last  # the last env in this process, not a worker
        obs = venv.reset()
        assert obs["images"]["cam"].shape == (2, 8, 8, 3) and obs["images"]["cam"].dtype == np.uint8
        assert obs["proprio"].shape == (2, 2)
        assert obs["instruction"] == ["do the fake thing"] * 2
        assert list(obs["proprio"][:, 1]) == [10, 11]  # per-env seeds
        for t in range(4):
            obs, rew, term, trunc, infos = venv.step(np.zeros((2, 7)))
        assert term.all() and (rew == 1).all()
        assert all(info["final_obs"]["proprio"][0] == 4 for info in infos)
        assert list(obs["proprio"][:, 0]) == [0, 0]  # auto-reset happened
        assert list(obs["proprio"][:, 1]) == [12, 13]  # next seeds: seed + i + k * N
        assert venv.call(0, "get_state")[0] == 0


def test_inactive_envs_are_not_stepped_and_init_states():
    with VecEnv([_make(), _make()], VecEnvConfig(auto_reset=False)) as venv:
        obs = venv.reset(seeds=[1, 2], init_states=[1, None])
        assert list(obs["proprio"][:, 0]) == [1, 0]
        obs, _, _, _, infos = venv.step(np.zeros((2, 7)), active=[True, False])
        assert list(obs["proprio"][:, 0]) == [2, 0] and infos[1] == {"inactive": True}


@pytest.mark.parametrize("fault", ["crash", "raise", "hang"])
def test_faulty_worker_is_restarted_and_episode_marked_failed(tmp_path, fault):
    marker = str(tmp_path / "fired")
    cfg = VecEnvConfig(step_timeout_s=2.0, reset_timeout_s=30.0)
    with VecEnv([_make(), _make(fault, marker)], cfg) as venv:
        venv.reset()
        venv.step(np.zeros((2, 7)))  # t = 1
        t0 = time.monotonic()
        obs, rew, term, trunc, infos = venv.step(np.zeros((2, 7)))  # t = 2: env 1 faults
        elapsed = time.monotonic() - t0
        assert infos[1]["worker_failed"] and not infos[1]["success"]
        assert trunc[1] and not term[1] and rew[1] == 0
        assert "worker_failed" not in infos[0] and obs["proprio"][0, 0] == 2  # env 0 unaffected
        assert obs["proprio"][1, 0] == 0  # env 1 restarted into a fresh episode
        assert venv.restarts == [0, 1]
        if fault == "hang":
            assert 1.9 < elapsed < 15
        # The run goes on: the restarted env steps normally.
        obs, *_ , infos = venv.step(np.zeros((2, 7)))
        assert obs["proprio"][1, 0] == 1 and "worker_failed" not in infos[1]


def test_inline_env_that_raises_is_rebuilt_like_a_worker(tmp_path):
    with VecEnv([_make(), _make("raise", str(tmp_path / "fired"))], VecEnvConfig(inline_last=True)) as venv:
        venv.reset()
        venv.step(np.zeros((2, 7)))
        obs, rew, term, trunc, infos = venv.step(np.zeros((2, 7)))  # t = 2: the inline env raises
        assert infos[1]["worker_failed"] and trunc[1] and "RuntimeError" in infos[1]["error"]
        assert obs["proprio"][:, 0].tolist() == [2, 0] and venv.restarts == [0, 1]
        obs, *_ = venv.step(np.zeros((2, 7)))
        assert obs["proprio"][:, 0].tolist() == [3, 1]


def test_env_that_never_builds_raises_instead_of_looping():
    venv = VecEnv([broken_env], VecEnvConfig(max_reset_failures=2))
    try:
        with pytest.raises(RuntimeError, match="failed to reset 2 times"):
            venv.reset()
    finally:
        venv.close()


def test_workers_get_one_thread_each_by_default(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    with VecEnv([_make(), _make()], VecEnvConfig()) as venv:
        venv.reset()
        assert all(venv.call(i, "thread_env") == dict.fromkeys(
            ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1") for i in range(2))
    assert os.environ["OMP_NUM_THREADS"] == "7"  # the parent's setting is untouched
    with VecEnv([_make()], VecEnvConfig(worker_threads=0)) as venv:  # 0: inherit
        venv.reset()
        assert venv.call(0, "thread_env")["OMP_NUM_THREADS"] == "7"
