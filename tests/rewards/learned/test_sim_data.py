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
        self.seen = []

    def __call__(self, obs):
        self.seen.append(obs["images"][self.camera].shape)
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


def test_bad_kinds_are_named():
    with pytest.raises(ValueError, match="unknown episode kinds"):
        sim_data.generate("Lift", seeds=[0], kinds=("expert", "teleport"))
    with pytest.raises(ValueError, match="needs a policy"):
        sim_data.generate("Lift", seeds=[0], kinds=("expert", "policy"))
