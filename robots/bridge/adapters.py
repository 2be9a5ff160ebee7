"""What the bridge server drives: a simulator (for tests and sim-to-real dry runs) or LeRobot hardware.

The server calls every adapter method from one dedicated thread, because OpenGL contexts (simulator
cameras) and most robot SDK handles belong to the thread that created them.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np


class RobotAdapter(Protocol):
    """A robot or simulator as the server sees it."""

    action_mode: str  # "delta_ee" or "joint" (see safety.SafetyConfig)

    def start(self) -> dict: ...  # connect / build; returns the first observation
    def observe(self) -> dict: ...  # {"images": {...}, "proprio": [...], "instruction": str}
    def apply(self, action: np.ndarray) -> dict: ...  # one control tick; {"reward", "success", ...}
    def hold(self) -> None: ...  # keep the current pose (no new motion)
    def estop(self) -> None: ...  # stop now (real robots: disable/brake)
    def reset(self, seed: int | None = None, init_state: Any = None) -> dict: ...
    def get_state(self) -> np.ndarray | None: ...  # a state reset() can return to, if the robot has one
    def close(self) -> None: ...


class SimAdapter:
    """A simulated env (robots.env interface) behind the bridge. Sim time only advances on apply()."""

    action_mode = "delta_ee"

    def __init__(self, env_fn: Callable[[], Any], seed: int = 0) -> None:
        self._env_fn, self._seed = env_fn, seed
        self.env = None
        self._obs: dict | None = None
        self.stopped = False

    def start(self) -> dict:
        self.env = self._env_fn()
        self._obs = self.env.reset(seed=self._seed)
        return self._obs

    def observe(self) -> dict:
        return self._obs

    def apply(self, action: np.ndarray) -> dict:
        if self.stopped:
            raise RuntimeError("adapter is e-stopped")  # defence in depth: the server never calls this
        obs, reward, success, truncated, info = self.env.step(action)
        self._obs = obs
        return {**info, "reward": float(reward), "success": bool(success), "truncated": bool(truncated)}

    def hold(self) -> None:
        pass  # a paused simulator does not move

    def estop(self) -> None:
        self.stopped = True

    def reset(self, seed: int | None = None, init_state: Any = None) -> dict:
        self.stopped = False
        self._obs = self.env.reset(seed=seed, init_state=init_state)
        return self._obs

    def get_state(self) -> np.ndarray | None:
        return self.env.get_state()

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


class LeRobotAdapter:
    """LeRobot-supported hardware (joint-position control), used only when `lerobot` is installed.

    `robot` is a connected-or-connectable LeRobot robot object (get_observation / send_action with
    feature-named dicts). Untested here: lerobot is not installed in CI; the server's safety layer still
    clamps every joint target before send_action is called.
    """

    action_mode = "joint"

    def __init__(self, robot: Any, camera_keys: tuple[str, ...] = (), instruction: str = "") -> None:
        try:
            import lerobot  # noqa: F401, PLC0415
        except ImportError as e:
            raise ImportError("LeRobotAdapter needs the optional `lerobot` package") from e
        self.robot, self.camera_keys, self.instruction = robot, camera_keys, instruction
        self._joint_keys: list[str] = []
        self._last: np.ndarray | None = None

    def start(self) -> dict:
        if not getattr(self.robot, "is_connected", False):
            self.robot.connect()
        self._joint_keys = [k for k in self.robot.action_features]
        return self.observe()

    def observe(self) -> dict:
        raw = self.robot.get_observation()
        q = np.array([raw[k] for k in self._joint_keys], dtype=np.float32)
        self._last = q
        images = {k: np.asarray(raw[k], dtype=np.uint8) for k in self.camera_keys if k in raw}
        return {"images": images, "proprio": q, "instruction": self.instruction}

    def apply(self, action: np.ndarray) -> dict:
        # LeRobot's gripper is one of the action features; our last component maps onto the last key.
        self.robot.send_action({k: float(v) for k, v in zip(self._joint_keys, action)})
        return {"reward": 0.0, "success": False, "truncated": False}

    def hold(self) -> None:
        if self._last is not None:
            self.robot.send_action({k: float(v) for k, v in zip(self._joint_keys, self._last)})

    def estop(self) -> None:
        self.hold()
        self.robot.disconnect()  # LeRobot disables torque on disconnect

    def reset(self, seed: int | None = None, init_state: Any = None) -> dict:
        return self.observe()  # a human resets real scenes; return-to-state is a motion the operator drives

    def get_state(self) -> np.ndarray | None:
        return self._last

    def close(self) -> None:
        if getattr(self.robot, "is_connected", False):
            self.robot.disconnect()
