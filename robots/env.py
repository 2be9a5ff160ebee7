"""One environment interface for simulated manipulation (gymnasium-style), and its robosuite implementation.

Every env returns observations as a dict:
    images:      {camera name: uint8 array [H, W, 3]}, oriented so that "up" is up
    proprio:     float32 [8]: end-effector position (3), axis-angle orientation (3), gripper fingers (2)
    instruction: the task's language instruction
and takes actions as float [7]: end-effector delta xyz, delta roll/pitch/yaw (normalised to [-1, 1] by the
OSC_POSE controller: 1 = 5 cm / 0.5 rad), gripper (-1 open, +1 close).
step() returns (obs, reward, terminated, truncated, info): terminated = the task's success predicate,
truncated = step limit reached. info always has "success" and "step".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from robots.gl import configure_gl
from robots.suite_base import (  # noqa: F401  (re-exported: the env interface's names)
    ACTION_DIM, FLIPS, PROPRIO_DIM, SuiteEnvBase, _sync_gripper, track_for_exit, build_obs, check_action, flip_image, quat_to_axis_angle,
)

# Default instructions for robosuite tasks (robosuite itself has no language).
ROBOSUITE_INSTRUCTIONS = {
    "Lift": "lift the red cube",
    "Stack": "stack the red cube on top of the green cube",
    "PickPlace": "pick up the objects and place them into their bins",
    "PickPlaceCan": "pick up the can and place it into its bin",
    "PickPlaceMilk": "pick up the milk and place it into its bin",
    "PickPlaceBread": "pick up the bread and place it into its bin",
    "PickPlaceCereal": "pick up the cereal box and place it into its bin",
    "Door": "open the door",
    "NutAssemblySquare": "put the square nut on the square peg",
}


class RobotEnv(Protocol):
    """What the vectorized envs, the evaluation loop and the bridge need from an environment."""

    instruction: str

    def reset(self, seed: int | None = None, init_state: Any = None) -> dict: ...
    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]: ...
    def get_state(self) -> np.ndarray: ...
    def close(self) -> None: ...


@dataclass
class RobosuiteConfig:
    """A robosuite manipulation task with the OSC_POSE controller."""

    task: str = "Lift"
    """robosuite environment name (Lift, Stack, PickPlace, PickPlaceCan, Door, ...)."""
    robot: str = "Panda"
    """Robot model."""
    controller: str = "OSC_POSE"
    """robosuite controller; OSC_POSE makes the action a 6-DoF end-effector delta + gripper."""
    cameras: tuple[str, ...] = ("agentview", "robot0_eye_in_hand")
    """Cameras rendered into obs["images"]; empty = no rendering (much faster)."""
    image_size: int = 128
    """Height and width of every camera image."""
    camera_sizes: tuple[int, ...] = ()
    """Per-camera height and width, in the order of `cameras` (overrides image_size); empty = image_size."""
    max_steps: int = 200
    """Steps before `truncated` is set."""
    control_freq: int = 20
    """Control steps per simulated second."""
    reward_shaping: bool = False
    """Dense shaped reward instead of robosuite's sparse success reward."""
    instruction: str | None = None
    """Language instruction; None = a default per task."""
    flip: str = "vertical"
    """Image orientation fix: vertical (OpenGL renders bottom-up), rot180 (OpenVLA's LIBERO convention), none."""
    hard_reset: bool = False
    """Rebuild the MuJoCo model on every reset (slower; robosuite's default)."""
    extra: dict = field(default_factory=dict)
    """Extra keyword arguments for robosuite.make."""


class RobosuiteEnv(SuiteEnvBase):
    """A robosuite task (Panda, OSC_POSE by default) behind the common interface."""

    def __init__(self, cfg: RobosuiteConfig | None = None) -> None:
        super().__init__()
        cfg = cfg or RobosuiteConfig()
        self.cfg = cfg
        self.cameras, self.flip, self.max_steps = tuple(cfg.cameras), cfg.flip, cfg.max_steps
        self.instruction = cfg.instruction or ROBOSUITE_INSTRUCTIONS.get(cfg.task, cfg.task)
        configure_gl()
        try:
            import robosuite as suite  # noqa: PLC0415  (after configure_gl)
        except ImportError as e:
            raise ImportError("robosuite is not installed: pip install -e '.[sim]' (see robots/README.md)") from e

        render = bool(self.cameras)
        sizes = list(cfg.camera_sizes) if cfg.camera_sizes else cfg.image_size
        if cfg.camera_sizes and len(cfg.camera_sizes) != len(self.cameras):
            raise ValueError(f"camera_sizes {tuple(cfg.camera_sizes)} must give one size per camera {self.cameras}")
        self._env = suite.make(
            cfg.task,
            robots=cfg.robot,
            controller_configs=suite.load_controller_config(default_controller=cfg.controller),
            has_renderer=False,
            has_offscreen_renderer=render,
            use_camera_obs=render,
            camera_names=list(self.cameras) if render else "agentview",
            camera_heights=sizes,
            camera_widths=sizes,
            control_freq=cfg.control_freq,
            reward_shaping=cfg.reward_shaping,
            # We count steps ourselves (truncated); robosuite must never refuse a step.
            horizon=cfg.max_steps + 1000,
            ignore_done=True,
            hard_reset=cfg.hard_reset,
            **cfg.extra,
        )
        track_for_exit(self)

    def reset(self, seed: int | None = None, init_state: Any = None) -> dict:
        """New episode; `seed` fixes robosuite's object placement, `init_state` restores a get_state()."""
        if seed is not None:
            # robosuite 1.4's placement samplers draw from numpy's global generator.
            np.random.seed(seed % (2**32))
        raw = self._env.reset()
        self._t = 0
        if init_state is not None:
            raw = self._set_state(init_state)
        else:
            for robot in self._env.robots:
                _sync_gripper(self._env.sim, robot)  # a soft reset keeps the last episode's gripper command
        return self._obs(raw)


# The FIRST robosuite simulator with cameras built in a process renders nondeterministically (software EGL
# here): its frames differ from run to run while every later simulator's frames are identical (measured: the
# first frame of the first episode had a different hash in each of 3 runs; with one simulator built and held
# beforehand, all first frames matched; a bare EGL context held beforehand did not help). So the first such
# build in a process (the trainer's, or each vec-env worker's) is a sacrificial simulator, kept alive and
# never handed out. Frames still depend on the build history, so they are reproducible for a fixed program,
# not across different ones. LIBERO's builder is not covered (untested).
_SACRIFICED: list = []


def make_env(cfg) -> RobotEnv:
    """Build the env described by a RobosuiteConfig or LiberoConfig (picklable: vec-env workers call it)."""
    if isinstance(cfg, RobosuiteConfig):
        if cfg.cameras and not _SACRIFICED:
            _SACRIFICED.append(RobosuiteEnv(cfg))
            _SACRIFICED[0].reset(seed=0)  # renders once, as in the measurement
        return RobosuiteEnv(cfg)
    from robots.libero_env import LiberoConfig, LiberoEnv  # noqa: PLC0415  (LIBERO is optional)

    if isinstance(cfg, LiberoConfig):
        return LiberoEnv(cfg)
    raise TypeError(f"unknown env config {type(cfg).__name__}")


def replace(cfg, **changes):
    """dataclasses.replace, re-exported for config tweaks (e.g. no cameras for benchmarks)."""
    return dataclasses.replace(cfg, **changes)
