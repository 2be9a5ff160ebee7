"""Recording simulated episodes for reward models (rewards/learned/sim_data.py) in robosuite, including a policy's
own rollouts beside the scripted expert's."""

import numpy as np
import pytest

pytest.importorskip("robosuite")

from rewards.learned import sim_data  # noqa: E402


class StillPolicy:
    """Stands in for a VLA: never moves, records what it was shown."""

    camera, image_size = "robot0_eye_in_hand", 40

    def __init__(self):
        self.seen, self.first = [], None

    def __call__(self, obs):
        img = obs["images"][self.camera]
        self.seen.append(img.shape)
        self.first = img.copy() if self.first is None else self.first
        return np.zeros(7)


@pytest.mark.sim
def test_policy_episodes_are_recorded_and_labelled():
    policy = StillPolicy()
    eps = sim_data.generate("Lift", seeds=[0], kinds=("expert", "policy"), image_size=32, max_steps=160,
                            log=lambda *_: None, policy=policy)
    expert, pol = eps
    assert (expert.kind, pol.kind) == ("expert", "policy") and expert.succeeded and not pol.succeeded
    # recorded frames at the data size, the policy's camera at its own size
    assert expert.frames.shape[1:] == pol.frames.shape[1:] == (32, 32, 3)
    assert set(policy.seen) == {(40, 40, 3)} and len(policy.seen) == len(pol) - 1
    # cut at the expert's success step + the policy overrun; a still arm keeps the start's progress
    t_success = int(np.flatnonzero(expert.success)[0])
    assert len(pol) - 1 == t_success + sim_data.OVERRUN["policy"]
    assert pol.progress.max() < 0.1 and expert.progress[-1] == 1.0


@pytest.mark.sim
def test_the_policys_camera_can_be_the_recorded_one():
    # A dense reward for a wrist-camera policy must be trained on wrist frames: record that camera.
    policy = StillPolicy()
    eps = sim_data.generate("Lift", seeds=[0], kinds=("expert", "policy"), image_size=40, max_steps=160,
                            log=lambda *_: None, policy=policy, camera="robot0_eye_in_hand")
    expert, pol = eps
    assert expert.frames.shape[1:] == pol.frames.shape[1:] == (40, 40, 3)
    assert np.array_equal(pol.frames[0], policy.first)  # the frames recorded are the ones the policy saw
    agent = sim_data.generate("Lift", seeds=[0], kinds=("expert",), image_size=40, max_steps=160, log=lambda *_: None)
    assert not np.array_equal(agent[0].frames[0], expert.frames[0])  # and not the default agentview
    with pytest.raises(ValueError, match="--image-size 40"):
        sim_data.generate("Lift", seeds=[0], kinds=("expert", "policy"), image_size=32, policy=StillPolicy(),
                          camera="robot0_eye_in_hand")


def test_bad_kinds_are_named():
    with pytest.raises(ValueError, match="unknown episode kinds"):
        sim_data.generate("Lift", seeds=[0], kinds=("expert", "teleport"))
    with pytest.raises(ValueError, match="needs a policy"):
        sim_data.generate("Lift", seeds=[0], kinds=("expert", "policy"))
