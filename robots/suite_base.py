"""What every robosuite-backed env shares (robosuite and LIBERO): the observation dict, action checks, image
orientation and the episode bookkeeping of `SuiteEnvBase`. Its own module so that robots/libero_env.py and
robots/env.py (whose `make_env` builds either) do not import each other."""

from __future__ import annotations

import gc
import weakref

import numpy as np

from robots.gl import close_before_egl_exit

ACTION_DIM = 7
PROPRIO_DIM = 8
FLIPS = ("vertical", "rot180", "none")


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


_LIVE: weakref.WeakSet = weakref.WeakSet()  # built envs not yet closed


def _close_live_envs() -> None:
    for env in list(_LIVE):
        env.close()
    gc.collect()


def track_for_exit(env: "SuiteEnvBase") -> None:
    """Close `env` at interpreter exit if nobody did, before EGL is terminated (robots.gl.close_before_egl_exit;
    called on every build: robosuite registers eglTerminate on its first render context, which may come after the
    first build, when that env had no camera)."""
    close_before_egl_exit(_close_live_envs)
    _LIVE.add(env)


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
