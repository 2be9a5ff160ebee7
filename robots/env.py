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

ACTION_DIM = 7
PROPRIO_DIM = 8
FLIPS = ("vertical", "rot180", "none")
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


def flip_image(img: np.ndarray, flip: str) -> np.ndarray:
    """Orient a raw MuJoCo render; returns a contiguous copy so callers may keep it."""
    if flip == "vertical":
        img = img[::-1]
    elif flip == "rot180":
        img = img[::-1, ::-1]
    elif flip != "none":
        raise ValueError(f"flip must be one of {FLIPS}, got {flip!r}")
    return np.ascontiguousarray(img, dtype=np.uint8)


def quat_to_axis_angle(quat_xyzw: np.ndarray) -> np.ndarray:
    """Axis-angle (3) from a unit quaternion in robosuite's (x, y, z, w) order."""
    q = np.asarray(quat_xyzw, dtype=np.float64)
    w = float(np.clip(q[3], -1.0, 1.0))
    s = np.sqrt(max(1.0 - w * w, 0.0))
    if s < 1e-8:
        return np.zeros(3)
    return q[:3] / s * 2.0 * np.arccos(w)


def build_obs(raw: dict, cameras: tuple[str, ...], flip: str, instruction: str) -> dict:
    """Common observation dict from a robosuite-style raw observation."""
    proprio = np.concatenate(
        [raw["robot0_eef_pos"], quat_to_axis_angle(raw["robot0_eef_quat"]), raw["robot0_gripper_qpos"][:2]]
    ).astype(np.float32)
    images = {cam: flip_image(raw[f"{cam}_image"], flip) for cam in cameras}
    return {"images": images, "proprio": proprio, "instruction": instruction}


def check_action(action) -> np.ndarray:
    """Validate a [7] action (finite numbers) and clip it to the controller's [-1, 1] range."""
    a = np.asarray(action, dtype=np.float64).reshape(-1)
    if a.shape != (ACTION_DIM,):
        raise ValueError(f"action must have {ACTION_DIM} values, got shape {np.shape(action)}")
    if not np.all(np.isfinite(a)):
        raise ValueError("action contains NaN or inf")
    return np.clip(a, -1.0, 1.0)


def _sync_gripper(sim, robot) -> None:
    """robosuite grippers integrate their command (current_action) across steps and keep it across resets;
    set it to the command that holds the restored finger positions, so a restored state replays like
    the original (without this, fingers drift for the first steps and replays diverge)."""
    gripper = getattr(robot, "gripper", None)
    idx = getattr(robot, "_ref_joint_gripper_actuator_indexes", None)
    if gripper is None or not hasattr(gripper, "current_action") or not idx:
        return
    lo, hi = sim.model.actuator_ctrlrange[idx].T
    q = sim.data.qpos[robot._ref_gripper_joint_pos_indexes]
    gripper.current_action = np.clip((q - 0.5 * (hi + lo)) / (0.5 * (hi - lo)), -1.0, 1.0)


class SuiteEnvBase:
    """Shared episode bookkeeping for robosuite-backed envs; subclasses set self._env and friends."""

    cameras: tuple[str, ...] = ()
    flip: str = "vertical"
    max_steps: int = 200
    instruction: str = ""

    def __init__(self) -> None:
        self._t = 0
        self._raw: dict = {}

    def _obs(self, raw: dict) -> dict:
        self._raw = raw
        return build_obs(raw, self.cameras, self.flip, self.instruction)

    def _success(self) -> bool:
        return bool(self._env._check_success())

    def _reward(self, reward: float) -> float:
        return float(reward)

    def step(self, action) -> tuple[dict, float, bool, bool, dict]:
        a = check_action(action)
        raw, reward, _, _ = self._env.step(a)
        self._t += 1
        success = self._success()
        info = {"success": success, "step": self._t}
        return self._obs(raw), self._reward(reward), success, self._t >= self.max_steps, info

    def get_state(self) -> np.ndarray:
        """Flattened MuJoCo state (time, qpos, qvel): reset(init_state=...) returns here."""
        return np.asarray(self._env.sim.get_state().flatten(), dtype=np.float64)

    def _set_state(self, state) -> dict:
        sim = self._env.sim
        sim.set_state_from_flattened(np.asarray(state, dtype=np.float64))
        sim.forward()
        for robot in self._env.robots:
            # OSC's nullspace target is the joint configuration at reset; without this a restored state is
            # pulled towards the previous episode's start pose and replays diverge by centimetres.
            robot.controller.update_initial_joints(sim.data.qpos[robot._ref_joint_pos_indexes])
            _sync_gripper(sim, robot)
        # Let robosuite refresh its cached observables from the new state.
        self._env._update_observables(force=True)
        return self._env._get_observations(force_update=True)

    @property
    def raw_obs(self) -> dict:
        """The last raw robosuite observation (object poses etc.), used by scripted experts."""
        return self._raw

    def close(self) -> None:
        env, self._env = getattr(self, "_env", None), None
        if env is not None:
            env.close()


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
