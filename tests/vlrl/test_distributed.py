"""Loss normalisation across processes and gradient accumulation (the TRL #5619 class of bug).

Same batch of episodes: a 2-process CPU run (gloo) and a 1-process run with gradient accumulation
over the same micro-batches must give the same parameter update, for every loss type.
"""

import json
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "vlrl", "dist_update.py")
ACCELERATE = os.path.join(os.path.dirname(sys.executable), "accelerate")


def _env():
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _run(cmd):
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _delta(path, world: int, sharded: bool) -> torch.Tensor:
    """The saved parameter change, after checking the run really had `world` processes (a launcher that
    silently starts one process would make every cross-process comparison pass)."""
    d = torch.load(path)
    assert (d["world"], d["sharded"]) == (world, sharded), (d["world"], d["sharded"])
    return d["delta"]


def _launch(config: str, *args: str):
    return _run([ACCELERATE, "launch", "--config_file", os.path.join(ROOT, "configs", "accelerate", config),
          "--main_process_port", str(29500 + (os.getpid() + hash(args)) % 2000), *args])


CASES = [("cpu_2proc.yaml", False, lt) for lt in ("grpo", "bnpo", "dr_grpo", "dapo", "gui_g1")]
CASES += [("fsdp2_cpu_2proc.yaml", True, lt) for lt in ("grpo", "dapo")]


@pytest.mark.slow
@pytest.mark.parametrize("config,sharded,loss_type", CASES)
def test_two_processes_equal_one_with_accumulation(tmp_path, config, sharded, loss_type):
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    # 16 rows; micro-batch 4: 1 process = 4 accumulated micro-batches, 2 processes = 2 each.
    _run([sys.executable, SCRIPT, str(one), loss_type, "4"])
    _launch(config, SCRIPT, str(two), loss_type, "4")
    d1, d2 = _delta(one, world=1, sharded=False), _delta(two, world=2, sharded=sharded)
    assert d1.abs().max() > 1e-4, "the update must not be trivially zero"
    assert torch.allclose(d1, d2, atol=1e-5, rtol=0), (d1 - d2).abs().max().item()


@pytest.mark.slow
def test_fsdp2_pads_uneven_micro_batches_like_data_parallel(tmp_path):
    # 10 rows vs 6 rows at micro-batch 3: 4 vs 2 micro-batches, so the sharded run pads rank 1 with two
    # zero-weight passes; data parallel needs no padding. Same update either way.
    dp, fsdp = tmp_path / "dp.pt", tmp_path / "fsdp.pt"
    _launch("cpu_2proc.yaml", SCRIPT, str(dp), "bnpo", "3", "uneven")
    _launch("fsdp2_cpu_2proc.yaml", SCRIPT, str(fsdp), "bnpo", "3", "uneven")
    d1, d2 = _delta(dp, world=2, sharded=False), _delta(fsdp, world=2, sharded=True)
    assert d1.abs().max() > 1e-4
    assert torch.allclose(d1, d2, atol=1e-5, rtol=0), (d1 - d2).abs().max().item()


@pytest.mark.slow
def test_fsdp2_training_run_saves_full_weights_and_resumes(tmp_path):
    out = tmp_path / "run"
    common = [os.path.join(ROOT, "vlrl", "train.py"), "task=toy", "model=tiny",
              f"hydra.searchpath=[file://{ROOT}/tests/configs]", "trainer.prompts_per_step=1", "algo.group_size=4",
              "rollout.max_new_tokens=6", f"trainer.output_dir={out}", "trainer.progress=false", "trainer.save_every=1"]
    assert "processes=2" in _launch("fsdp2_cpu_2proc.yaml", *common, "trainer.steps=1").stdout
    first = (out / "metrics.jsonl").read_text().splitlines()
    proc = _launch("fsdp2_cpu_2proc.yaml", *common, "trainer.steps=2", "trainer.resume=auto")  # resumes from step 1
    lines = (out / "metrics.jsonl").read_text().splitlines()
    # step 1's row kept as written, one new row for step 2: the run continued instead of starting over
    assert len(first) == 1 and lines[0] == first[0] and [json.loads(x)["step"] for x in lines] == [1, 2], lines
    assert "resuming from" in proc.stdout and "step_0000001" in proc.stdout, proc.stdout[-2000:]
    ckpt = out / "checkpoints" / "step_0000002"
    state = torch.load(ckpt / "trainer_state.pt", weights_only=False)
    assert state["optimizer_format"] == "full" and state["step"] == 2
    from safetensors.torch import load_file

    from vlrl.config import ModelConfig
    from vlrl.models import load_model

    load_model(ModelConfig(path=os.path.join(ROOT, "assets", "tiny-qwen2.5-vl"))).save_pretrained(tmp_path / "plain")
    saved, plain = load_file(str(ckpt / "model.safetensors")), load_file(str(tmp_path / "plain" / "model.safetensors"))
    # The same full (unsharded) tensors a plain save writes, and training moved them.
    assert saved.keys() == plain.keys()
    assert all(saved[k].shape == plain[k].shape for k in saved)
    assert any(not torch.equal(saved[k], plain[k]) for k in saved)


@pytest.mark.slow
def test_two_process_training_run_end_to_end(tmp_path):
    out = tmp_path / "run"
    proc = _launch("cpu_2proc.yaml", os.path.join(ROOT, "vlrl", "train.py"), "task=toy", "model=tiny",
                   f"hydra.searchpath=[file://{ROOT}/tests/configs]", "trainer.steps=2", "trainer.prompts_per_step=1",
                   "algo.group_size=4", "rollout.max_new_tokens=6", f"trainer.output_dir={out}", "trainer.progress=false")
    assert "processes=2" in proc.stdout  # really two processes (see configs/accelerate/cpu_2proc.yaml)
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2  # one writer, no duplicates
    assert (out / "checkpoints" / "step_0000002" / "model.safetensors").exists()
    assert not any(p.name.startswith("outputs") for p in tmp_path.iterdir())
