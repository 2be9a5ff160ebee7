"""Checkpoints are data, never code, and a damaged one is found before it is resumed.

Every test starts from a real checkpoint of a 2-step toy run (saved at steps 1 and 2).
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from vlrl import checkpoint
from vlrl.config import compose, validate
from vlrl.train import run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = ["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]", "trainer.prompts_per_step=2",
       "algo.group_size=2", "rollout.max_new_tokens=4", "trainer.progress=false"]


def _cfg(*overrides):
    return validate(compose(TOY + list(overrides)))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("ckpt") / "run"
    run(*_cfg("trainer.steps=2", "trainer.save_every=1", f"trainer.output_dir={out}"))
    return out


@pytest.fixture
def run_dir(trained, tmp_path):
    """A private copy of the trained run directory."""
    return shutil.copytree(trained, tmp_path / "run")


class Planted:
    """Pickles as a call to os.mkdir(marker): loading it with pickle creates the directory."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def _rewrite_manifest(ckpt):
    """What someone who tampers with a checkpoint does too: recompute the manifest's sizes and checksums."""
    path = ckpt / "manifest.json"
    if not path.exists():
        return
    man = json.loads(path.read_text())
    for rel in man["files"]:
        data = (ckpt / rel).read_bytes()
        man["files"][rel] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    path.write_text(json.dumps(man))


def _plant(ckpt, marker):
    state_file = ckpt / "trainer_state.pt"
    state = torch.load(state_file, weights_only=False)  # the test's own file: trusted
    state["scheduler"]["note"] = Planted(marker)
    torch.save(state, state_file)
    _rewrite_manifest(ckpt)


def test_trainer_state_loads_with_weights_only(trained):
    state = torch.load(trained / "checkpoints" / "step_0000002" / "trainer_state.pt", weights_only=True)
    assert state["step"] == 2 and state["optimizer"]["state"], "Adam moments must be saved"
    assert torch.is_tensor(state["rng"]["torch"]) and torch.is_tensor(state["rng"]["numpy"][1])


def test_rng_state_round_trips_through_a_weights_only_load(tmp_path):
    torch.save({"rng": checkpoint.rng_state()}, tmp_path / "s.pt")
    expected = (np.random.rand(), torch.rand(1).item())
    np.random.rand(5), torch.rand(5)  # move both generators on
    checkpoint.set_rng_state(torch.load(tmp_path / "s.pt", weights_only=True)["rng"])
    assert (np.random.rand(), torch.rand(1).item()) == expected


def test_planted_object_in_trainer_state_never_runs(run_dir, tmp_path):
    """The reported attack: an object added to a real checkpoint's trainer state ran at
    `python vlrl/train.py trainer.resume=DIR` and the run exited 0."""
    ckpt = run_dir / "checkpoints" / "step_0000002"
    marker = tmp_path / "code_ran"
    _plant(ckpt, marker)
    proc = subprocess.run(
        [sys.executable, "vlrl/train.py", *TOY, "trainer.steps=3", f"trainer.output_dir={tmp_path / 'resumed'}",
         f"trainer.resume={ckpt}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    assert not marker.exists(), "loading the checkpoint executed code"
    assert proc.returncode != 0
    assert f"{ckpt / 'trainer_state.pt'}: cannot be loaded as tensors and plain data" in proc.stderr, proc.stderr[-2000:]


def test_planted_object_is_refused_by_auto_resume_too(run_dir, tmp_path):
    marker = tmp_path / "code_ran"
    _plant(run_dir / "checkpoints" / "step_0000002", marker)
    with pytest.raises(ValueError, match=r"step_0000002/trainer_state\.pt: cannot be loaded"):
        run(*_cfg("trainer.steps=3", f"trainer.output_dir={run_dir}", "trainer.resume=auto"))
    assert not marker.exists()


def test_saving_a_non_plain_object_is_refused(tmp_path):
    with pytest.raises(TypeError, match=r"state\['curriculum'\]\['x'\]: a .*Planted cannot go into a checkpoint"):
        checkpoint.save_state(tmp_path, {"step": 1, "curriculum": {"x": Planted(tmp_path / "m")}})
    with pytest.raises(TypeError, match=r"numpy\.float64"):
        checkpoint.save_state(tmp_path, {"step": np.float64(1.0)})
    assert not (tmp_path / "trainer_state.pt").exists()


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("victim", ["trainer_state.pt", "model.safetensors", "config.json"])
def test_auto_resume_skips_a_truncated_latest_checkpoint(run_dir, victim):
    _truncate(run_dir / "checkpoints" / "step_0000002" / victim)
    with pytest.warns(UserWarning, match=rf"skipping damaged checkpoint .*step_0000002.*{victim}"):
        run(*_cfg("trainer.steps=3", f"trainer.output_dir={run_dir}", "trainer.resume=auto"))
    steps = [json.loads(ln)["step"] for ln in open(run_dir / "metrics.jsonl")]
    assert steps == [1, 2, 3]  # resumed after step 1: step 2 was run again, then step 3
    assert checkpoint.verify(run_dir / "checkpoints" / "step_0000003")


def test_explicit_resume_of_a_damaged_checkpoint_names_the_file(run_dir):
    ckpt = run_dir / "checkpoints" / "step_0000002"
    _truncate(ckpt / "model.safetensors")
    with pytest.raises(ValueError, match=rf"{ckpt / 'model.safetensors'}: .* bytes, manifest.json says"):
        checkpoint.find_resume(str(run_dir), str(ckpt))
    (ckpt / "model.safetensors").unlink()
    with pytest.raises(ValueError, match=r"model.safetensors: missing"):
        checkpoint.find_resume(str(run_dir), str(ckpt))


def test_modified_file_of_the_same_size_fails_the_checksum(run_dir):
    ckpt = run_dir / "checkpoints" / "step_0000002"
    data = bytearray((ckpt / "model.safetensors").read_bytes())
    data[-10] ^= 0xFF
    (ckpt / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"model.safetensors: SHA-256 differs"):
        checkpoint.find_resume(str(run_dir), str(ckpt))


def test_auto_resume_with_every_checkpoint_damaged_is_an_error(run_dir):
    for step in (1, 2):
        _truncate(run_dir / "checkpoints" / f"step_000000{step}" / "trainer_state.pt")
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="no intact checkpoint"):
        checkpoint.find_resume(str(run_dir), "auto")


def test_checkpoint_written_before_manifests_is_resumed_with_a_warning(run_dir):
    """Decision: a checkpoint without manifest.json (older format, NumPy RNG array) is accepted,
    unverified, with a warning; it is still read with weights_only=True."""
    ckpt = run_dir / "checkpoints" / "step_0000002"
    (ckpt / "manifest.json").unlink()
    state = torch.load(ckpt / "trainer_state.pt", weights_only=True)
    name, key, pos, has_gauss, gauss = state["rng"]["numpy"]
    state["rng"]["numpy"] = (name, key.numpy().astype(np.uint32), pos, has_gauss, gauss)  # the old format
    torch.save(state, ckpt / "trainer_state.pt")
    with pytest.warns(UserWarning, match=r"step_0000002 has no manifest.json .* resuming from it anyway"):
        assert checkpoint.find_resume(str(run_dir), "auto") == ckpt
    checkpoint.set_rng_state(checkpoint.load_state(ckpt)["rng"])
    marker = run_dir / "code_ran"
    _plant(ckpt, marker)  # the allowlist for the old NumPy array lets nothing else through
    with pytest.raises(ValueError, match="cannot be loaded as tensors and plain data"):
        checkpoint.load_state(ckpt)
    assert not marker.exists()
