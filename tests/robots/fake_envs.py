"""Tiny fake envs for vec-env tests (no mujoco): one can crash, hang or raise, once, at a chosen step."""

from __future__ import annotations

import os
import time

import numpy as np


class FakeEnv:
    """Counts steps; episode ends (success) after `episode_len` steps. Faults fire once per marker file."""

    def __init__(self, episode_len: int = 4, fault: str | None = None, fault_step: int = 2, marker: str | None = None):
        self.episode_len, self.fault, self.fault_step, self.marker = episode_len, fault, fault_step, marker
        self.instruction = "do the fake thing"
        self.t, self.seed = 0, None

    def _obs(self):
        img = np.full((8, 8, 3), self.t, dtype=np.uint8)
        return {"images": {"cam": img}, "proprio": np.array([self.t, self.seed or 0], dtype=np.float32),
                "instruction": self.instruction}

    def reset(self, seed=None, init_state=None):
        self.t, self.seed = (int(init_state) if init_state is not None else 0), seed
        return self._obs()

    def _maybe_fault(self):
        if self.fault is None or self.t != self.fault_step:
            return
        if self.marker is not None:
            if os.path.exists(self.marker):
                return  # already fired once: the restarted worker behaves
            open(self.marker, "w").close()
        if self.fault == "crash":
            os._exit(3)
        if self.fault == "hang":
            time.sleep(3600)
        if self.fault == "raise":
            raise RuntimeError("fake env error")

    def step(self, action):
        self.t += 1
        self._maybe_fault()
        done = self.t >= self.episode_len
        return self._obs(), float(done), done, False, {"success": done, "step": self.t}

    def thread_env(self):
        """The thread-count variables this worker process started with."""
        return {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}

    def get_state(self):
        return np.array([self.t], dtype=np.float64)

    def close(self):
        pass


def broken_env():
    """A factory that can never build its env (a bad config, not bad luck)."""
    raise RuntimeError("cannot build this env")


class FakeArmEnv(FakeEnv):
    """FakeEnv shaped like a robot for the bridge (8-d proprio, end effector inside the default workspace box);
    `step_s` makes each step take that long (a slow simulator or robot)."""

    def __init__(self, episode_len: int = 1000, step_s: float = 0.0):
        super().__init__(episode_len=episode_len)
        self.step_s = step_s

    def _obs(self):
        obs = super()._obs()
        obs["proprio"] = np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, float(self.t)], dtype=np.float32)
        return obs

    def step(self, action):
        if self.step_s:
            time.sleep(self.step_s)
        return super().step(action)
