"""LIBERO suites behind the common env interface (robots/env.py): task lists, language, fixed init states."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from robots.suite_base import SuiteEnvBase, track_for_exit
from robots.gl import configure_gl
from robots.libero_setup import setup_libero

SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")
# Episode step limits of the OpenVLA / VLA-RL evaluation protocol (after the no-op warm-up).
SUITE_MAX_STEPS = {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520, "libero_90": 400}


@dataclass
class LiberoConfig:
    """One task of a LIBERO suite."""

    suite: str = "libero_spatial"
    """Suite name: libero_spatial, libero_object, libero_goal, libero_10, libero_90."""
    task_id: int = 0
    """Task index within the suite (in the suite's task order)."""
    cameras: tuple[str, ...] = ("agentview", "robot0_eye_in_hand")
    """Cameras rendered into obs["images"] (LIBERO scenes have agentview and the wrist camera)."""
    image_size: int = 128
    """Height and width of every camera image (OpenVLA renders 256 and resizes to 224)."""
    max_steps: int | None = None
    """Steps before `truncated`; None = the suite's protocol limit (SUITE_MAX_STEPS)."""
    flip: str = "vertical"
    """Image orientation fix: vertical (up is up), rot180 (what OpenVLA's LIBERO checkpoints saw), none."""
    task_order_index: int = 0
    """LIBERO's task permutation for the 10-task suites; 0 is the published order."""
    hard_reset: bool = True
    """Rebuild the MuJoCo model on every reset (LIBERO's default, kept for protocol fidelity)."""
    control_freq: int = 20
    """Control steps per simulated second."""


def _suite(name: str, task_order_index: int = 0):
    if name not in SUITES:
        raise ValueError(f"unknown LIBERO suite {name!r}; one of {SUITES}")
    setup_libero()
    from libero.libero import benchmark  # noqa: PLC0415

    return benchmark.get_benchmark_dict()[name](task_order_index=task_order_index)


@lru_cache(maxsize=None)
def list_tasks(suite: str, task_order_index: int = 0) -> tuple[tuple[str, str], ...]:
    """(task name, language instruction) for every task of a suite, in evaluation order."""
    s = _suite(suite, task_order_index)
    return tuple((t.name, t.language) for t in s.tasks)


def init_states(suite: str, task_id: int, task_order_index: int = 0) -> np.ndarray:
    """The fixed initial MuJoCo states the package ships for a task: float64 [n_states, state_dim]."""
    states = _suite(suite, task_order_index).get_task_init_states(task_id)
    return np.asarray(states, dtype=np.float64)


class LiberoEnv(SuiteEnvBase):
    """A LIBERO task; reset(init_state=i) loads the i-th fixed init state of the package."""

    def __init__(self, cfg: LiberoConfig | None = None) -> None:
        super().__init__()
        cfg = cfg or LiberoConfig()
        self.cfg = cfg
        self.cameras, self.flip = tuple(cfg.cameras), cfg.flip
        self.max_steps = cfg.max_steps or SUITE_MAX_STEPS[cfg.suite]
        configure_gl()
        suite = _suite(cfg.suite, cfg.task_order_index)
        task = suite.get_task(cfg.task_id)
        self.task_name, self.instruction = task.name, task.language
        self.init_states = np.asarray(suite.get_task_init_states(cfg.task_id), dtype=np.float64)
        from libero.libero.envs import OffScreenRenderEnv  # noqa: PLC0415  (after setup_libero)

        render = bool(self.cameras)
        self._ctrl = OffScreenRenderEnv(
            bddl_file_name=suite.get_task_bddl_file_path(cfg.task_id),
            camera_names=list(self.cameras) if render else ["agentview"],
            use_camera_obs=render,
            camera_heights=cfg.image_size,
            camera_widths=cfg.image_size,
            control_freq=cfg.control_freq,
            horizon=self.max_steps + 1000,
            ignore_done=True,
            hard_reset=cfg.hard_reset,
        )
        self._env = self._ctrl.env
        track_for_exit(self)

    def reset(self, seed: int | None = None, init_state: Any = None) -> dict:
        """New episode from a fixed init state: an index, a state vector, or None (chosen by `seed`); or, with
        init_state="random", from a fresh placement that LIBERO's own samplers draw from `seed` (the scene's
        regions, as the shipped init states were drawn): states for training that the official evaluation,
        which uses the shipped ones, does not."""
        if isinstance(init_state, str):
            if init_state != "random" or seed is None:
                raise ValueError(f"LiberoEnv.reset: init_state={init_state!r} (seed {seed}): an index, a state "
                                 "vector, None, or 'random' with a seed")
            self._ctrl.seed(int(seed) % (2**31))  # LIBERO's placement samplers draw from numpy's global RNG
            obs = self._ctrl.reset()
            self._env = self._ctrl.env
            self._t = 0
            return self._obs(obs)
        if init_state is None:
            init_state = int(np.random.default_rng(seed).integers(len(self.init_states)))
        if isinstance(init_state, (int, np.integer)):
            init_state = self.init_states[int(init_state) % len(self.init_states)]
        if seed is not None:
            self._ctrl.seed(int(seed) % (2**31))
        self._ctrl.reset()
        self._env = self._ctrl.env  # a hard reset may rebuild internals; keep the handle fresh
        self._t = 0
        return self._obs(self._set_state(init_state))

    def _set_state(self, state) -> dict:
        return self._ctrl.set_init_state(np.asarray(state, dtype=np.float64))

    def _success(self) -> bool:
        return bool(self._ctrl.check_success())

    def close(self) -> None:
        ctrl, self._ctrl, self._env = getattr(self, "_ctrl", None), None, None
        if ctrl is not None:
            ctrl.close()
