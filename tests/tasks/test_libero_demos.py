"""LIBERO demos: noisy-expert frames on train-split placements, served to behaviour cloning with the prompt and
image that the task=libero evaluation shows."""
import json

import numpy as np
import pytest

pytest.importorskip("libero")

from tasks import libero as task  # noqa: E402
from tasks.libero.demos import main  # noqa: E402

pytestmark = [pytest.mark.libero, pytest.mark.slow, pytest.mark.timeout(600)]


def test_demos_record_what_the_policy_sees_and_bc_serves_it(tmp_path):
    out = tmp_path / "demos"
    meta = main(["--suite", "libero_object", "--task-id", "1", "--episodes", "2", "--max-steps", "12",
                 "--render-size", "64", "--image-size", "32", "--out", str(out)])
    assert meta["frames"] == 24 and meta["split"].startswith("train") and meta["expert_success_rate"] == 0.0
    assert json.loads((out / "DEMOS.json").read_text())["frames"] == 24
    data = np.load(out / "frames.npz")
    assert data["images"].shape == (24, 32, 32, 3) and data["images"].dtype == np.uint8
    assert data["actions"].shape == (24, 7) and np.abs(data["actions"]).max() <= 1.0
    assert list(data["episode"]) == [0] * 12 + [1] * 12 and list(data["step"][:3]) == [0, 1, 2]
    assert not np.array_equal(data["images"][0], data["images"][12])  # two placements, two scenes
    stats = json.loads((out / "action_stats.json").read_text())
    assert len(stats["q01"]) == 7

    # The first frame is the train split's first observation of placement 0, and behaviour cloning serves it
    # with the prompt the LIBERO evaluation uses.
    cfg = task.Config(suite="libero_object", task_ids=[1], render_size=64, image_size=32)
    env = task.make_env(cfg, "train")
    try:
        first = env.reset(0)
    finally:
        env.close()
    assert np.array_equal(np.asarray(first.images[0]), data["images"][0])
    from tasks.robot_manipulation import Config as BCConfig
    from tasks.robot_manipulation.demos import FramesEnv

    frames = FramesEnv(BCConfig(demo_path=str(out / "frames.npz"), image_size=32))
    served = frames.reset(0)
    assert served.messages[0]["content"][1]["text"] == first.messages[0]["content"][1]["text"]
    assert len(served.info["expert_action"]) == 7


def test_a_task_without_an_expert_is_refused_before_any_simulator(tmp_path):
    with pytest.raises(ValueError, match="no scripted expert for LIBERO task 'libero_object/5'"):
        main(["--task-id", "5", "--out", str(tmp_path / "x")])
