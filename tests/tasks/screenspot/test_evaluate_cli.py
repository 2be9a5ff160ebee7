"""The documented evaluation commands run end to end on folders in the official layouts."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.mark.parametrize("task, fixture", [("screenspot", "ss_v1"), ("screenspot", "ss_v2"), ("screenspot_pro", "ss_pro")])
def test_evaluate_cli(task, fixture, request, tmp_path, tiny_model_path):
    data_dir = request.getfixturevalue(fixture)
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "vlrl/evaluate.py", f"task={task}", f"task.data_dir={data_dir}",
         f"model.path={tiny_model_path}", f"eval.output={out}", "rollout.max_new_tokens=8", "eval.dump_images=2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["count"] == report["meta"]["examples"] > 0
    assert 0.0 <= report["overall"] <= 1.0 and report["breakdown"]
    assert out.with_suffix(".md").exists()


def test_evaluate_cli_missing_folder_is_clear(tmp_path, tiny_model_path):
    proc = subprocess.run(
        [sys.executable, "vlrl/evaluate.py", "task=screenspot", f"task.data_dir={tmp_path / 'nope'}",
         f"model.path={tiny_model_path}", f"eval.output={tmp_path / 'r.json'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0 and "nope" in proc.stderr
