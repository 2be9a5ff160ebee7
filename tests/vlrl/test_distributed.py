"""Loss normalisation across processes and gradient accumulation (the TRL #5619 class of bug).

Same batch of episodes: a 2-process CPU run (gloo) and a 1-process run with gradient accumulation
over the same micro-batches must give the same parameter update, for every loss type.
"""

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


@pytest.mark.slow
@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo", "gui_g1"])
def test_two_processes_equal_one_with_accumulation(tmp_path, loss_type):
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    # 16 rows; micro-batch 4: 1 process = 4 accumulated micro-batches, 2 processes = 2 each.
    _run([sys.executable, SCRIPT, str(one), loss_type, "4"])
    _run([ACCELERATE, "launch", "--cpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
          "--dynamo_backend", "no", "--main_process_port", str(29500 + os.getpid() % 1000), SCRIPT, str(two), loss_type, "4"])
    d1, d2 = torch.load(one), torch.load(two)
    assert d1.abs().max() > 1e-4, "the update must not be trivially zero"
    assert torch.allclose(d1, d2, atol=1e-5, rtol=0), (d1 - d2).abs().max().item()


@pytest.mark.slow
def test_two_process_training_run_end_to_end(tmp_path):
    out = tmp_path / "run"
    _run([ACCELERATE, "launch", "--config_file", os.path.join(ROOT, "configs", "accelerate", "cpu_2proc.yaml"),
          "--main_process_port", str(30500 + os.getpid() % 1000),
          os.path.join(ROOT, "vlrl", "train.py"), "task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]",
          "trainer.steps=2", "trainer.prompts_per_step=1", "algo.group_size=4", "rollout.max_new_tokens=6",
          f"trainer.output_dir={out}", "trainer.progress=false"])
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2  # one writer, no duplicates
    assert (out / "checkpoints" / "step_0000002" / "model.safetensors").exists()
    assert not any(p.name.startswith("outputs") for p in tmp_path.iterdir())
