"""The robot task's CLI that records a VLA's rollouts as reward-model data (record_reward_data.py): it loads
the policy, hands it to rewards/learned/sim_data.py and saves what the recorder returns."""

import json

import numpy as np
import pytest

pytest.importorskip("robosuite")

from rewards.learned import sim_data  # noqa: E402
from tasks.robot_manipulation import record_reward_data  # noqa: E402


class StillPolicy:
    """Stands in for the loaded VLA: never moves; one action of it did not decode."""

    camera, image_size, invalid = "robot0_eye_in_hand", 40, 1

    def __call__(self, obs):
        return np.zeros(7)


@pytest.mark.sim
def test_cli_records_the_loaded_policy(tmp_path, monkeypatch):
    loaded = {}

    def fake_load(path, **kw):
        loaded.update(kw, path=path)
        return StillPolicy()

    monkeypatch.setattr(record_reward_data, "load_policy", fake_load)
    out = tmp_path / "pol.npz"
    summary = record_reward_data.main(["--seeds", "0", "--image-size", "32", "--policy", "ckpt",
                                       "--policy-image-size", "40", "--policy-temperature", "0", "--out", str(out)])
    assert loaded == {"path": "ckpt", "camera": "robot0_eye_in_hand", "image_size": 40, "temperature": 1.0,
                      "greedy": True, "threads": 1}
    eps = sim_data.load(str(out))
    assert [e.kind for e in eps] == ["expert", "policy"]  # the default kinds of this CLI
    assert summary["episodes"] == 2 and summary["successes"] == 1
    with np.load(out) as z:
        meta = json.loads(str(z["__meta__"]))
    assert meta["policy_invalid_actions"] == 1 and meta["argv"]["policy"] == "ckpt"


def test_policy_is_required():
    with pytest.raises(SystemExit):
        record_reward_data.main(["--out", "x.npz"])
