"""GUI grounding task: config, env reset/step, processor frame, JSONL data, weights, report."""

import io
import json
import os

import pytest
from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

import tasks.gui_grounding as gg
from tasks.gui_grounding.data import write_jsonl
from vlrl.episode import Episode, Turn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FAST = dict(eval_examples=8, difficulty_samples=64)


def cfg_of(**kw):
    return gg.Config(**{**FAST, **kw})


def answer(box):
    return "```json\n" + json.dumps([{"bbox_2d": [round(v, 3) for v in box], "label": "x"}]) + "\n```"


def episode(obs, text, step=None):
    turn = Turn(observation=obs, response_ids=[], logprobs=[], response_text=text, done=True)
    if step is not None:
        turn.rewards, turn.info = step.rewards, step.info
    return Episode(turns=[turn])


def png(image):
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def test_yaml_merges_into_config():
    base = OmegaConf.structured(gg.Config)
    yaml = OmegaConf.load(os.path.join(ROOT, "configs", "task", "gui_grounding.yaml"))
    cfg = OmegaConf.to_object(OmegaConf.merge(base, yaml, {"reward_terms": ["hit"]}))
    assert isinstance(cfg, gg.Config) and cfg.module == "tasks.gui_grounding" and cfg.reward_terms == ["hit"]
    assert all(f.metadata.get("help") for f in gg.Config.__dataclass_fields__.values())
    with pytest.raises(ValidationError, match="n_widgets"):
        OmegaConf.merge(base, {"n_widgets": "many"})


@pytest.mark.parametrize(
    "kw,field",
    [({"prompt": "long"}, "prompt"), ({"reward_terms": ["hit", "format"]}, "reward_terms"), ({"n_widgets": [3, 1]}, "n_widgets"),
     ({"width_range": [10, 20]}, "width_range"), ({"difficulty": "hard"}, "difficulty"), ({"kinds": ["slider"]}, "kinds"),
     ({"max_pixels": 100}, "min_pixels"), ({"success_beta": 2.0}, "success_beta"), ({"reward_weights": {"fmt": 1.0}}, "reward_weights"),
     ({"describe_prob": 1.5}, "describe_prob"), ({"describe_prob": 0.5, "data": "blocks"}, "describe_prob")],
)  # fmt: skip
def test_config_validation_names_field(kw, field):
    with pytest.raises(ValueError, match=field):
        gg.Config(**kw)


def test_reset_is_deterministic_and_in_model_frame():
    cfg = cfg_of()
    a, b = gg.make_env(cfg, "train").reset(42), gg.make_env(cfg, "train").reset(42)
    assert png(a.images[0]) == png(b.images[0]) and a.info["gt_box"] == b.info["gt_box"]
    w, h = a.info["image_size"]
    assert a.images[0].size == (w, h) and w % 28 == 0 and h % 28 == 0 and w * h <= cfg.max_pixels
    assert a.messages[0]["content"][0] == {"type": "image"} and "Grounding instruction is: " in a.messages[0]["content"][1]["text"]
    assert a.info["instruction"] in a.messages[0]["content"][1]["text"].replace("Grounding instruction is: ", "")
    x1, y1, x2, y2 = a.info["gt_box"]
    assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h and a.info["sample_weight"] > 0


def test_reading_examples_ask_for_the_target_name_at_its_box_in_training_only():
    cfg = cfg_of(describe_prob=0.5, n_widgets=[1, 3])
    env = gg.make_env(cfg, "train")
    plain = gg.make_env(cfg_of(n_widgets=[1, 3]), "train")
    reads = 0
    for seed in range(40):
        obs, ref = env.reset(seed), plain.reset(seed)
        assert png(obs.images[0]) == png(ref.images[0]) and obs.info["gt_box"] == ref.info["gt_box"]  # same screen
        text = obs.messages[0]["content"][1]["text"]
        if "describe" not in obs.info:
            assert obs.messages == ref.messages and gg.reference_answer(obs, cfg).startswith('[{"bbox_2d": ')
            continue
        reads += 1
        x1, y1, x2, y2 = (int(round(v)) for v in obs.info["gt_box"])
        assert text == f"Name the element at [{x1}, {y1}, {x2}, {y2}]."
        name = gg.reference_answer(obs, cfg)
        assert name == obs.info["metadata"]["target_name"] == obs.info["describe"]
        assert name.split()[-1] in ("icon", "button", "field", "checkbox", "menu"), name
        with pytest.raises(RuntimeError, match="describe_prob"):
            env.step("anything")
    assert 10 <= reads <= 30  # about half of 40
    assert all("describe" not in gg.make_env(cfg, "eval").reset(i).info for i in range(8))  # never in eval
    assert all("describe" not in gg.make_env(cfg_of(), "train").reset(i).info for i in range(8))  # off by default


def test_reading_examples_can_use_busier_screens_than_the_grounding_ones():
    env = gg.make_env(cfg_of(describe_prob=0.5, n_widgets=[1, 1], describe_n_widgets=[3, 3]), "train")
    counts = {(("describe" in o.info), o.info["metadata"]["n_widgets"]) for o in map(env.reset, range(30))}
    assert counts == {(False, 1), (True, 3)}
    with pytest.raises(ValueError, match="describe_n_widgets"):
        cfg_of(describe_n_widgets=[2, 1])


def test_text_first_prompt_keeps_the_screen_and_only_swaps_the_parts():
    a = gg.make_env(cfg_of(), "train").reset(3)
    b = gg.make_env(cfg_of(image_first=False, describe_prob=1.0), "train").reset(3)
    c = gg.make_env(cfg_of(image_first=False), "train").reset(3)
    assert [p["type"] for p in a.messages[0]["content"]] == ["image", "text"]
    assert [p["type"] for p in c.messages[0]["content"]] == ["text", "image"]
    assert c.messages[0]["content"][0] == a.messages[0]["content"][1] and c.info["gt_box"] == a.info["gt_box"]
    assert [p["type"] for p in b.messages[0]["content"]] == ["text", "image"] and "describe" in b.info


def test_perfect_answer_and_garbage():
    env = gg.make_env(cfg_of(), "train")
    obs = env.reset(7)
    res = env.step(answer(obs.info["gt_box"]))
    assert res.done and res.observation is None
    assert sum(res.rewards.values()) == pytest.approx(1.375, abs=1e-4)
    assert res.info["hit"] == 1.0 and res.info["iou"] == pytest.approx(1.0, abs=1e-4) and res.info["reason"] is None
    assert res.info["area_ratio"] == pytest.approx(1.0, abs=1e-3) and res.info["big_box"] == 0.0
    bad = env.step("no idea")
    assert bad.rewards == {"hit": 0.0, "iou": 0.0, "box": 0.0} and bad.info["reason"] == "parse"
    w, h = obs.info["image_size"]
    big = env.step(answer([0, 0, w, h]))
    assert big.info["big_box"] == 1.0 and big.info["area_ratio"] > 1


def test_reward_terms_ablation_and_think_prompt():
    env = gg.make_env(cfg_of(reward_terms=["hit"], prompt="think"), "train")
    obs = env.reset(3)
    assert "<think>" in obs.messages[0]["content"][1]["text"]
    res = env.step("<think>it is there [0, 0, 1, 1]</think>" + answer(obs.info["gt_box"]))
    assert res.rewards == {"hit": 1.0}


def test_train_eval_disjoint_and_sizes():
    cfg = cfg_of()
    assert gg.num_examples(cfg, "train") is None and gg.num_examples(cfg, "eval") == 8
    tr = {gg.make_env(cfg, "train").reset(i).info["metadata"]["layout_seed"] for i in range(20)}
    ev = {gg.make_env(cfg, "eval").reset(i).info["metadata"]["layout_seed"] for i in range(8)}
    assert not tr & ev
    assert gg.make_env(cfg, "eval").reset(0).info["metadata"]["split"] == "eval"


def test_processor_does_not_resize_again(tiny_model_path):
    from transformers import AutoProcessor

    proc = AutoProcessor.from_pretrained(tiny_model_path)
    cfg = cfg_of(width_range=[400, 900])
    obs = gg.make_env(cfg, "train").reset(11)
    text = proc.apply_chat_template(obs.messages, add_generation_prompt=True, tokenize=False)
    out = proc(text=[text], images=obs.images, return_tensors="pt", **obs.processor_kwargs)
    w, h = obs.info["image_size"]
    assert out["image_grid_thw"].tolist() == [[1, h // 14, w // 14]]


def test_difficulty_weights():
    cfg = cfg_of()
    env = gg.make_env(cfg, "train")
    obs = [env.reset(i) for i in range(64)]
    ws = [o.info["sample_weight"] for o in obs]
    assert sum(ws) / len(ws) == pytest.approx(1.0, abs=0.05)  # normalised on these very examples
    smallest = min(obs, key=lambda o: o.info["target_rel_area"])
    largest = max(obs, key=lambda o: o.info["target_rel_area"])
    assert smallest.info["sample_weight"] > largest.info["sample_weight"]
    assert gg.make_env(cfg_of(difficulty="off"), "train").reset(0).info["sample_weight"] == 1.0


def test_sample_weights_hook():
    cfg = cfg_of(success_beta=0.5)
    env = gg.make_env(cfg, "train")
    obs = env.reset(5)
    hit, miss = answer(obs.info["gt_box"]), "nothing"
    group = [episode(obs, hit, env.step(hit))] + [episode(obs, miss) for _ in range(3)]  # p = 1/4
    w0 = obs.info["sample_weight"]
    assert gg.sample_weights(group, cfg) == pytest.approx([w0 * 1.25] * 4)  # 1 + 0.5 * (1 - 2/4)
    assert gg.sample_weights(group, cfg_of(difficulty="off", success_beta=0.0)) == [1.0] * 4
    assert gg.sample_weights(group, cfg_of()) == pytest.approx([w0] * 4)


def test_episode_success_is_the_click_hit_not_partial_credit():
    env = gg.make_env(cfg_of(), "train")
    obs = env.reset(5)
    x1, y1, x2, y2 = obs.info["gt_box"]
    w, h = obs.info["image_size"]
    # Overlaps the target (IoU and box credit > 0) but its centre lies outside it.
    off = [x1 + 0.8 * (x2 - x1), y1, min(x2 + 2 * (x2 - x1), w), y2]
    near = env.step(answer(off))
    assert near.info["hit"] == 0.0 and sum(near.rewards.values()) > 0
    assert gg.episode_success(episode(obs, answer(off), near), cfg_of()) == 0.0
    hit = answer(obs.info["gt_box"])
    assert gg.episode_success(episode(obs, hit, env.step(hit)), cfg_of()) == 1.0


def test_jsonl_data_source(tmp_path):
    path = tmp_path / "train.jsonl"
    write_jsonl(str(path), range(30), n_widgets=(1, 2), width_range=(112, 224))
    cfg = cfg_of(data=str(path))
    n_tr, n_ev = gg.num_examples(cfg, "train"), gg.num_examples(cfg, "eval")
    assert n_tr + n_ev == 30 and n_ev >= 1
    env = gg.make_env(cfg, "eval")
    obs = env.reset(0)
    assert env.step(answer(obs.info["gt_box"])).info["hit"] == 1.0
    cfg2 = cfg_of(data=str(path), eval_data=str(path))
    assert gg.num_examples(cfg2, "eval") == 30


def test_report_on_synthetic_episodes(tmp_path):
    cfg = cfg_of()
    env = gg.make_env(cfg, "eval")
    eps = []
    for i in range(4):
        obs = env.reset(i)
        text = answer(obs.info["gt_box"]) if i < 3 else "???"
        eps.append(episode(obs, text))
    rep = gg.report(eps, cfg)
    assert rep["count"] == 4 and rep["overall"] == 0.75 and rep["parse_failure_rate"] == 0.25
    assert rep["stderr"] == pytest.approx((0.75 * 0.25 / 4) ** 0.5)
    assert "platform/element_type" in rep["breakdown"]
    json.dumps(rep)


def test_targets_per_screen_gives_consecutive_examples_one_screen_and_different_targets():
    env = gg.make_env(cfg_of(n_widgets=[3, 3], targets_per_screen=3), "train")
    obs = [env.reset(i) for i in range(6)]
    for group in (obs[:3], obs[3:]):
        seeds = {o.info["metadata"]["layout_seed"] for o in group}
        assert len(seeds) == 1  # one screen ...
        assert len({o.info["instruction"] for o in group}) == 3  # ... each of its widgets named once
        assert len({tuple(o.info["gt_box"]) for o in group}) == 3
        assert len({png(o.images[0]) for o in group}) == 1
    assert obs[0].info["metadata"]["layout_seed"] != obs[3].info["metadata"]["layout_seed"]
    # offset 0 is the screen's own target, so K=1 (the default) reproduces the plain examples
    plain = gg.make_env(cfg_of(n_widgets=[3, 3]), "train")
    assert env.reset(3).info["gt_box"] == plain.reset(1).info["gt_box"]
    assert env.reset(3).info["instruction"] == plain.reset(1).info["instruction"]
    # held-out screens never repeat
    ev = gg.make_env(cfg_of(n_widgets=[3, 3], targets_per_screen=3), "eval")
    assert len({ev.reset(i).info["metadata"]["layout_seed"] for i in range(4)}) == 4
    with pytest.raises(ValueError, match="targets_per_screen"):
        cfg_of(targets_per_screen=0)


def test_training_rewards_score_only_the_prompted_format_by_default():
    other = lambda box: json.dumps([{"box": box}])  # noqa: E731 - a box under a key the prompt never asked for
    for split in ("train", "eval"):
        env = gg.make_env(cfg_of(), split)
        obs = env.reset(3)
        res = env.step(other(obs.info["gt_box"]))
        if split == "train":
            assert res.rewards == {"hit": 0.0, "iou": 0.0, "box": 0.0} and res.info["reason"] == "format"
        else:  # evaluation keeps the lenient reading
            assert res.info["hit"] == 1.0
        assert env.step(answer(obs.info["gt_box"])).info["hit"] == 1.0
    env = gg.make_env(cfg_of(train_format="lenient"), "train")
    obs = env.reset(3)
    assert env.step(other(obs.info["gt_box"])).info["hit"] == 1.0
    with pytest.raises(ValueError, match="train_format"):
        cfg_of(train_format="loose")
