"""The parallel strategies in one process: which backend a launch gets (and what it refuses), micro-batch
padding, the skipped non-finite step, optimizer-state loading. Real multi-process runs: test_distributed.py."""

import pytest
import torch

from vlrl.config import Config, LoraConfig, ModelConfig
from vlrl.parallel import FSDP2, DataParallel, Zero3, base, fsdp2, make_strategy


def _fsdp(monkeypatch, version: int):
    monkeypatch.setattr(fsdp2, "fsdp_version_requested", lambda: version)


def test_a_plain_launch_is_data_parallel():
    s = make_strategy(Config(), can_shard=True)
    assert type(s) is DataParallel and not s.sharded and s.accelerator is not None
    model = torch.nn.Linear(2, 2)
    with s.gathered(model) as m:
        assert m is model
    assert s.full_state(model, None) == {}
    assert s.full_model_state(model).keys() == model.state_dict().keys()


@pytest.mark.parametrize("version,can_shard,lora,message", [
    (1, True, 0, "FSDP v1 sharded training is not supported"),
    (2, False, 0, "FSDP v2 sharded training is not supported by this entry point"),
    (2, True, 8, "FSDP2 with LoRA"),
])
def test_unwired_sharding_is_refused(monkeypatch, version, can_shard, lora, message):
    _fsdp(monkeypatch, version)
    cfg = Config(model=ModelConfig(lora=LoraConfig(r=lora)))
    with pytest.raises(SystemExit, match=message):
        make_strategy(cfg, can_shard=can_shard)


def test_fsdp2_with_one_process_does_not_shard(monkeypatch):
    _fsdp(monkeypatch, 2)
    assert type(make_strategy(Config(), can_shard=True)) is DataParallel


def test_sharded_strategies_pad_to_the_longest_process(monkeypatch):
    monkeypatch.setattr(base, "global_max", lambda value, device: 3)  # another process has 3 micro-batches
    for s in (FSDP2(reshard_after_forward=True), Zero3(None, None)):
        assert s.sharded
        assert s.lockstep([["a"], ["b"]], None, "cpu") == [["a"], ["b"], ["a"]]
        assert s.lockstep([], "pad", "cpu") == [["pad"]] * 3
        with pytest.raises(ValueError, match="pad_row"):
            s.lockstep([], None, "cpu")
    assert DataParallel().lockstep([["a"]], None, "cpu") == [["a"]]  # no collectives per pass: no padding


def test_clip_and_step_skips_a_nonfinite_step_and_a_frozen_policy():
    model = torch.nn.Linear(2, 1)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=1.0)
    before = [p.detach().clone() for p in params]
    s = DataParallel()
    model(torch.tensor([[float("nan"), 1.0]])).sum().backward()
    assert not torch.isfinite(s.clip_and_step(opt, params, 1.0))
    assert all(torch.equal(a, b) for a, b in zip(before, params))
    opt.zero_grad()
    model(torch.ones(1, 2)).sum().backward()
    norm = s.clip_and_step(opt, params, 0.0, step=False)  # 0: no clipping
    assert norm.item() == pytest.approx(3**0.5) and all(torch.equal(a, b) for a, b in zip(before, params))
    s.clip_and_step(opt, params, 1.0)  # clipped to norm 1, then stepped
    moved = torch.cat([(b - a).flatten() for a, b in zip(before, params)])
    assert moved.norm().item() == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("fmt", ["by_id", "full"])
def test_optimizer_state_loads_from_either_format(fmt):
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)  # as on resume: no gradients yet
    saved = opt.state_dict() if fmt == "by_id" else get_optimizer_state_dict(
        model, opt, options=StateDictOptions(full_state_dict=True))
    fresh = torch.optim.AdamW(model.parameters(), lr=0.1)
    DataParallel().load_optimizer_state(model, fresh, {"optimizer": saved, "optimizer_format": fmt})
    for p in model.parameters():
        assert torch.equal(fresh.state[p]["exp_avg"], opt.state[p]["exp_avg"])
        assert torch.equal(fresh.state[p]["exp_avg_sq"], opt.state[p]["exp_avg_sq"])
