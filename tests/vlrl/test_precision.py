"""accelerate's mixed_precision and FSDP settings: carried out or refused at start, never ignored."""

import os

import pytest
import torch
import yaml

from vlrl.config import Config, ModelConfig, compose, validate
from vlrl.parallel import fsdp2, make_strategy, model_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = ["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]", "trainer.prompts_per_step=2",
       "algo.group_size=4", "rollout.max_new_tokens=6", "trainer.progress=false", "trainer.lr=1e-3"]


def test_bf16_means_float32_weights_and_bf16_autocast(monkeypatch):
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    s = make_strategy(Config())
    assert s.autocast_dtype == torch.bfloat16
    assert model_config(ModelConfig(dtype="auto"), s).dtype == "float32"  # master weights, also on a GPU
    with s.autocast():
        assert torch.nn.Linear(4, 4)(torch.ones(1, 4)).dtype == torch.bfloat16
    for dtype in ("bfloat16", "float16"):
        with pytest.raises(SystemExit, match="model.dtype"):
            make_strategy(Config(model=ModelConfig(dtype=dtype)))
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp16")
    with pytest.raises(SystemExit, match="fp16"):
        make_strategy(Config())
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")
    s = make_strategy(Config())
    assert s.autocast_dtype is None and model_config(ModelConfig(dtype="auto"), s).dtype == "auto"


def test_bf16_run_trains_float32_weights_with_bf16_forwards(tmp_path, monkeypatch):
    """A training step under mixed_precision bf16: every Linear of rollouts and of the update computes in bf16,
    the weights stay float32 and move."""
    import vlrl.trainer as trainer

    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    seen, models = {True: set(), False: set()}, []
    load = trainer.load_model

    def spy(cfg, device, **kw):
        model = load(cfg, device, **kw)
        models.append(model)
        for m in model.modules():
            if isinstance(m, torch.nn.Linear):
                m.register_forward_hook(lambda mod, inp, out: seen[torch.is_grad_enabled()].add(out.dtype))
        return model

    monkeypatch.setattr(trainer, "load_model", spy)
    from vlrl.train import run

    cfg, task = validate(compose(TOY + ["trainer.steps=1", f"trainer.output_dir={tmp_path / 'run'}"]))
    before = {k: v.clone() for k, v in load(cfg.model, "cpu").state_dict().items()}
    run(cfg, task)
    assert seen[False] == {torch.bfloat16}, seen  # rollouts
    assert seen[True] == {torch.bfloat16}, seen  # training forwards
    params = dict(models[0].named_parameters())
    assert all(p.dtype == torch.float32 for p in params.values())
    assert any(not torch.equal(before[k], p.detach()) for k, p in params.items())
    assert cfg.model.dtype == "float32"  # what the run loaded, recorded in its config.yaml
    assert "dtype: float32" in (tmp_path / "run" / "config.yaml").read_text()


def _fsdp_env(monkeypatch, **env):
    monkeypatch.setattr(fsdp2, "fsdp_version_requested", lambda: 2)
    for k, v in env.items():
        monkeypatch.setenv(k, v)


@pytest.mark.parametrize("env,message", [
    ({"FSDP_STATE_DICT_TYPE": "SHARDED_STATE_DICT"}, "fsdp_state_dict_type"),
    ({"FSDP_CPU_RAM_EFFICIENT_LOADING": "true"}, "fsdp_cpu_ram_efficient_loading"),
    ({"FSDP_OFFLOAD_PARAMS": "true"}, "fsdp_offload_params"),
])
def test_unwired_fsdp_settings_are_refused(monkeypatch, env, message):
    _fsdp_env(monkeypatch, **env)
    with pytest.raises(SystemExit, match=message):
        make_strategy(Config(), can_shard=True)


def test_fsdp_activation_checkpointing_turns_on_gradient_checkpointing(monkeypatch):
    _fsdp_env(monkeypatch, FSDP_ACTIVATION_CHECKPOINTING="false", FSDP_STATE_DICT_TYPE="FULL_STATE_DICT")
    s = make_strategy(Config(), can_shard=True)
    assert not model_config(ModelConfig(), s).gradient_checkpointing
    monkeypatch.setenv("FSDP_ACTIVATION_CHECKPOINTING", "true")
    assert model_config(ModelConfig(), s).gradient_checkpointing


@pytest.mark.parametrize("name", sorted(os.listdir(os.path.join(ROOT, "configs", "accelerate"))))
def test_shipped_accelerate_configs_ask_for_nothing_vlrl_ignores(name):
    """Each shipped config passes the start-up checks: what accelerate would export from it (its defaults
    included: fsdp_cpu_ram_efficient_loading is true unless the file says false) is carried out."""
    with open(os.path.join(ROOT, "configs", "accelerate", name)) as f:
        conf = yaml.safe_load(f)
    assert conf.get("mixed_precision", "no") in ("no", "bf16"), name
    fsdp = conf.get("fsdp_config") or {}
    if conf.get("distributed_type") == "FSDP":
        assert fsdp.get("fsdp_version") == 2, name
        assert fsdp.get("fsdp_state_dict_type", "FULL_STATE_DICT") == "FULL_STATE_DICT", name
        assert fsdp.get("fsdp_cpu_ram_efficient_loading") is False, name  # accelerate's default is true
        assert not fsdp.get("fsdp_offload_params", False), name
