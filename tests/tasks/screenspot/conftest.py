"""Tiny datasets in the three official ScreenSpot layouts, written to a tmp dir."""

import json
import os

import pytest
from PIL import Image, ImageDraw


def _image(path, size, box_xyxy, color=(40, 100, 230)):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    img = Image.new("RGB", size, (245, 245, 245))
    ImageDraw.Draw(img).rectangle(box_xyxy, fill=color)
    img.save(path)


def _dump(path, records):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(records, f)


def make_screenspot(root, v2=False):
    """ScreenSpot (v1) or -v2: 4 records over mobile / desktop / web, bbox = [x, y, w, h]."""
    img_dir = os.path.join(root, "screenspotv2_image" if v2 else "screenspot_imgs")
    suffix = "_v2" if v2 else ""
    recs = {
        "mobile": [
            {"img_filename": "mobile_1.png", "bbox": [40, 60, 80, 40], "instruction": "open settings", "data_type": "text", "data_source": "ios"},
            {"img_filename": "mobile_1.png", "bbox": [200, 10, 30, 30], "instruction": "close", "data_type": "icon", "data_source": "ios"},
        ],
        "desktop": [{"img_filename": "pc_1.png", "bbox": [100, 100, 50, 20], "instruction": "save file", "data_type": "text", "data_source": "macos"}],
        "web": [{"img_filename": "web_1.png", "bbox": [0, 0, 20, 20], "instruction": "home", "data_type": "icon", "data_source": "shop"}],
    }  # fmt: skip
    for platform, rs in recs.items():
        for r in rs:
            x, y, w, h = r["bbox"]
            p = os.path.join(img_dir, r["img_filename"])
            if not os.path.exists(p):
                _image(p, (400, 300), (x, y, x + w, y + h))
        _dump(os.path.join(root, f"screenspot_{platform}{suffix}.json"), rs)
    return root


def make_pro(root):
    """ScreenSpot-Pro: images/<app>/..., annotations/<app>_<os>.json, bbox = [x1, y1, x2, y2]."""
    recs = {
        "vscode_macos": [
            {"img_filename": "vscode_mac/a.png", "bbox": [100, 50, 180, 70], "instruction": "run the file", "application": "vscode",
             "platform": "macos", "img_size": [640, 360], "ui_type": "icon", "group": "Dev", "id": "vscode_0"},
            {"img_filename": "vscode_mac/a.png", "bbox": [10, 300, 110, 330], "instruction": "open terminal", "application": "vscode",
             "platform": "macos", "img_size": [640, 360], "ui_type": "text", "group": "Dev", "id": "vscode_1"},
        ],
        "photoshop_windows": [
            {"img_filename": "ps_win/b.png", "bbox": [500, 20, 540, 60], "instruction": "brush tool", "application": "photoshop",
             "platform": "windows", "img_size": [800, 450], "ui_type": "icon", "group": "Creative", "id": "ps_0"},
        ],
    }  # fmt: skip
    os.makedirs(os.path.join(root, "annotations"), exist_ok=True)
    for stem, rs in recs.items():
        for r in rs:
            p = os.path.join(root, "images", r["img_filename"])
            if not os.path.exists(p):
                _image(p, tuple(r["img_size"]), r["bbox"])
        _dump(os.path.join(root, "annotations", f"{stem}.json"), rs)
    return root


@pytest.fixture
def ss_v1(tmp_path):
    return make_screenspot(str(tmp_path / "ss"))


@pytest.fixture
def ss_v2(tmp_path):
    return make_screenspot(str(tmp_path / "ss2"), v2=True)


@pytest.fixture
def ss_pro(tmp_path):
    return make_pro(str(tmp_path / "pro"))
