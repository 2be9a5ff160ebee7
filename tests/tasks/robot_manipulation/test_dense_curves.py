"""dense_curves: cumulative wall time and episodes, dense reward per episode, the hacking summary."""
import json
import math

import pytest

from tasks.robot_manipulation.dense_curves import change, main, series, summarise


def _records(success, dense=None):
    rows = [{"step": 0, "eval/overall": 0.5}]  # an evaluation-only record is not a training step
    for i, s in enumerate(success):
        r = {"step": i + 1, "time/step": 2.0, "episodes": 16.0, "success/rate": s, "turns/mean": 50.0}
        if dense is not None:
            r["reward/dense"] = dense[i]
        rows.append(r)
    return rows


def test_series_accumulates_time_and_episodes_and_scales_dense_to_episodes():
    s = series(_records([0.0, 0.5, 1.0], [0.01, 0.02, 0.03]))
    assert s["step"] == [1, 2, 3] and s["wall_s"] == [2.0, 4.0, 6.0] and s["episodes"] == [16.0, 32.0, 48.0]
    assert s["dense_per_episode"] == pytest.approx([0.5, 1.0, 1.5])
    assert all(math.isnan(d) for d in series(_records([0.0]))["dense_per_episode"])


def test_change_compares_the_first_and_last_fifth():
    c = change([0.0] * 5 + [0.5] * 10 + [1.0, 1.0, 0.0, 1.0, 1.0])
    assert c["steps_per_window"] == 4 and c["first"] == 0.0 and c["last"] == pytest.approx(0.75)
    assert c["stderr"] == pytest.approx(math.sqrt(0.25 / 4))  # sample sd 0.5 over 4 steps; the first window is flat


def test_a_dense_reward_rising_while_success_stays_flat_is_flagged():
    flat = [0.2, 0.3] * 10
    hacked = summarise(series(_records(flat, [0.001 * i for i in range(20)])))
    assert hacked["dense_rose_while_success_did_not"] is True
    honest = summarise(series(_records([0.1 * (i // 2) for i in range(20)], [0.001 * i for i in range(20)])))
    assert honest["dense_rose_while_success_did_not"] is False
    assert summarise(series(_records(flat)))["dense_rose_while_success_did_not"] is None  # sparse: no dense reward


def test_cli_writes_json_and_png(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name / "run").mkdir(parents=True)
        rows = _records([0.1, 0.2, 0.3], [0.01, 0.01, 0.02] if name == "b" else None)
        (tmp_path / name / "run" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "res" / "curves"
    main([f"a={tmp_path / 'a'}", f"b={tmp_path / 'b'}", "--out", str(out)])
    data = json.loads(out.with_suffix(".json").read_text())  # standard JSON: NaN written as null
    assert data["summary"]["a"]["dense_per_episode"]["change"] is None and data["series"]["b"]["episodes"][-1] == 48.0
    assert out.with_suffix(".png").stat().st_size > 0
    with pytest.raises(SystemExit, match="NAME=RUN_DIR"):
        main([f"c={tmp_path / 'missing'}", "--out", str(out)])


def test_versus_reference_pairs_the_after_successes_state_by_state(tmp_path):
    afters = {"sparse": [1, 1, 0, 0], "dense": [1, 0, 0, 0]}
    for name, after in afters.items():
        (tmp_path / name / "run").mkdir(parents=True)
        (tmp_path / name / "run" / "metrics.jsonl").write_text(json.dumps(_records([0.1])[1]) + "\n")
        (tmp_path / name / "summary.json").write_text(json.dumps(
            {"successes_after": after, "after": {"success_rate": sum(after) / 4}}))
    out = tmp_path / "curves"
    data = main([f"sparse={tmp_path / 'sparse'}", f"dense={tmp_path / 'dense'}", "--out", str(out)])
    vs = data["versus_reference"]
    assert data["reference"] == "sparse" and vs["sparse"]["minus_reference_points"] == 0.0
    # per-state differences [0, -1, 0, 0]: mean -25 points, sd 0.5, stderr 0.5 / sqrt(4) = 25 points
    assert vs["dense"]["minus_reference_points"] == pytest.approx(-25.0)
    assert vs["dense"]["minus_reference_stderr_points"] == pytest.approx(25.0)
    assert main([f"sparse={tmp_path / 'sparse'}", f"dense={tmp_path / 'dense'}", "--out", str(out),
                 "--reference", "dense"])["versus_reference"]["sparse"]["minus_reference_points"] == pytest.approx(25.0)
    with pytest.raises(SystemExit, match="--reference"):
        main([f"sparse={tmp_path / 'sparse'}", "--out", str(out), "--reference", "clip"])
    (tmp_path / "dense" / "summary.json").write_text(json.dumps({"successes_after": [1], "after": {"success_rate": 1}}))
    with pytest.raises(SystemExit, match="same states"):
        main([f"sparse={tmp_path / 'sparse'}", f"dense={tmp_path / 'dense'}", "--out", str(out)])
