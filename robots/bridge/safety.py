"""Server-side safety filter, always on: clamp to limits and a workspace box, rate-limit action changes.

Two action modes:
  delta_ee: [dx, dy, dz, droll, dpitch, dyaw, gripper], normalised as the OSC_POSE controller expects
            (1 unit = `delta_scale_m` metres); the workspace box is enforced on the predicted position.
  joint:    absolute joint targets [n_joints] + gripper, clamped to joint limits and a max step per tick.
NaN / inf never reach this layer (protocol.validate_action refuses them); the filter re-checks anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class SafetyConfig:
    """Limits the server enforces on every command, whatever the client sends."""

    action_mode: str = "delta_ee"
    """delta_ee (Cartesian delta + gripper) or joint (absolute joint targets + gripper)."""
    max_translation: float = 1.0
    """Largest |dx|, |dy|, |dz| per tick, in normalised controller units."""
    max_rotation: float = 1.0
    """Largest |droll|, |dpitch|, |dyaw| per tick, in normalised controller units."""
    gripper_low: float = -1.0
    """Lowest gripper command (-1 = open)."""
    gripper_high: float = 1.0
    """Highest gripper command (+1 = closed)."""
    delta_scale_m: float = 0.05
    """Metres moved per unit of translation command (robosuite OSC_POSE default output_max)."""
    workspace_low: tuple[float, float, float] = (-0.35, -0.40, 0.80)
    """Lower corner of the allowed end-effector box, metres in the robot/world frame."""
    workspace_high: tuple[float, float, float] = (0.35, 0.40, 1.35)
    """Upper corner of the allowed end-effector box."""
    max_action_change: float = 0.5
    """Rate limit: largest change of any arm action component from one tick to the next."""
    max_gripper_change: float = 2.0
    """Rate limit on the gripper command (2 = may toggle open/closed in one tick)."""
    joint_low: tuple[float, ...] = ()
    """Joint-mode lower joint limits (radians); required in joint mode."""
    joint_high: tuple[float, ...] = ()
    """Joint-mode upper joint limits (radians)."""
    max_joint_step: float = 0.05
    """Joint mode: largest target change per tick relative to the measured joint position (radians)."""

    @property
    def action_dim(self) -> int:
        return 7 if self.action_mode == "delta_ee" else len(self.joint_low) + 1

    def __post_init__(self) -> None:
        if self.action_mode not in ("delta_ee", "joint"):
            raise ValueError("action_mode must be delta_ee or joint")
        if self.action_mode == "joint" and (not self.joint_low or len(self.joint_low) != len(self.joint_high)):
            raise ValueError("joint mode needs joint_low and joint_high of equal length")
        if np.any(np.asarray(self.workspace_low) >= np.asarray(self.workspace_high)):
            raise ValueError("workspace_low must be below workspace_high")


class SafetyFilter:
    """Stateful filter (remembers the last applied action for rate limiting)."""

    def __init__(self, cfg: SafetyConfig) -> None:
        self.cfg = cfg
        self.prev: np.ndarray | None = None

    def reset(self) -> None:
        """Forget the last action (new episode, or after a hold: restart from rest)."""
        self.prev = None

    def __call__(self, action: np.ndarray, proprio: np.ndarray | None = None) -> tuple[np.ndarray, list[str]]:
        """Return the safe action and the list of limits that changed it (empty = passed unchanged)."""
        a = np.asarray(action, dtype=np.float64).copy()
        if a.shape != (self.cfg.action_dim,) or not np.all(np.isfinite(a)):
            raise ValueError("action has the wrong shape or is not finite")
        fired: list[str] = []
        if self.cfg.action_mode == "delta_ee":
            a = self._delta_ee(a, proprio, fired)
        else:
            a = self._joint(a, proprio, fired)
        self.prev = a.copy()
        return a, fired

    def _clip(self, a: np.ndarray, lo, hi, name: str, fired: list[str]) -> np.ndarray:
        out = np.clip(a, lo, hi)
        if not np.array_equal(out, a):
            fired.append(name)
        return out

    def _rate(self, a: np.ndarray, fired: list[str]) -> np.ndarray:
        prev = self.prev if self.prev is not None else np.zeros_like(a)
        if self.cfg.action_mode == "delta_ee" and self.prev is None:
            prev[-1] = a[-1]  # the gripper has no "previous" on the first tick
        step = np.full_like(a, self.cfg.max_action_change)
        step[-1] = self.cfg.max_gripper_change
        return self._clip(a, prev - step, prev + step, "rate_limit", fired)

    def _delta_ee(self, a: np.ndarray, proprio, fired: list[str]) -> np.ndarray:
        c = self.cfg
        a[:3] = self._clip(a[:3], -c.max_translation, c.max_translation, "translation_limit", fired)
        a[3:6] = self._clip(a[3:6], -c.max_rotation, c.max_rotation, "rotation_limit", fired)
        a[6:] = self._clip(a[6:], c.gripper_low, c.gripper_high, "gripper_limit", fired)
        a = self._rate(a, fired)
        if proprio is not None:
            # Predict where the end effector goes and shrink the translation so it stays in the box.
            pos = np.asarray(proprio[:3], dtype=np.float64)
            target = pos + a[:3] * c.delta_scale_m
            lo, hi = np.asarray(c.workspace_low), np.asarray(c.workspace_high)
            # Outside the box (e.g. after a reset), moving back in is allowed but moving further out is not.
            inside = np.clip(target, np.minimum(lo, pos), np.maximum(hi, pos))
            if not np.allclose(inside, target):
                fired.append("workspace")
                a[:3] = (inside - pos) / c.delta_scale_m
        return a

    def _joint(self, a: np.ndarray, proprio, fired: list[str]) -> np.ndarray:
        c = self.cfg
        a[:-1] = self._clip(a[:-1], c.joint_low, c.joint_high, "joint_limit", fired)
        a[-1:] = self._clip(a[-1:], c.gripper_low, c.gripper_high, "gripper_limit", fired)
        if proprio is not None:
            q = np.asarray(proprio[: len(c.joint_low)], dtype=np.float64)
            a[:-1] = self._clip(a[:-1], q - c.max_joint_step, q + c.max_joint_step, "joint_step", fired)
        return a
