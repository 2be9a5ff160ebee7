"""Automatic task segments and pseudo-labels from simulator data (for the task-completion PRM).

No success signal is used: segment boundaries come from

* gripper events: the gripper command changes sign (``close`` / ``open``), at the first action with the
  new command (its frame index: the observation before that action);
* object-state changes: the object's height above its resting height crosses `lift_height`
  (``lifted`` / ``lowered``; resting height = median of the first 5 frames; 2 cm matches robosuite's
  Lift success height), and the object first leaves its start position horizontally (``moved``).

Segments are the spans between consecutive boundaries, named by the event that opens them
(``start`` for the first). Pseudo-labels for the prompt "The task is {task}, is it completed?":

* ``lift`` tasks: completed on frames where the object is up (after a ``lifted`` event, before the next
  ``lowered``) while the gripper is closed;
* ``grasp`` subtask: completed while the gripper is closed and the object has risen `grasp_height`
  above rest (it moves with the gripper);
* ``place`` tasks: completed on frames after the gripper opened (having been closed) where the object is at
  rest (moved < 2 mm since the previous frame) at least `place_distance` (horizontally) from its start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Event:
    t: int
    kind: str  # close | open | lifted | lowered | moved


@dataclass
class Segment:
    start: int  # first frame
    end: int  # one past the last frame
    kind: str  # the event that opened it (start for the first segment)


def gripper_events(cmd) -> list[Event]:
    """close/open events where the gripper command's sign changes (0 keeps the previous state)."""
    cmd = np.asarray(cmd, dtype=np.float64).reshape(-1)
    out, state = [], None
    for t, c in enumerate(cmd):
        s = None if c == 0 else (c > 0)
        if s is None:
            continue
        if state is not None and s != state:
            out.append(Event(t, "close" if s else "open"))
        state = s
    return out


def rest_height_of(obj_pos, settle: int = 5) -> float:
    """The object's resting height: the median height over the first `settle` frames (objects are placed
    slightly above the table at reset and drop onto it in the first step)."""
    z = np.asarray(obj_pos, dtype=np.float64)[:, 2]
    return float(np.median(z[: max(1, min(settle, len(z)))]))


def lifted_mask(obj_pos, lift_height: float = 0.02, rest_height: float | None = None) -> np.ndarray:
    """bool [T1]: the object is more than `lift_height` above its resting height (default: `rest_height_of`)."""
    z = np.asarray(obj_pos, dtype=np.float64)[:, 2]
    rest = rest_height_of(obj_pos) if rest_height is None else rest_height
    return z - rest > lift_height


def object_events(obj_pos, lift_height: float = 0.02, move_distance: float = 0.01,
                  rest_height: float | None = None) -> list[Event]:
    """moved (first horizontal displacement > move_distance), lifted / lowered (height crossings)."""
    p = np.asarray(obj_pos, dtype=np.float64)
    out = []
    disp = np.linalg.norm(p[:, :2] - p[0, :2], axis=1)
    moved = np.flatnonzero(disp > move_distance)
    if len(moved):
        out.append(Event(int(moved[0]), "moved"))
    up = lifted_mask(p, lift_height, rest_height)
    for t in range(1, len(up)):
        if up[t] != up[t - 1]:
            out.append(Event(t, "lifted" if up[t] else "lowered"))
    if len(up) and up[0]:
        out.append(Event(0, "lifted"))
    return sorted(out, key=lambda e: (e.t, e.kind))


def extract_segments(gripper_cmd, obj_pos, n_frames: int | None = None, **kw) -> tuple[list[Segment], list[Event]]:
    """(segments covering frames 0..n_frames-1, all events sorted by time)."""
    n = len(obj_pos) if n_frames is None else n_frames
    events = sorted(gripper_events(gripper_cmd) + object_events(obj_pos, **kw), key=lambda e: (e.t, e.kind))
    bounds, kinds = [0], ["start"]
    for e in events:
        if 0 < e.t < n:
            if e.t == bounds[-1]:
                kinds[-1] = kinds[-1] + "+" + e.kind if kinds[-1] != "start" else e.kind
            else:
                bounds.append(e.t)
                kinds.append(e.kind)
    ends = bounds[1:] + [n]
    return [Segment(s, e, k) for s, e, k in zip(bounds, ends, kinds)], events


def gripper_closed(gripper_cmd, n_frames: int) -> np.ndarray:
    """bool [n_frames]: the gripper command in force at each frame (frame t shows the result of action t-1)."""
    cmd = np.asarray(gripper_cmd, dtype=np.float64).reshape(-1)
    closed = np.zeros(n_frames, dtype=bool)
    state = False
    for t in range(1, n_frames):
        if t - 1 < len(cmd) and cmd[t - 1] != 0:
            state = cmd[t - 1] > 0
        closed[t] = state
    return closed


def pseudo_labels(kind: str, gripper_cmd, obj_pos, lift_height: float = 0.02, grasp_height: float = 0.005,
                  place_distance: float = 0.05, rest_height: float | None = None) -> np.ndarray:
    """float [T1] completion labels (0/1) of a `lift`, `grasp` or `place` task (module docstring)."""
    p = np.asarray(obj_pos, dtype=np.float64)
    n = len(p)
    closed = gripper_closed(gripper_cmd, n)
    if kind == "lift":
        return (lifted_mask(p, lift_height, rest_height) & closed).astype(np.float32)
    if kind == "grasp":
        return (lifted_mask(p, grasp_height, rest_height) & closed).astype(np.float32)
    if kind == "place":
        # released (an open command after the gripper was closed), the object at rest (moved < 2 mm since
        # the last frame) and at least `place_distance` away (horizontally) from where it started
        step = np.concatenate([[0.0], np.linalg.norm(np.diff(p, axis=0), axis=1)])
        away = np.linalg.norm(p[:, :2] - p[0, :2], axis=1) > place_distance
        released = np.zeros(n, dtype=bool)
        was_closed = False
        for t in range(1, n):
            was_closed |= bool(closed[t])
            released[t] = was_closed and not closed[t]
        return (released & (step < 0.002) & away).astype(np.float32)
    raise ValueError(f"kind must be lift, grasp or place, got {kind!r}")
