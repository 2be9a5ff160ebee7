"""Every config field does something: a field that no code reads during short runs of the entry points
(vlrl/train.py, vlrl/sft.py, vlrl/evaluate.py on the toy task) fails here, unless it is listed below with the
reason (a label, or read only by a backend these CPU runs cannot start)."""

import dataclasses
import os
import sys

import pytest

from vlrl.config import Config, compose, validate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = ["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]", "trainer.progress=false",
       "trainer.prompts_per_step=2", "algo.group_size=2", "rollout.max_new_tokens=4"]

# Fields no run here reads, each with why. A reader must still exist in the source (checked below).
NOT_READ_HERE = {
    "algo.name": "a label: written to config.yaml and the loggers' config, selects nothing",
    "task.module": "read from the composed config before it is typed (vlrl.config.import_task imports the task)",
    "rollout.vllm_gpu_memory_utilization": "read by the vLLM engine only (rollout.engine=vllm; on CPU a non-default value is refused)",
    "rollout.vllm_tensor_parallel_size": "read by the vLLM engine only (rollout.engine=vllm; on CPU a non-default value is refused)",
    "algo.role_decay": "read only with algo.advantage=role, which needs a task declaring roles (the toy task has "
                       "none; tests/vlrl/test_multi_role.py trains one)",
}
# Trainer fields vlrl/sft.py does not read, each with why (everything else the RL trainer reads, SFT reads too).
SFT_NOT_READ = {
    "trainer.curriculum_first_seed": "only with trainer.curriculum_pool > 0, which vlrl/sft.py refuses",
    "trainer.curriculum_window": "only with trainer.curriculum_pool > 0, which vlrl/sft.py refuses",
    "trainer.curriculum_temperature": "only with trainer.curriculum_pool > 0, which vlrl/sft.py refuses",
    "trainer.curriculum_weighting": "only with trainer.curriculum_pool > 0, which vlrl/sft.py refuses",
}
# Whole sections that belong to one entry point.
SFT_ONLY, EVAL_ONLY = ("sft.",), ("eval.output", "eval.num_examples", "eval.dump_images")
_QUIET = (os.sep + "dataclasses.py", os.sep + "omegaconf" + os.sep, os.sep + "copy.py")


def leaves(obj, prefix: str = "") -> set[str]:
    out = set()
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        out |= leaves(value, f"{prefix}{f.name}.") if dataclasses.is_dataclass(value) else {prefix + f.name}
    return out


def record(obj, seen: set, prefix: str = ""):
    """Swap the classes of `obj` and its nested config dataclasses for subclasses that add each field read to
    `seen` (reads by dataclasses.replace / OmegaConf serialisation, which copy every field, do not count)."""
    cls = type(obj)
    names = {f.name for f in dataclasses.fields(cls)}

    def __getattribute__(self, name):  # noqa: N807
        if name in names:
            caller = sys._getframe(1).f_code.co_filename
            if not any(q in caller for q in _QUIET):
                seen.add(prefix + name)
        return object.__getattribute__(self, name)

    obj.__class__ = type(cls.__name__, (cls,), {"__getattribute__": __getattribute__, "__module__": cls.__module__,
                                               "__qualname__": cls.__qualname__})
    for f in dataclasses.fields(cls):
        value = object.__getattribute__(obj, f.name)
        if dataclasses.is_dataclass(value):
            record(value, seen, f"{prefix}{f.name}.")
    return obj


def _recorded(overrides):
    seen: set[str] = set()
    cfg, task = validate(compose(TOY + overrides))
    return record(cfg, seen), task, seen


@pytest.fixture(scope="module")
def reads(tmp_path_factory):
    """{entry point: fields read} over short runs that between them take every branch a config selects."""
    from vlrl import evaluate, sft, train

    tmp = tmp_path_factory.mktemp("fields")
    out: dict[str, set] = {}
    cfg, task, seen = _recorded(["trainer.steps=2", f"trainer.output_dir={tmp / 'grpo'}", "trainer.eval_every=2",
                                 "trainer.eval_examples=2", "trainer.samples_every=1", "algo.beta=0.1",
                                 "trainer.max_minutes=60", "trainer.loggers=[jsonl,tensorboard]"])
    train.run(cfg, task)
    out["train"] = set(seen)
    # Into the folder of the run above: trainer.overwrite is read when a folder holds a run.
    cfg, task, seen = _recorded(["trainer.steps=1", f"trainer.output_dir={tmp / 'grpo'}", "trainer.overwrite=true",
                                 "algo=vla_ppo", "task.turns=2",
                                 "rollout.max_turns=2", "trainer.curriculum_pool=4", "model.lora.r=2",
                                 "algo.critic_warmup=1"])
    train.run(cfg, task)
    out["train"] |= seen
    cfg, task, seen = _recorded(["trainer.steps=2", f"trainer.output_dir={tmp / 'grpo'}", "trainer.overwrite=true",
                                 "trainer.eval_every=2",
                                 "sft.eval_examples=2", "trainer.samples_every=1", "trainer.max_minutes=60",
                                 "sft.curriculum=[{until: 1, task: {size: 28}}]"])
    sft.run(cfg, task)
    out["sft"] = set(seen)
    seen = set()
    cfg, task, seen = _recorded([f"model.path={tmp / 'grpo' / 'checkpoints' / 'step_0000002'}", "eval.num_examples=2",
                                 f"eval.output={tmp / 'eval.json'}", "eval.dump_images=1"])
    evaluate.score(cfg, task, [])
    out["evaluate"] = set(seen)
    return out


def test_every_config_field_is_read_by_an_entry_point(reads):
    fields = leaves(validate(compose(TOY))[0])
    unread = fields - set().union(*reads.values()) - set(NOT_READ_HERE)
    assert not unread, f"config fields no entry point reads (honour or refuse them): {sorted(unread)}"
    assert set(NOT_READ_HERE) <= fields  # no stale entries
    src = "".join(open(os.path.join(d, f)).read() for d, _, fs in os.walk(os.path.join(ROOT, "vlrl")) for f in fs
                  if f.endswith(".py"))
    for name, why in NOT_READ_HERE.items():
        if "label" not in why:
            assert "." + name.split(".")[-1] in src, f"{name}: {why}, but nothing in vlrl/ reads it"


def test_sft_reads_every_trainer_field_it_does_not_refuse(reads):
    trainer = {f for f in leaves(validate(compose(TOY))[0]) if f.startswith("trainer.")}
    assert trainer - reads["sft"] == set(SFT_NOT_READ), sorted(trainer - reads["sft"])
    assert not any(f.startswith(SFT_ONLY) for f in reads["train"])  # sft.* is SFT's alone
    assert {f for f in reads["evaluate"] if f.startswith("eval.")} >= set(EVAL_ONLY)
