"""Reports: accuracies with binomial standard errors, breakdowns, diagnostics, Markdown, images."""

import json
import math
import os

import pytest

import tasks.screenspot as ss
import tasks.screenspot_pro as ssp
from vlrl.stats import binomial_stderr as stderr
from vlrl.episode import Episode, Turn


def run(cfg, answers):
    """Episodes for records 0..len(answers)-1; an answer is 'perfect', 'big', 'point' or raw text."""
    env = ss.make_env(cfg, "eval")
    eps = []
    for i, a in enumerate(answers):
        obs = env.reset(i)
        w, h = obs.info["image_size"]
        if a == "perfect":
            a = json.dumps([{"bbox_2d": obs.info["gt_box"]}])
        elif a == "big":
            a = json.dumps([{"bbox_2d": [0, 0, w, h]}])
        elif a == "point":
            x1, y1, x2, y2 = obs.info["gt_box"]
            a = json.dumps({"point_2d": [(x1 + x2) / 2, (y1 + y2) / 2]})
        turn = Turn(observation=obs, response_ids=[], logprobs=[], response_text=a, done=True)
        eps.append(Episode(turns=[turn]))
    return eps


def test_stderr():
    assert stderr(0.5, 4) == 0.25 and stderr(1.0, 10) == 0.0 and stderr(0.0, 0) == 0.0


def test_screenspot_report(ss_v1):
    cfg = ss.Config(data_dir=ss_v1)
    # records: mobile/text, mobile/icon, desktop/text, web/icon
    rep = ss.report(run(cfg, ["perfect", "garbage", "point", "big"]), cfg)
    assert rep["count"] == 4 and rep["layout"] == "screenspot"
    # "big" covers the whole screen: its centre (200,150) misses the web GT [0,0,20,20]
    assert rep["overall"] == 0.5 and rep["stderr"] == pytest.approx(math.sqrt(0.25 / 4))
    assert rep["parse_failure_rate"] == 0.25 and rep["reasons"] == {"parse": 1, "point": 1}
    pe = rep["breakdown"]["platform/element_type"]
    assert set(pe) == {"mobile/text", "mobile/icon", "desktop/text", "web/icon"}
    assert pe["mobile/text"] == {"accuracy": 1.0, "stderr": 0.0, "count": 1}
    assert rep["breakdown"]["platform"]["mobile"]["accuracy"] == 0.5
    assert rep["breakdown"]["element_type"]["text"] == {"accuracy": 1.0, "stderr": 0.0, "count": 2}
    # boxes: the perfect one (area ratio 1) and the full-screen one (400*300 / (20*20) = 300)
    assert rep["mean_area_ratio"] == pytest.approx((1 + 300) / 2, rel=1e-6)
    assert rep["big_box_rate"] == 0.5
    assert rep["mean_iou"] == pytest.approx((1 + 400 / 120000) / 4)
    json.dumps(rep)


def test_pro_report_breakdowns(ss_pro):
    cfg = ssp.Config(data_dir=ss_pro)
    rep = ssp.report(run(cfg, ["perfect", "perfect", "nope"]), cfg)  # files sorted: photoshop first
    bd = rep["breakdown"]
    assert set(bd) >= {"group", "application", "ui_type", "group/ui_type"}
    assert bd["group"]["Creative"]["accuracy"] == 1.0 and bd["group"]["Dev"]["count"] == 2
    assert bd["group"]["Dev"]["accuracy"] == 0.5 and bd["group"]["Dev"]["stderr"] == 0.5 * 0.5 ** 0.5
    assert set(bd["application"]) == {"photoshop", "vscode"} and set(bd["ui_type"]) == {"icon", "text"}


def test_markdown_and_annotated_images(ss_v1, tmp_path):
    cfg = ss.Config(data_dir=ss_v1)
    eps = run(cfg, ["perfect", "garbage", "point", "big"])
    rep = ss.report(eps, cfg)
    text = ss.write_markdown(rep, str(tmp_path / "out" / "report.md"), title="ScreenSpot")
    assert text.startswith("## ScreenSpot") and "| mobile/text | 100.0% | 0.0 | 1 |" in text
    assert "| click accuracy | 50.0% ± 25.0 (n=4) |" in text
    assert (tmp_path / "out" / "report.md").read_text() == text
    paths = ss.dump_annotated(eps, str(tmp_path / "imgs"), limit=3)
    assert len(paths) == 3 and all(os.path.isfile(p) for p in paths)
    assert os.path.basename(paths[0]).endswith("_hit.png") and os.path.basename(paths[1]).endswith("_miss.png")
    from PIL import Image

    img = Image.open(paths[0]).convert("RGB")
    assert min(img.size) >= 448  # scaled up: a 112 px model frame is too small to read
    colors = {c for _, c in img.getcolors(maxcolors=1 << 20)}
    assert (0, 170, 0) in colors and (220, 0, 0) in colors  # ground truth and prediction (and their legend)
