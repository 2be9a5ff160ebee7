"""Golden tests for segment extraction and PRM pseudo-labels on synthetic arrays."""

import numpy as np
import pytest

from rewards.learned.segments import (
    extract_segments,
    gripper_closed,
    gripper_events,
    lifted_mask,
    object_events,
    pseudo_labels,
    rest_height_of,
)


def lift_episode():
    """10 frames, 9 actions: close at action 3, object up 3 cm at frames 5..7, open at action 7, falls at 9."""
    cmd = np.array([-1, -1, -1, 1, 1, 1, 1, -1, -1], dtype=float)
    z = np.array([0.83, 0.82, 0.82, 0.82, 0.82, 0.85, 0.86, 0.86, 0.845, 0.82])
    obj = np.stack([np.zeros(10), np.zeros(10), z], 1)
    return cmd, obj


def test_gripper_events_and_state():
    cmd, _ = lift_episode()
    ev = gripper_events(cmd)
    assert [(e.t, e.kind) for e in ev] == [(3, "close"), (7, "open")]
    # 0 keeps the previous command
    assert [(e.t, e.kind) for e in gripper_events([1, 0, 0, -1, 0, 1])] == [(3, "open"), (5, "close")]
    # frame t shows the result of action t-1
    assert gripper_closed(cmd, 10).tolist() == [False] * 4 + [True] * 4 + [False] * 2


def test_object_events_rest_height_settles():
    _, obj = lift_episode()
    assert rest_height_of(obj) == pytest.approx(0.82)  # median of 0.83, 0.82 x4
    assert lifted_mask(obj).tolist() == [False] * 5 + [True, True, True, True, False]  # 0.845-0.82 > 0.02
    ev = object_events(obj)
    assert [(e.t, e.kind) for e in ev] == [(5, "lifted"), (9, "lowered")]
    moved = np.array([[0, 0, 0.82], [0.005, 0, 0.82], [0.02, 0, 0.82]])
    assert [(e.t, e.kind) for e in object_events(moved)] == [(2, "moved")]


def test_segments_cover_the_episode():
    cmd, obj = lift_episode()
    segs, events = extract_segments(cmd, obj)
    assert [(s.start, s.end, s.kind) for s in segs] == [(0, 3, "start"), (3, 5, "close"), (5, 7, "lifted"),
                                                        (7, 9, "open"), (9, 10, "lowered")]
    assert segs[0].start == 0 and segs[-1].end == 10
    assert all(a.end == b.start for a, b in zip(segs, segs[1:]))
    # simultaneous events share one boundary
    segs2, _ = extract_segments([-1, 1, 1], np.array([[0, 0, 0.8], [0.05, 0, 0.8], [0.05, 0, 0.8]]))
    assert [(s.start, s.kind) for s in segs2] == [(0, "start"), (1, "close+moved")]


def test_lift_and_grasp_pseudo_labels():
    cmd, obj = lift_episode()
    # lift: up (> 2 cm) and gripper closed: frames 5, 6, 7 (frame 8 is still 2.5 cm up but released: 0)
    assert pseudo_labels("lift", cmd, obj).tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 0, 0]
    # grasp: closed and risen > 5 mm: same frames here
    assert pseudo_labels("grasp", cmd, obj).tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 0, 0]
    # a higher threshold drops frame 5 (3 cm)
    assert pseudo_labels("lift", cmd, obj, lift_height=0.035).tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 0, 0]


def test_place_pseudo_labels():
    cmd = np.array([-1, 1, 1, 1, -1, -1], dtype=float)
    x = np.array([0.0, 0.0, 0.03, 0.08, 0.08, 0.08])
    obj = np.stack([x, np.zeros(6), np.array([0.82, 0.82, 0.86, 0.86, 0.83, 0.83])], 1)
    # released from frame 5 on (action 4 opened); at rest (step < 2 mm) only at frame 5; away 8 cm > 5 cm
    assert pseudo_labels("place", cmd, obj).tolist() == [0, 0, 0, 0, 0, 1]
    with pytest.raises(ValueError):
        pseudo_labels("fly", cmd, obj)
