"""The task behind the contract: config checks, env (built-in clips and a user manifest with broken
clips), rewards per mode, the report, length control and GRPO-TA through `post_rollout`, and the
evaluate / train entry points end to end."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from vlrl.config import compose, validate
from vlrl.episode import Episode, Turn
from vlrl.rollout import run_episodes
from vlrl.rollout.sample import Sample
from vlrl.skips import skipped_report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FAST = ["task=video_authenticity", "model=tiny", "trainer.progress=false", "rollout.max_new_tokens=8",
        "task.train_scenes=2", "task.held_out_scenes=2", "task.clip_frames=8"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("video_auth")


def load(data_dir, *overrides):
    return validate(compose([*FAST, f"task.data_dir={data_dir}", *overrides]))


@pytest.mark.parametrize("override, field", [
    ("task.reward=binary", "task.reward"),
    ("task.ta_samples=2", "task.ta_samples"),  # only meaningful with reward=ta
    ("task.length_lo=60", "task.length_lo"),
    ("task.max_frames=2", "task.max_frames"),
    ("task.min_pixels=100", "task.min_pixels"),
    ("task.max_video_tokens=8", "task.max_video_tokens"),  # 8 frames x 56x56 pixels give 16 tokens
    ("task.fps=0", "task.fps"),
])
def test_bad_config_names_the_field(tmp_path, override, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        load(tmp_path, override)


def answer(letter):
    return f"<think>looks fine</think><answer>{letter}</answer>"


def test_env_shows_a_decoded_clip_and_scores_both_modes(data_dir):
    cfg, task = load(data_dir)
    env = task.make_env(cfg.task, "eval")
    assert task.num_examples(cfg.task, "eval") == 4
    obs = env.reset(1)  # held-out scene 0's fake clip
    assert obs.info["label"] == "fake" and obs.info["letter"] == "A"
    assert obs.video_fps == [pytest.approx(4.0)] and obs.video_names[0].endswith("_fake.mp4")
    frames = np.stack(obs.videos[0])
    assert frames.shape == (4, 56, 56, 3)  # 8 frames at 8 fps sampled at 4 fps, 64 px resized to 56
    assert env.step(answer("A")).rewards == {"accuracy": 1.0, "format": 1.0}
    env.reset(1)
    assert env.step(answer("B")).rewards["accuracy"] == 0.0
    qcfg, _ = load(data_dir, "task.reward=q")
    qenv = task.make_env(qcfg.task, "eval")
    obs = qenv.reset(1)
    level = obs.info["level"]
    assert obs.info["letter"] == "ABCDE"[level - 1] and "F. The real-world video" in obs.messages[0]["content"][1]["text"]
    step = qenv.step(answer("ABCDE"[level - 1]))
    assert step.rewards == {"q": 2.5, "format": 1.0} and step.info["correct"] == 1.0
    qenv.reset(0)  # real
    assert qenv.step(answer("F")).rewards["q"] == 2.0


def test_train_split_is_a_shuffle_of_every_clip(data_dir):
    cfg, task = load(data_dir)
    env = task.make_env(cfg.task, "train")
    shown = {env.record(s).video for s in range(4)}
    assert len(shown) == 4  # one pass shows each clip once


@pytest.fixture
def broken_manifest(tmp_path, data_dir, clip_writer):
    """A user manifest: one good clip, one missing, one empty, one corrupt."""
    good = clip_writer(tmp_path / "good.mp4", frames=12, height=48, width=64, fps=6)
    (tmp_path / "empty.mp4").write_bytes(b"")
    (tmp_path / "corrupt.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(200))
    lines = [{"video": good.name, "label": "real"}, {"video": "missing.mp4", "label": "fake", "generator": "x"},
             {"video": "empty.mp4", "label": "fake"}, {"video": "corrupt.mp4", "label": "real"}]
    path = tmp_path / "clips.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


class ScriptedEngine:
    """An engine answering every observation with fixed texts; records what it was asked."""

    def __init__(self, texts):
        self.texts, self.seen = texts, []

    def generate(self, observations, n=1, greedy=False):
        self.seen.append((observations, n))
        return [[Sample(response_ids=[1] * (10 + j), logprobs=[0.0] * (10 + j), text=self.texts[j % len(self.texts)],
                        finished=True) for j in range(n)] for _ in observations]


def test_broken_clips_are_skipped_with_reasons(broken_manifest, data_dir):
    cfg, task = load(data_dir, f"task.manifest={broken_manifest}")
    stats = {}
    episodes = run_episodes(ScriptedEngine([answer("B")]), lambda: task.make_env(cfg.task, "eval"), list(range(4)),
                            1, stats=stats)
    assert len(episodes) == 1
    rep = task.report(episodes, cfg.task, skipped=skipped_report(stats))
    assert rep["count"] == 1 and rep["overall"] == 1.0
    assert rep["skipped"]["count"] == 3
    assert rep["skipped"]["reasons"] == {"missing": 1, "empty": 1, "unreadable": 1}


def _episode(label, text, generator=None, level=None, reward="plain", group=0, seed=0, tokens=10):
    from tasks.video_authenticity.env import letter_of, scored
    from tasks.video_authenticity.manifest import Record

    info = {"label": label, "generator": generator, "level": level, "reward": reward,
            "letter": letter_of(Record("x", label, generator, level), reward)}
    from vlrl.episode import Observation

    obs = Observation(messages=[], videos=[list(np.zeros((4, 8, 8, 3), np.uint8))], video_fps=[4.0],
                      video_names=["x.mp4"], info=info)
    rewards, step_info = scored(text, info)
    return Episode(turns=[Turn(obs, [1] * tokens, [0.0] * tokens, text, rewards, True, info=step_info)],
                   group_id=group, seed=seed)


def test_report_breakdown_auroc_and_parse_failures(data_dir):
    cfg, task = load(data_dir)
    eps = [_episode("real", answer("B")), _episode("real", answer("A")),
           _episode("fake", answer("A"), "flicker", 1), _episode("fake", "no idea", "flicker", 5),
           _episode("fake", answer("A"), "physics", 5)]
    rep = task.report(eps, cfg.task)
    assert rep["overall"] == pytest.approx(3 / 5) and rep["count"] == 5
    assert rep["breakdown"]["label"]["real"]["accuracy"] == 0.5
    assert rep["breakdown"]["generator"]["flicker"] == {"accuracy": 0.5, "stderr": pytest.approx(0.125 ** 0.5), "count": 2}
    assert rep["breakdown"]["level"]["5"]["count"] == 2
    assert rep["parse_failure_rate"] == pytest.approx(1 / 5) and rep["reasons"] == {"no_answer": 1}
    # Fake scores 1, 0.5 (unparsed), 1 against real 0, 1: pairs (1 + 0.5) + (1 + 0) + (1 + 0.5) over 6.
    assert rep["auroc"] == pytest.approx(4 / 6)
    assert "| flicker |" in task.markdown(rep, cfg.task)


def test_length_control_and_temporal_bonus_via_post_rollout(data_dir):
    cfg, task = load(data_dir, "task.reward=ta", "task.ta_samples=2", "task.length_lo=10", "task.length_hi=11")
    real_group = [_episode("real", answer("B"), group=0, seed=5, tokens=t) for t in (10, 11, 12)] + \
                 [_episode("real", answer("A"), group=0, seed=5)]
    fake_group = [_episode("fake", answer("A"), "flicker", 2, group=1, seed=6) for _ in range(4)]
    engine = ScriptedEngine([answer("A")])  # every perturbed copy called generated: right
    metrics = task.post_rollout(real_group + fake_group, engine.generate, cfg.task)
    (copies, n), = engine.seen
    assert n == 2 and len(copies) == 2
    assert all(c.info["label"] == "fake" and "perturbed" in c.info for c in copies)
    assert not np.array_equal(np.stack(copies[0].videos[0]), np.stack(real_group[0].turns[0].observation.videos[0])) \
        or copies[0].info["perturbed"]["kind"] != "reverse_all"  # a zero clip reversed is itself
    # Real group: 3/4 right (>= 0.75) and both perturbed answers right: +0.2 for the right ones.
    assert [ep.turns[0].rewards["temporal"] for ep in real_group] == [0.2, 0.2, 0.2, 0.0]
    assert [ep.turns[0].rewards["temporal"] for ep in fake_group] == [0.1] * 4
    # Length: right answers of 10 and 11 tokens are inside [10, 11]; 12 is not.
    assert [ep.turns[0].rewards["length"] for ep in real_group] == [0.2, 0.2, 0.0, 0.0]
    assert metrics["ta/perturbed_accuracy"] == 1.0 and metrics["ta/bonus_groups"] == 1.0
    wrong = ScriptedEngine([answer("B")])
    fresh = [_episode("fake", answer("A"), "flicker", 2, group=0, seed=6) for _ in range(4)]
    task.post_rollout(fresh, wrong.generate, cfg.task)
    assert [ep.turns[0].rewards["temporal"] for ep in fresh] == [0.0] * 4


def test_plain_reward_asks_for_no_extra_samples(data_dir):
    cfg, task = load(data_dir, "task.length_control=false")
    engine = ScriptedEngine([answer("A")])
    eps = [_episode("fake", answer("A"), group=0, seed=1) for _ in range(2)]
    task.post_rollout(eps, engine.generate, cfg.task)
    assert engine.seen == [] and "length" not in eps[0].turns[0].rewards and "temporal" not in eps[0].turns[0].rewards


@pytest.mark.slow
def test_evaluate_and_train_cli(data_dir, tmp_path):
    common = [f"task.data_dir={data_dir}", "task.train_scenes=2", "task.held_out_scenes=2", "task.clip_frames=8",
              "model=tiny", "rollout.max_new_tokens=6"]
    out = tmp_path / "r.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "vlrl/evaluate.py", "task=video_authenticity", f"eval.output={out}", *common],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rep = json.loads(out.read_text())
    assert rep["count"] == 4 and {"overall", "skipped", "breakdown", "auroc", "parse_failure_rate"} <= set(rep)
    proc = subprocess.run([sys.executable, "vlrl/train.py", "task=video_authenticity", "task.reward=ta", "task.ta_samples=2",
                           "trainer.steps=1", "trainer.prompts_per_step=2", "algo.group_size=2", "trainer.threads=1",
                           f"trainer.output_dir={tmp_path / 'run'}", "trainer.progress=false", *common],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert "ta/perturbed_accuracy" in metrics and "decode/seconds" in metrics and "reward/temporal" in metrics


def test_experiment_gain_is_paired_over_shared_clips():
    from tasks.video_authenticity.experiment import paired

    before = {0: 0.0, 1: 1.0, 2: 0.0, 3: 1.0, 9: 1.0}
    after = {0: 1.0, 1: 1.0, 2: 1.0, 3: 0.0}  # clip 9 was skipped after: not paired
    gain, se, n = paired(before, after)
    assert n == 4 and gain == pytest.approx(0.25)
    # differences 1, 0, 1, -1: sample variance 11/12, stderr sqrt(11/12 / 4)
    assert se == pytest.approx((11 / 12 / 4) ** 0.5)
    assert paired({0: 1.0}, {0: 1.0}) == (0.0, 0.0, 1)


def test_the_task_defaults_to_its_shipped_warm_start():
    assert compose(["task=video_authenticity"]).model.path == "assets/tiny-video-authenticity"
    assert compose(["task=video_authenticity", "model=tiny"]).model.path == "assets/tiny-qwen2.5-vl"
    shipped = os.path.join(ROOT, "assets", "tiny-video-authenticity")
    assert os.path.isfile(os.path.join(shipped, "model.safetensors"))
    provenance = json.load(open(os.path.join(shipped, "WARMSTART.json")))
    assert provenance["held_out_eval"]["clips"] >= 1000 and len(provenance["commands"]) == 4


def test_the_six_option_start_is_shipped_with_its_provenance():
    shipped = os.path.join(ROOT, "assets", "tiny-video-authenticity-q")
    assert os.path.isfile(os.path.join(shipped, "model.safetensors"))
    provenance = json.load(open(os.path.join(shipped, "WARMSTART.json")))
    assert "task.reward=q" in provenance["commands"][1] and provenance["held_out_eval"]["clips"] >= 1000


def test_the_mixed_format_start_is_shipped_with_its_provenance():
    shipped = os.path.join(ROOT, "assets", "tiny-video-authenticity-mix")
    assert os.path.isfile(os.path.join(shipped, "model.safetensors"))
    provenance = json.load(open(os.path.join(shipped, "WARMSTART.json")))
    assert "sft=va_mix" in provenance["commands"][1]
    # The curriculum it was trained with alternates the two answer formats every step.
    stages = compose(["task=video_authenticity", "sft=va_mix"]).sft.curriculum
    assert [s["task"]["reward"] for s in stages[:4]] == ["plain", "q", "plain", "q"] and len(stages) == 200
