"""The task template works when copied out of the repository, as a newcomer would use it."""

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from vlrl.config import compose, validate
from vlrl.task import TaskError, load_task

TEMPLATE = Path(__file__).resolve().parents[2] / "tasks" / "_template"


def test_template_copied_outside_the_repo_trains(tmp_path, monkeypatch):
    folder = tmp_path / "my_task"
    shutil.copytree(TEMPLATE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    assert TEMPLATE.parents[1] not in folder.parents
    monkeypatch.chdir(tmp_path)  # run from the copy's side, as a user outside the repository would
    spec = importlib.util.spec_from_file_location("copied_template_test", folder / "test_task.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.HERE == folder
    mod.test_reward_and_report()
    mod.test_bad_config_names_the_field()
    out = tmp_path / "run"
    out.mkdir()
    mod.test_trains_two_steps(out)
    assert (out / "checkpoints" / "step_0000002").is_dir()


def test_yaml_beside_the_task_sets_its_fields(tmp_path):
    folder = tmp_path / "t"
    shutil.copytree(TEMPLATE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "task.yaml").write_text("name: renamed\nimage_size: 84\n")
    cfg, task = validate(compose([f"task.module={folder}", "task.eval_examples=5", "task=screenspot"]))
    assert (cfg.task.name, cfg.task.image_size, cfg.task.eval_examples, cfg.task.module) == ("renamed", 84, 5, str(folder))
    assert task.num_examples(cfg.task, "eval") == 5


def test_a_task_without_its_yaml_uses_its_config_defaults(tmp_path):
    folder = tmp_path / "t"
    shutil.copytree(TEMPLATE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "task.yaml").unlink()
    cfg, _ = validate(compose([f"task.module={folder}"]))
    assert (cfg.task.name, cfg.task.image_size) == ("colour_template", 56)


def test_missing_required_member_is_named(tmp_path):
    bad = tmp_path / "bad_task.py"
    bad.write_text("from dataclasses import dataclass\n@dataclass\nclass Config:\n    name: str = 'bad'\n    module: str = ''\n"
                   "def make_env(cfg, split): ...\ndef report(episodes, cfg): ...\n")
    with pytest.raises(TaskError, match=r"missing \['num_examples'\]"):
        validate(compose([f"task.module={bad}"]))


def test_config_without_name_is_refused():
    mod = type(sys)("no_name")
    from dataclasses import make_dataclass

    mod.Config = make_dataclass("Config", [("module", str, "")])
    mod.make_env = mod.num_examples = mod.report = lambda *a: None
    with pytest.raises(TaskError, match=r"no field\(s\) \['name'\]"):
        load_task(mod)
