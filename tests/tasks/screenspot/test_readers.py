"""ScreenSpot / -v2 / -Pro readers and the evaluation env."""

import json
import os

import pytest
from omegaconf import OmegaConf

import tasks.screenspot as ss
import tasks.screenspot_pro as ssp
from tasks.screenspot.readers import DatasetError, detect_layout, read_records

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_detect_layouts(ss_v1, ss_v2, ss_pro, tmp_path):
    assert detect_layout(ss_v1) == "screenspot"
    assert detect_layout(ss_v2) == "screenspot_v2"
    assert detect_layout(ss_pro) == "screenspot_pro"
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no known layout"):
        detect_layout(str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError):
        detect_layout(str(tmp_path / "missing"))


@pytest.mark.parametrize("fixture", ["ss_v1", "ss_v2"])
def test_screenspot_records(fixture, request):
    recs = read_records(request.getfixturevalue(fixture))
    assert len(recs) == 4
    first = recs[0]
    assert first.bbox == [40.0, 60.0, 120.0, 100.0]  # [x, y, w, h] -> [x1, y1, x2, y2]
    assert first.tags == {"platform": "mobile", "element_type": "text", "data_source": "ios"}
    assert [r.tags["platform"] for r in recs] == ["mobile", "mobile", "desktop", "web"]
    assert os.path.isfile(first.image_path) and first.source.endswith("#0")
    web = read_records(request.getfixturevalue(fixture), subsets=["web"])
    assert len(web) == 1 and web[0].instruction == "home"


def test_pro_records(ss_pro):
    recs = read_records(ss_pro)
    assert len(recs) == 3
    ps = [r for r in recs if r.tags["application"] == "photoshop"][0]
    assert ps.bbox == [500.0, 20.0, 540.0, 60.0] and ps.img_size == (800, 450) and ps.id == "ps_0"
    assert ps.tags == {"group": "Creative", "application": "photoshop", "platform": "windows", "ui_type": "icon"}
    assert len(read_records(ss_pro, subsets=["vscode_macos"])) == 2


def _rewrite(path, index, change):
    with open(path) as f:
        recs = json.load(f)
    change(recs[index])
    with open(path, "w") as f:
        json.dump(recs, f)


@pytest.mark.parametrize(
    "change,msg",
    [(lambda r: r.pop("bbox"), "missing key 'bbox'"), (lambda r: r.update(bbox=[1, 2, 0, 5]), "w > 0"),
     (lambda r: r.update(bbox=[1, 2, 3]), "list of 4 numbers"), (lambda r: r.update(bbox=[1, "2", 3, 4]), "finite"),
     (lambda r: r.update(img_filename="nope.png"), "image not found"), (lambda r: r.update(instruction=""), "instruction")],
)  # fmt: skip
def test_screenspot_errors_name_file_and_index(ss_v1, change, msg):
    path = os.path.join(ss_v1, "screenspot_mobile.json")
    _rewrite(path, 1, change)
    with pytest.raises(DatasetError) as e:
        read_records(ss_v1)
    assert "screenspot_mobile.json record 1" in str(e.value) and msg in str(e.value)


def test_pro_errors(ss_pro):
    path = os.path.join(ss_pro, "annotations", "photoshop_windows.json")
    _rewrite(path, 0, lambda r: r.update(bbox=[50, 20, 40, 60]))
    with pytest.raises(DatasetError, match=r"photoshop_windows.json record 0: .*x2 > x1"):
        read_records(ss_pro)
    with open(path, "w") as f:
        f.write("{not json")
    with pytest.raises(DatasetError, match="photoshop_windows.json: invalid JSON"):
        read_records(ss_pro)


def cfg(data_dir, cls=ss.Config, **kw):
    return cls(data_dir=data_dir, **kw)


def test_env_reset_step_in_original_pixels(ss_v1):
    c = cfg(ss_v1)
    assert ss.num_examples(c, "eval") == 4
    env = ss.make_env(c, "eval")
    obs = env.reset(2)  # desktop record: 400x300, bbox [100,100,150,120]
    assert obs.info["orig_size"] == [400, 300] and obs.info["image_size"] == [392, 308]
    assert obs.images[0].size == (392, 308) and obs.info["gt_box_orig"] == [100.0, 100.0, 150.0, 120.0]
    assert obs.info["tags"]["platform"] == "desktop" and obs.info["layout"] == "screenspot"
    gt = obs.info["gt_box"]
    perfect = env.step(json.dumps([{"bbox_2d": gt}]))
    assert sum(perfect.rewards.values()) == pytest.approx(1.375)
    # a point at original (149, 119) is inside; in the model frame that is (149*392/400, 119*308/300)
    inside = env.step(json.dumps({"point_2d": [149 * 392 / 400, 119 * 308 / 300]}))
    assert inside.info["hit"] == 1.0 and inside.info["reason"] == "point"
    outside = env.step(json.dumps({"point_2d": [152 * 392 / 400, 110 * 308 / 300]}))
    assert outside.info["hit"] == 0.0
    with pytest.raises(IndexError):
        env.reset(4)
    with pytest.raises(ValueError, match="evaluation-only"):
        ss.make_env(c, "train")


def test_env_limit_subsets_and_size_check(ss_pro):
    c = cfg(ss_pro, ssp.Config, limit=2)
    assert ss.num_examples(c, "eval") == 2 and c.layout == "screenspot_pro"
    env = ssp.make_env(c, "eval")
    assert env.reset(1).info["tags"]["group"] in {"Dev", "Creative"}
    path = os.path.join(ss_pro, "annotations", "photoshop_windows.json")
    _rewrite(path, 0, lambda r: r.update(img_size=[801, 450]))
    bad = ssp.make_env(cfg(ss_pro, ssp.Config, subsets=["photoshop_windows"], max_pixels=100000), "eval")
    with pytest.raises(DatasetError, match="img_size"):
        bad.reset(0)


@pytest.mark.parametrize("name,cls", [("screenspot", ss.Config), ("screenspot_pro", ssp.Config)])
def test_yaml_configs(name, cls):
    yaml = OmegaConf.load(os.path.join(ROOT, "configs", "task", f"{name}.yaml"))
    c = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), yaml))
    assert c.name == name and c.module == f"tasks.{name}"
    with pytest.raises(ValueError, match="layout"):
        cls(layout="screenspot_v3")
