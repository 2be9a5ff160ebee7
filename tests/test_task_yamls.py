"""Every field of a task's Config can be set from the command line: configs/task/<name>.yaml lists exactly the
fields of its task's dataclass (a field missing from the YAML is refused as unknown when overridden)."""

import dataclasses
import importlib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
YAMLS = sorted((ROOT / "configs" / "task").glob("*.yaml"))


@pytest.mark.parametrize("path", YAMLS, ids=[p.stem for p in YAMLS])
def test_task_yaml_lists_exactly_the_config_fields(path):
    data = yaml.safe_load(path.read_text())
    task = data.get("task", data)  # "# @package _global_" files nest the fields under task:
    fields = {f.name for f in dataclasses.fields(importlib.import_module(task["module"]).Config)}
    keys = set(task) - {"defaults"}  # a Hydra defaults list is not a field
    assert fields - keys == set(), f"{path.name}: fields missing from the YAML (cannot be overridden)"
    assert keys - fields == set(), f"{path.name}: YAML keys that are not fields"


def test_vision_zero_check_reward_can_be_overridden():
    from vlrl.config import compose, validate

    cfg, _ = validate(compose(["task=vision_zero", "task.grid=2", "task.players=3", "task.observer_checks=look",
                               "task.check_reward=1.0"]))
    assert cfg.task.check_reward == 1.0
