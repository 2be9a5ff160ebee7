"""Golden tests for per-role EMA baselines (vlrl/algos/roles.py), including a 2-process gloo run."""

import json
import math
import os
import subprocess
import sys

import pytest
import torch

from vlrl.algos.roles import (
    RoleBaselines, all_reduce_role_sums, role_advantages, role_sums, update_baselines,
)

NAN = float("nan")
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_roles.py")


def test_role_sums_skips_nan():
    sums, counts = role_sums([1.0, 2.0, NAN, -4.0, NAN], ["a", "b", "a", "b", "c"])
    assert sums == {"a": 1.0, "b": -2.0, "c": 0.0}
    assert counts == {"a": 1.0, "b": 2.0, "c": 0.0}


def test_first_observation_is_the_batch_mean():
    b = update_baselines({}, {"spy": -3.0, "civ": 6.0}, {"spy": 2, "civ": 3})
    assert b == {"spy": -1.5, "civ": 2.0}


def test_ema_step_golden():
    # 0.9 * 2.0 + 0.1 * (4.0 / 2) = 2.0 ; 0.9 * -1 + 0.1 * 9 = 0.0 ; decay 0.5: 0.5 * 1 + 0.5 * 3 = 2
    b = update_baselines({"civ": 2.0, "spy": -1.0}, {"civ": 4.0, "spy": 9.0}, {"civ": 2, "spy": 1})
    assert b == pytest.approx({"civ": 2.0, "spy": 0.0}, abs=1e-12)
    assert update_baselines({"x": 1.0}, {"x": 3.0}, {"x": 1}, decay=0.5) == {"x": 2.0}
    assert update_baselines({"x": 1.0}, {"x": 3.0}, {"x": 1}, decay=1.0) == {"x": 1.0}  # frozen
    assert update_baselines({"x": 1.0}, {"x": 3.0}, {"x": 1}, decay=0.0) == {"x": 3.0}  # last mean


def test_unseen_role_keeps_its_baseline_and_input_is_not_modified():
    old = {"spy": 0.7, "civ": 0.1}
    new = update_baselines(old, {"civ": 1.1, "spy": 0.0}, {"civ": 1, "spy": 0})
    assert new["spy"] == 0.7
    assert new["civ"] == pytest.approx(0.9 * 0.1 + 0.1 * 1.1)
    assert old == {"spy": 0.7, "civ": 0.1}
    assert "obs" not in update_baselines(old, {"obs": 0.0}, {"obs": 0})  # never observed: no baseline


@pytest.mark.parametrize("decay", [-0.1, 1.5, True, "0.9"])
def test_invalid_decay(decay):
    with pytest.raises(ValueError, match="decay"):
        update_baselines({}, {}, {}, decay)


def test_role_advantages_golden():
    adv = role_advantages(torch.tensor([1.0, 0.0, NAN, -1.0]), ["spy", "civ", "civ", "civ"], {"spy": 0.5, "civ": -0.25})
    torch.testing.assert_close(adv, torch.tensor([0.5, 0.25, 0.0, -0.75]), rtol=0, atol=0)
    assert adv.dtype == torch.float32
    assert role_advantages([1, 2], ["a", "a"], {"a": 1.5}).tolist() == [-0.5, 0.5]  # list of ints -> float64


def test_role_advantages_refuses_missing_baseline_and_bad_shapes():
    with pytest.raises(ValueError, match="obs"):
        role_advantages([1.0], ["obs"], {"spy": 0.0})
    with pytest.raises(ValueError, match="roles"):
        role_advantages([1.0, 2.0], ["spy"], {"spy": 0.0})
    with pytest.raises(ValueError, match="1-D"):
        role_advantages(torch.zeros(2, 2), ["spy"] * 4, {"spy": 0.0})


def test_all_reduce_without_distributed_is_identity_over_declared_roles():
    sums, counts = all_reduce_role_sums({"civ": 2.0}, {"civ": 4.0}, ["spy", "civ"])
    assert sums == {"spy": 0.0, "civ": 2.0} and counts == {"spy": 0.0, "civ": 4.0}


def test_role_baselines_two_steps():
    rb = RoleBaselines(["spy", "civilian"])
    # step 1: spy [1.0] -> b 1.0 ; civilians [-1, 0.5, 2] -> b 0.5 (first observations: batch means)
    adv = rb.advantages(torch.tensor([1.0, -1.0, 0.5, 2.0, NAN], dtype=torch.float64),
                        ["spy", "civilian", "civilian", "civilian", "civilian"])
    assert adv.tolist() == pytest.approx([0.0, -1.5, 0.0, 1.5, 0.0], abs=1e-12)
    # step 2: no spy turn -> spy unchanged ; civilians mean 1/3 -> 0.9 * 0.5 + 0.1 / 3
    adv = rb.advantages(torch.tensor([0.0, 3.0, -2.0], dtype=torch.float64), ["civilian"] * 3)
    b = 0.45 + 0.1 / 3
    assert rb.baselines == pytest.approx({"spy": 1.0, "civilian": b}, abs=1e-12)
    assert adv.tolist() == pytest.approx([-b, 3 - b, -2 - b], abs=1e-12)
    assert rb.metrics() == pytest.approx({"baseline/spy": 1.0, "baseline/civilian": b})


def test_role_baselines_refuses_undeclared_roles():
    rb = RoleBaselines(["spy", "civilian"])
    with pytest.raises(ValueError, match="observer"):
        rb.update([1.0], ["observer"])
    for bad in ([], ["a", "a"], [""]):
        with pytest.raises(ValueError):
            RoleBaselines(bad)


def test_state_dict_round_trip_plain_floats(tmp_path):
    rb = RoleBaselines(["spy", "civilian"], decay=0.8)
    rb.update([2.0, -1.0], ["spy", "civilian"])
    state = rb.state_dict()
    path = tmp_path / "roles.pt"
    torch.save(state, path)
    loaded = torch.load(path, weights_only=True)
    assert all(type(v) is float for v in loaded["baselines"].values())
    rb2 = RoleBaselines(["spy", "civilian"], decay=0.8)
    rb2.load_state_dict(loaded)
    assert rb2.baselines == {"spy": 2.0, "civilian": -1.0}
    rb.update([0.0], ["spy"])
    rb2.update([0.0], ["spy"])
    assert rb2.baselines == rb.baselines  # resumed = uninterrupted
    with pytest.raises(ValueError, match="roles"):
        RoleBaselines(["spy", "observer"], decay=0.8).load_state_dict(state)
    with pytest.raises(ValueError, match="decay"):
        RoleBaselines(["spy", "civilian"], decay=0.9).load_state_dict(state)


@pytest.mark.slow
def test_two_gloo_processes_hold_the_baselines_of_the_whole_batch(tmp_path):
    out = tmp_path / "out.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, SCRIPT, str(tmp_path / "init"), str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r0, r1 = (json.loads((tmp_path / f"out.json.{rank}").read_text()) for rank in (0, 1))
    # Whole batch of step 1: spy [1.0] ; civilians [-1, 0.5] on rank 0 and [2.0, nan] on rank 1 -> mean 0.5.
    # Step 2: rank 0 [0.0], rank 1 [3.0, -2.0] -> civilian mean 1/3 ; the spy (seen on rank 0 only) unchanged.
    b2 = 0.9 * 0.5 + 0.1 / 3
    for r in (r0, r1):  # every process holds the same baselines, which are those of the pooled batch
        assert r["baselines"][0] == pytest.approx({"spy": 1.0, "civilian": 0.5}, abs=1e-12)
        assert r["baselines"][1] == pytest.approx({"spy": 1.0, "civilian": b2}, abs=1e-12)
    expected = {0: [[0.0, -1.5, 0.0], [-b2]], 1: [[1.5, 0.0], [3 - b2, -2 - b2]]}
    for r, rank in ((r0, 0), (r1, 1)):
        for got, want in zip(r["advantages"], expected[rank], strict=True):
            assert got == pytest.approx(want, abs=1e-12)
    # rank 1 alone (no all-reduce) would have started its civilian baseline at 2.0
    assert not math.isclose(r1["baselines"][0]["civilian"], 2.0)
