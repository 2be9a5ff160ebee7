"""Model-frame coordinates: smart_resize frames and the original <-> model round trip."""

import pytest
from PIL import Image

from tasks.gui_grounding.coords import (
    box_to_model, box_to_original, model_frame_size, point_to_original, resize_to_model_frame,
)  # fmt: skip


def test_frame_by_hand():
    # 310x232, max 224*224: rounded 308x224 is too big; beta = sqrt(310*232/50176) = 1.197;
    # H = floor(232/1.197/28)*28 = 168, W = floor(310/1.197/28)*28 = 252.
    assert model_frame_size((310, 232), 56 * 56, 224 * 224) == (252, 168)
    assert model_frame_size((224, 224), 56 * 56, 224 * 224) == (224, 224)  # already a frame: identity
    assert model_frame_size((30, 20), 56 * 56, 224 * 224) == (84, 56)  # upscaled to min_pixels


@pytest.mark.parametrize("size", [(320, 568), (1280, 720), (1920, 1080), (3840, 2160), (113, 67)])
@pytest.mark.parametrize("max_pixels", [224 * 224, 448 * 448, 12845056])
def test_frame_properties(size, max_pixels):
    w, h = model_frame_size(size, 56 * 56, max_pixels)
    assert w % 28 == 0 and h % 28 == 0 and 56 * 56 <= w * h <= max_pixels
    assert model_frame_size((w, h), 56 * 56, max_pixels) == (w, h)  # idempotent


def test_box_round_trip():
    orig, frame = (1920, 1080), model_frame_size((1920, 1080), 3136, 224 * 224)
    box = [100.0, 200.5, 640.0, 1079.0]
    m = box_to_model(box, orig, frame)
    assert m[0] == pytest.approx(100 * frame[0] / 1920) and m[3] == pytest.approx(1079 * frame[1] / 1080)
    assert box_to_original(m, frame, orig) == pytest.approx(box)
    assert point_to_original([frame[0] / 2, frame[1]], frame, orig) == pytest.approx([960, 1080])


def test_resize_to_model_frame():
    img = Image.new("RGB", (1280, 720), (10, 20, 30))
    out = resize_to_model_frame(img, 3136, 224 * 224)
    assert out.size == model_frame_size((1280, 720), 3136, 224 * 224)
    assert resize_to_model_frame(out, 3136, 224 * 224) is not None
    assert resize_to_model_frame(out, 3136, 224 * 224).size == out.size


def test_bad_size():
    with pytest.raises(ValueError):
        model_frame_size((0, 10))
