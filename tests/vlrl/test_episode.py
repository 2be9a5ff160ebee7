"""Observation.release: what it frees and what a report still reads afterwards."""
from PIL import Image

from vlrl.episode import Observation


def _obs() -> Observation:
    frame = Image.new("RGB", (8, 8))
    return Observation(messages=[{"role": "user", "content": [{"type": "image"}]}], images=[frame], videos=[[frame]],
                       video_fps=[1.0], info={"answer": 3}, cache={"inputs": object()}, role="spy")


def test_release_frees_pixels_and_encoding_but_keeps_what_reports_read():
    obs = _obs()
    obs.release()
    assert obs.images == [] and obs.videos == [] and obs.cache == {}
    assert obs.messages[0]["content"] == [{"type": "image"}] and obs.info == {"answer": 3} and obs.role == "spy"


def test_release_encoding_only_keeps_the_pixels():
    obs = _obs()
    obs.release(encoding_only=True)
    assert obs.cache == {} and len(obs.images) == 1 and len(obs.videos) == 1
