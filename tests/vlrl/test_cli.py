"""First-run errors and help: a mistake on the command line ends as one line naming the field (and the closest
valid one), never a traceback; every entry point has --help with the effective defaults and the task's fields."""

import os
import subprocess
import sys

import pytest

from vlrl import evaluate, sft, train
from vlrl.cli import help_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = ["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]"]


@pytest.mark.parametrize("entry", [train.main, sft.main, evaluate.main])
@pytest.mark.parametrize("args,expected", [
    (["trainer.stepz=5"], "vlrl: error: unknown config field 'trainer.stepz' (did you mean trainer.steps?)"),
    (["+trainer.stepz=5"], "vlrl: error: unknown config field 'trainer.stepz' (did you mean trainer.steps?)"),
    (["stepz=5"], "vlrl: error: unknown config field 'stepz' (did you mean trainer.steps?)"),
    (["task.sizee=5"], "vlrl: error: unknown config field 'task.sizee' (did you mean task.size?)"),
    (["model=tinyy"], "did you mean model=tiny?"),
    (["trainer.steps=abc"], "vlrl: error: invalid config value for 'trainer.steps'"),
    (["model.path=/does/not/exist"], "vlrl: error: model.path='/does/not/exist' does not exist"),
])
def test_a_mistake_is_one_line_on_stderr(entry, args, expected, capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        entry(TOY + [f"trainer.output_dir={tmp_path / 'never'}", f"eval.output={tmp_path / 'r.json'}"] + args)
    err = capsys.readouterr().err
    assert e.value.code == 2 and expected in err and err.count("\n") == 1, err
    assert not (tmp_path / "never").exists()


def test_help_shows_effective_defaults_and_the_tasks_fields():
    text = help_text("usage", [])
    assert "model.path = 'assets/tiny-gui-grounding'" in text  # configs/model/tiny_gui.yaml, not the schema's
    assert "task.n_widgets = " in text  # the default task's own fields
    toy = help_text("usage", TOY + ["trainer.steps=7"])
    assert "task.size = 56" in toy and "trainer.steps = 7" in toy and "model.path = 'assets/tiny-qwen2.5-vl'" in toy
    assert "task.n_widgets" not in toy


def _cli(*args, **env):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS="1", **env))


def test_every_entry_point_prints_help():
    for script in ("vlrl/train.py", "vlrl/sft.py", "vlrl/evaluate.py"):
        proc = _cli(script, "--help")
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert script in proc.stdout and "trainer.steps = 100" in proc.stdout


def test_an_unreachable_hub_id_is_one_line():
    proc = _cli("vlrl/train.py", "model.path=NoOrg/no-such-model", *TOY, "trainer.output_dir=/nonexistent/never",
                HF_HUB_OFFLINE="1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "hub ids need network access" in proc.stderr.strip().splitlines()[-1]


def test_robosuite_macro_advice_is_silenced():
    pytest.importorskip("robosuite")
    proc = _cli("-c", "from vlrl.cli import quiet_known_noise; quiet_known_noise(); import robosuite")
    assert proc.returncode == 0 and "macro" not in proc.stderr, proc.stderr[-2000:]
