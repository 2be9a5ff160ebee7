"""CLEVR-like MuJoCo pairs: the recorded scene graphs differ exactly at the replaced objects, and the
pixels differ only inside those objects' silhouettes."""

import importlib.util
import json
import math

import numpy as np
import pytest

if importlib.util.find_spec("mujoco") is None:  # not importorskip: mujoco must not be imported before MUJOCO_GL is set
    pytest.skip("mujoco is not installed (pip install -e '.[sim]')", allow_module_level=True)

from tasks.vision_zero.pairs import box_mask, diff_mask  # noqa: E402
from tasks.vision_zero.pairs.clevr import (  # noqa: E402
    ATTRIBUTES, MIN_DISTANCE, PAD, SceneObject, dilate, clevr_pair, project, random_scene, render_scene,
    replace_objects,
)

pytestmark = pytest.mark.sim


@pytest.mark.parametrize("seed,k", [(0, 2), (1, 1), (2, 3)])
def test_record_matches_the_scenes_and_the_pixels(seed, k):
    pair = clevr_pair(seed, k=k)
    rec = pair.record
    json.dumps(rec)
    objs, mods = rec["objects"], rec["modified_objects"]
    assert 3 <= len(objs) == len(mods) <= 8 and len(rec["changed"]) == k
    for i, (a, b) in enumerate(zip(objs, mods)):
        assert (a["position"][:2], a["yaw"]) == (b["position"][:2], b["yaw"])  # same place
        differing = [name for name in ATTRIBUTES if a[name] != b[name]]
        assert bool(differing) == (i in rec["changed"])
        assert a["pixels"] >= 30 and b["pixels"] >= 30
    for c in rec["changes"]:
        assert c["attributes"] == [n for n in ATTRIBUTES if objs[c["index"]][n] != mods[c["index"]][n]]
    m = diff_mask(pair.original, pair.modified)
    assert not (m & ~box_mask(m.shape, [c["box"] for c in rec["changes"]])).any()
    for c in rec["changes"]:
        assert (m & box_mask(m.shape, [c["box"]])).sum() >= 30


def test_pixels_change_only_inside_the_replaced_silhouettes():
    rng = np.random.default_rng(5)
    objects = random_scene(rng, 6)
    modified, idx = replace_objects(rng, objects, 2)
    a, masks_a = render_scene(objects)
    b, masks_b = render_scene(modified)
    m = diff_mask(a, b)
    allowed = np.zeros_like(m)
    for i in idx:
        allowed |= dilate(masks_a[i] | masks_b[i], PAD)
    assert m.any() and not (m & ~allowed).any()
    for i in set(range(6)) - set(idx):  # untouched objects keep their silhouettes unless uncovered
        assert not (masks_a[i] & ~masks_b[i] & ~allowed).any()


def test_same_seed_same_pair():
    p, q = clevr_pair(7, num_objects=4), clevr_pair(7, num_objects=4)
    assert np.array_equal(p.original, q.original) and np.array_equal(p.modified, q.modified)
    assert p.record == q.record
    assert clevr_pair(8, num_objects=4).record != p.record


def test_scene_layout():
    objs = random_scene(np.random.default_rng(0), 8)
    for i, o in enumerate(objs):
        for p in objs[i + 1:]:
            assert math.hypot(o.x - p.x, o.y - p.y) >= MIN_DISTANCE


@pytest.mark.parametrize("x,y", [(0.0, 0.0), (-2.0, 1.5), (2.5, -2.0)])
def test_projection_hits_the_rendered_object(x, y):
    sphere = SceneObject("sphere", "red", "rubber", "large", x, y, 0.0)
    _, masks = render_scene([sphere])
    ys, xs = np.nonzero(masks[0])
    u, v = project(np.array([[x, y, 0.7]]), 320, 240)[0]
    # a sphere's silhouette is (nearly) centred on its projected centre
    assert abs(u - (xs.min() + xs.max() + 1) / 2) < 2 and abs(v - (ys.min() + ys.max() + 1) / 2) < 2


@pytest.mark.parametrize("kwargs", [{"num_objects": 2}, {"num_objects": 9}, {"k": 0}, {"num_objects": 3, "k": 4}])
def test_refuses_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        clevr_pair(0, **kwargs)


def test_mujoco_imported_before_the_gl_choice_is_named():
    import os
    import subprocess
    import sys

    code = ("import mujoco\nfrom tasks.vision_zero.pairs.clevr import SceneObject, render_scene\n"
            "render_scene([SceneObject('cube', 'red', 'metal', 'small', 0.0, 0.0, 0.0)])\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, env=dict(env, PYTHONPATH=root),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "imported with MUJOCO_GL=''" in proc.stderr, proc.stderr[-2000:]


def test_dilate_golden():
    m = np.zeros((6, 7), bool)
    m[0, 6] = True
    m[4, 2] = True
    out = dilate(m, 1)
    expected = np.zeros((6, 7), bool)
    expected[0:2, 5:7] = True  # clipped at the corner
    expected[3:6, 1:4] = True
    assert np.array_equal(out, expected)


def test_exit_is_quiet_when_a_scene_is_rendered_beside_a_live_robot_env():
    """mujoco registers eglTerminate at exit on its first render context, after the robot envs' close-at-exit hook:
    that hook then ran after the display was terminated and each live robosuite context printed an EGLError
    traceback (34 of them at the end of the full suite). render_scene now moves the hook behind it."""
    import subprocess
    import sys

    code = ("import numpy as np\n"
            "from robots.env import RobosuiteConfig, make_env\n"
            "from tasks.vision_zero.pairs.clevr import random_scene, render_scene\n"
            "env = make_env(RobosuiteConfig(cameras=('agentview',), image_size=32))\n"
            "env.reset(seed=0)\n"
            "render_scene(random_scene(np.random.default_rng(0), 3), 64, 48)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Exception ignored" not in proc.stderr and "EGLError" not in proc.stderr, proc.stderr[-3000:]
