"""Loss normalisation across processes and gradient accumulation (the TRL #5619 class of bug), and the
sharding engines (FSDP2: vlrl/parallel/fsdp2.py; DeepSpeed ZeRO-3 through accelerate: vlrl/parallel/zero3.py), for real
with 2 CPU processes (gloo; ZeRO-3 on DeepSpeed's CPU accelerator).

Same batch of episodes: a 2-process run and a 1-process run with gradient accumulation over the same
micro-batches must give the same parameter update, for every loss type and engine.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "vlrl", "dist_update.py")
ACCELERATE = os.path.join(os.path.dirname(sys.executable), "accelerate")
ZERO3 = "deepspeed_zero3_cpu_2proc.yaml"
needs_deepspeed = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                                     reason="DeepSpeed is not installed (pip install -e '.[deepspeed]')")


def _env():
    # DS_ACCELERATOR: DeepSpeed's CPU accelerator for ZeRO-3 launches (ignored by the others)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT, DS_ACCELERATOR="cpu")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _run(cmd, ok=True):
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    if ok:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _launch(config: str, *args: str, ok=True):
    return _run([ACCELERATE, "launch", "--config_file", os.path.join(ROOT, "configs", "accelerate", config),
                 "--main_process_port", str(29500 + (os.getpid() + hash(args)) % 2000), *args], ok=ok)


def _delta(path, world: int, sharded: bool, partitioned: bool = False, loss_type: str | None = None) -> torch.Tensor:
    """The saved parameter change, after checking the run really had `world` processes and, for ZeRO-3
    (`partitioned`), that parameters really were partitioned (a launcher that silently starts one process,
    or a ZeRO-3 that keeps every tensor whole, would make every comparison pass)."""
    d = torch.load(path)
    assert (d["world"], d["sharded"]) == (world, sharded), (d["world"], d["sharded"])
    if partitioned:
        assert d["partitioned"] > 0, "no parameter was partitioned"
    deltas = d["deltas"]
    if loss_type is None:
        (loss_type,) = deltas  # the run had exactly one loss type
    return deltas[loss_type]


DP_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "gui_g1")  # one launch checks them all (start-up dominates)
SHARDED_LOSS_TYPES = ("grpo", "dapo")  # a sharded run is set up once per loss type: one launch each
CASES = [("cpu_2proc.yaml", False, DP_LOSS_TYPES)]
CASES += [("fsdp2_cpu_2proc.yaml", True, (lt,)) for lt in SHARDED_LOSS_TYPES]
CASES += [pytest.param(ZERO3, True, (lt,), marks=needs_deepspeed) for lt in SHARDED_LOSS_TYPES]
SHARDED = ["fsdp2_cpu_2proc.yaml", pytest.param(ZERO3, marks=needs_deepspeed)]


@pytest.mark.slow
@pytest.mark.parametrize("config,sharded,loss_types", CASES, ids=lambda v: "-".join(v) if isinstance(v, tuple) else None)
def test_two_processes_equal_one_with_accumulation(tmp_path, config, sharded, loss_types):
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    # 16 rows; micro-batch 4: 1 process = 4 accumulated micro-batches, 2 processes = 2 each.
    _run([sys.executable, SCRIPT, str(one), ",".join(loss_types), "4"])
    _launch(config, SCRIPT, str(two), ",".join(loss_types), "4")
    for loss_type in loss_types:
        d1 = _delta(one, world=1, sharded=False, loss_type=loss_type)
        d2 = _delta(two, world=2, sharded=sharded, partitioned=config == ZERO3, loss_type=loss_type)
        assert d1.abs().max() > 1e-4, f"{loss_type}: the update must not be trivially zero"
        assert torch.allclose(d1, d2, atol=1e-5, rtol=0), (loss_type, (d1 - d2).abs().max().item())


@pytest.mark.slow
def test_two_processes_with_shared_prefix_equal_one_plain_process(tmp_path):
    """trainer.shared_prefix across 2 data-parallel processes gives the plain forward's update, every loss type."""
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    _run([sys.executable, SCRIPT, str(one), ",".join(DP_LOSS_TYPES), "4", "even", "off"])
    _launch("cpu_2proc.yaml", SCRIPT, str(two), ",".join(DP_LOSS_TYPES), "4", "even", "on")
    for loss_type in DP_LOSS_TYPES:
        d1 = _delta(one, world=1, sharded=False, loss_type=loss_type)
        d2 = _delta(two, world=2, sharded=False, loss_type=loss_type)
        assert d1.abs().max() > 1e-4, f"{loss_type}: the update must not be trivially zero"
        assert torch.allclose(d1, d2, atol=1e-5, rtol=0), (loss_type, (d1 - d2).abs().max().item())


@pytest.mark.slow
@needs_deepspeed
def test_zero3_with_shared_prefix_equals_one_plain_process(tmp_path):
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    _run([sys.executable, SCRIPT, str(one), "grpo", "4", "even", "off"])
    _launch(ZERO3, SCRIPT, str(two), "grpo", "4", "even", "on")
    d1 = _delta(one, world=1, sharded=False)
    d2 = _delta(two, world=2, sharded=True, partitioned=True)
    assert d1.abs().max() > 1e-4
    assert torch.allclose(d1, d2, atol=1e-5, rtol=0), (d1 - d2).abs().max().item()


@pytest.mark.slow
def test_several_loss_types_in_one_run_start_from_the_same_weights(tmp_path):
    # The combined run must equal separate runs (weights and batch reset between loss types), or the data-parallel
    # case above would compare updates from different starting points.
    both, alone = tmp_path / "both.pt", tmp_path / "alone.pt"
    _run([sys.executable, SCRIPT, str(both), "grpo,gui_g1", "4"])
    _run([sys.executable, SCRIPT, str(alone), "gui_g1", "4"])
    d_both, d_alone = _delta(both, 1, False, loss_type="gui_g1"), _delta(alone, 1, False)
    assert torch.equal(d_both, d_alone)
    assert not torch.equal(d_both, _delta(both, 1, False, loss_type="grpo"))


@pytest.mark.slow
@pytest.mark.parametrize("config", SHARDED)
def test_sharded_run_pads_uneven_micro_batches_like_data_parallel(tmp_path, config):
    # 10 rows vs 6 rows at micro-batch 3: 4 vs 2 micro-batches. Every sharded backward runs collectives, so
    # rank 1 runs two zero-weight passes; data parallel needs no padding. Same update either way.
    dp, sh = tmp_path / "dp.pt", tmp_path / "sharded.pt"
    _launch("cpu_2proc.yaml", SCRIPT, str(dp), "bnpo", "3", "uneven")
    _launch(config, SCRIPT, str(sh), "bnpo", "3", "uneven")
    d1, d2 = _delta(dp, world=2, sharded=False), _delta(sh, world=2, sharded=True, partitioned=config == ZERO3)
    assert d1.abs().max() > 1e-4
    assert torch.allclose(d1, d2, atol=1e-5, rtol=0), (d1 - d2).abs().max().item()


@pytest.mark.slow
@needs_deepspeed
def test_zero3_skips_a_nonfinite_step_like_one_process(tmp_path):
    # A NaN loss: the engine must skip that step (and drop its gradients), then the next update is the same as
    # one process's.
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    _run([sys.executable, SCRIPT, str(one), "grpo", "4", "nan"])
    _launch(ZERO3, SCRIPT, str(two), "grpo", "4", "nan")
    assert torch.load(one)["skipped"] == 1.0 and torch.load(two)["skipped"] == 1.0
    d1, d2 = _delta(one, world=1, sharded=False), _delta(two, world=2, sharded=True, partitioned=True)
    assert d1.abs().max() > 1e-4
    assert torch.allclose(d1, d2, atol=1e-5, rtol=0), (d1 - d2).abs().max().item()


def _train_args(out, *extra):
    return [os.path.join(ROOT, "vlrl", "train.py"), "task=toy", "model=tiny",
            f"hydra.searchpath=[file://{ROOT}/tests/configs]", "trainer.prompts_per_step=1", "algo.group_size=4",
            "rollout.max_new_tokens=6", f"trainer.output_dir={out}", "trainer.progress=false", "trainer.save_every=1",
            *extra]


def _check_full_weights(ckpt, tmp_path) -> dict:
    """A sharded run's checkpoint holds the same full (unsharded) tensors a plain save writes, and training
    moved them. Returns the saved tensors."""
    from safetensors.torch import load_file

    from vlrl.config import ModelConfig
    from vlrl.models import load_model

    state = torch.load(ckpt / "trainer_state.pt", weights_only=True)
    assert state["optimizer_format"] == "full" and state["step"] == int(ckpt.name.split("_")[-1])
    load_model(ModelConfig(path=os.path.join(ROOT, "assets", "tiny-qwen2.5-vl"))).save_pretrained(tmp_path / "plain")
    saved, plain = load_file(str(ckpt / "model.safetensors")), load_file(str(tmp_path / "plain" / "model.safetensors"))
    assert saved.keys() == plain.keys()
    assert all(saved[k].shape == plain[k].shape for k in saved)
    assert any(not torch.equal(saved[k], plain[k]) for k in saved)
    return saved


@pytest.mark.slow
def test_fsdp2_training_run_saves_full_weights_and_resumes(tmp_path):
    out = tmp_path / "run"
    assert "processes=2" in _launch("fsdp2_cpu_2proc.yaml", *_train_args(out, "trainer.steps=1")).stdout
    first = (out / "metrics.jsonl").read_text().splitlines()
    proc = _launch("fsdp2_cpu_2proc.yaml", *_train_args(out, "trainer.steps=2", "trainer.resume=auto"))
    lines = (out / "metrics.jsonl").read_text().splitlines()
    # step 1's row kept as written, one new row for step 2: the run continued instead of starting over
    assert len(first) == 1 and lines[0] == first[0] and [json.loads(x)["step"] for x in lines] == [1, 2], lines
    assert "resuming from" in proc.stdout and "step_0000001" in proc.stdout, proc.stdout[-2000:]
    _check_full_weights(out / "checkpoints" / "step_0000002", tmp_path)


@pytest.mark.slow
@needs_deepspeed
def test_zero3_training_run_saves_full_weights_and_resumes_exactly(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert "processes=2" in _launch(ZERO3, *_train_args(straight, "trainer.steps=2")).stdout
    # The same run stopped after step 1: its step-1 checkpoint, resumed to step 2 (trainer.resume=auto).
    (resumed / "checkpoints").mkdir(parents=True)
    shutil.copytree(straight / "checkpoints" / "step_0000001", resumed / "checkpoints" / "step_0000001")
    proc = _launch(ZERO3, *_train_args(resumed, "trainer.steps=2", "trainer.resume=auto"))
    assert "resuming from" in proc.stdout

    ckpt = resumed / "checkpoints" / "step_0000002"
    assert torch.load(ckpt / "trainer_state.pt", weights_only=True)["optimizer"]["state"], "Adam moments must be saved"
    saved = _check_full_weights(ckpt, tmp_path)
    # Resuming restores weights, Adam moments and step counts, scheduler and RNG: step 2 is the same as without
    # the stop.
    from safetensors.torch import load_file

    other = load_file(str(straight / "checkpoints" / "step_0000002" / "model.safetensors"))
    assert max((saved[k] - other[k]).abs().max().item() for k in saved) == 0.0
    m1 = [json.loads(line) for line in (straight / "metrics.jsonl").read_text().splitlines()]
    m2 = [json.loads(line) for line in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert len(m1) == 2 and [m["step"] for m in m2] == [2]
    assert m1[1]["loss"] == m2[0]["loss"] and m1[1]["grad_norm"] == m2[0]["grad_norm"]


@pytest.mark.slow
@needs_deepspeed
def test_zero3_refuses_the_ppo_critic_with_a_clear_error(tmp_path):
    proc = _launch(ZERO3, *_train_args(tmp_path / "run", "trainer.steps=1", "algo.advantage=gae", "algo.scale=batch"),
                   ok=False)
    assert proc.returncode != 0
    assert "algo.advantage=gae" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_two_process_training_run_end_to_end(tmp_path):
    out = tmp_path / "run"
    proc = _launch("cpu_2proc.yaml", *_train_args(out, "trainer.steps=2"))
    assert "processes=2" in proc.stdout  # really two processes (see configs/accelerate/cpu_2proc.yaml)
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2  # one writer, no duplicates
    assert (out / "checkpoints" / "step_0000002" / "model.safetensors").exists()
    assert not any(p.name.startswith("outputs") for p in tmp_path.iterdir())


@pytest.mark.slow
def test_sft_two_processes_equal_one_with_accumulation(tmp_path):
    # 16 examples whose answers have two lengths, micro-batch 4: 1 process accumulates 4 micro-batches, 2 processes
    # 2 each, with different token counts. The SFT loss is the token mean over the whole step on every process.
    script = os.path.join(ROOT, "tests", "vlrl", "dist_sft.py")
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    _run([sys.executable, script, str(one), "4"])
    _launch("cpu_2proc.yaml", script, str(two), "4")
    a, b = torch.load(one), torch.load(two)
    assert (a["world"], b["world"]) == (1, 2)
    assert b["rank0_tokens"] * 2 != a["rank0_tokens"], "the processes' token counts must differ for the test to bite"
    assert a["delta"].abs().max() > 1e-4
    assert torch.allclose(a["delta"], b["delta"], atol=1e-5, rtol=0), (a["delta"] - b["delta"]).abs().max().item()
    assert b["loss"] == pytest.approx(a["loss"], rel=1e-5) and b["token_acc"] == pytest.approx(a["token_acc"])
