"""Human-in-the-loop pieces: teleop adapters (keyboard, scripted, remote operator) for takeover.

A teleop adapter is anything with `action(obs) -> np.ndarray | None` (None = hold still this tick).
Gamepads plug in the same way: map stick axes to the 7-d delta action in a class with that method.
"""

from __future__ import annotations

import collections
import threading
from typing import Iterable, Protocol

import numpy as np

# Keyboard layout for Cartesian teleop: key -> (action index, sign). Space toggles the gripper.
KEYMAP = {
    "w": (0, +1), "s": (0, -1), "a": (1, +1), "d": (1, -1), "r": (2, +1), "f": (2, -1),
    "z": (3, +1), "x": (3, -1), "t": (4, +1), "g": (4, -1), "c": (5, +1), "v": (5, -1),
}


class Teleop(Protocol):
    """Source of human actions during a takeover."""

    def action(self, obs: dict) -> np.ndarray | None: ...


class ScriptedTeleop:
    """Replays a fixed list of actions, one per tick, then holds (the 'operator' of tests and demos)."""

    def __init__(self, actions: Iterable) -> None:
        self._queue = collections.deque(np.asarray(a, dtype=np.float64) for a in actions)

    def action(self, obs: dict) -> np.ndarray | None:
        return self._queue.popleft() if self._queue else None

    @property
    def remaining(self) -> int:
        """Actions not replayed yet."""
        return len(self._queue)


class RemoteTeleop:
    """Actions streamed by an operator client ("teleop" messages); each is used for one tick."""

    def __init__(self) -> None:
        self._latest: np.ndarray | None = None
        self._lock = threading.Lock()

    def push(self, action: np.ndarray) -> None:
        with self._lock:
            self._latest = np.asarray(action, dtype=np.float64)

    def action(self, obs: dict) -> np.ndarray | None:
        with self._lock:
            a, self._latest = self._latest, None
        return a

    def clear(self) -> None:
        """Forget an action not used yet (a takeover starts, or ends, from a hold)."""
        with self._lock:
            self._latest = None


class KeyboardTeleop:
    """Keyboard teleop: feed key presses (from a terminal reader, pynput, a GUI) into press()."""

    def __init__(self, speed: float = 0.5) -> None:
        self.speed = speed
        self.gripper = -1.0
        self._pending: list[str] = []
        self._lock = threading.Lock()

    def press(self, key: str) -> None:
        with self._lock:
            self._pending.append(key)

    def action(self, obs: dict) -> np.ndarray | None:
        with self._lock:
            keys, self._pending = self._pending, []
        if not keys:
            return None
        a = np.zeros(7)
        for k in keys:
            if k == " ":
                self.gripper = -self.gripper
            elif k in KEYMAP:
                i, sign = KEYMAP[k]
                a[i] += sign * self.speed
        a[6] = self.gripper
        return np.clip(a, -1, 1)
