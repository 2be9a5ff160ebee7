"""JSONL manifest reader (tasks/video_authenticity/manifest.py): records, errors naming the line."""

import json
from pathlib import Path

import pytest

from tasks.video_authenticity.manifest import ManifestError, Record, read_manifest


def write(tmp_path, lines, name="m.jsonl"):
    path = tmp_path / "data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join((ln if isinstance(ln, bytes) else ln.encode()) + b"\n" for ln in lines))
    return path


def test_reads_records_relative_to_the_manifest_folder(tmp_path):
    path = write(tmp_path, [
        json.dumps({"video": "clips/a.mp4", "label": "fake", "generator": "flicker", "level": 3}),
        "",  # blank lines are skipped
        json.dumps({"video": "b.mp4", "label": "real"}),
        json.dumps({"video": "/abs/c.mp4", "label": "fake", "level": "high", "generator": None}),
        json.dumps({"video": "d.mp4", "label": "fake", "level": 0.6}),
    ])
    recs = read_manifest(path)
    root = tmp_path.resolve() / "data"
    assert recs == [
        Record(root / "clips/a.mp4", "fake", "flicker", 3, line=1),
        Record(root / "b.mp4", "real", None, None, line=3),
        Record(Path("/abs/c.mp4"), "fake", None, "high", line=4),
        Record(root / "d.mp4", "fake", None, 0.6, line=5),
    ]
    assert [r.real for r in recs] == [False, True, False, False]


def test_missing_videos_are_not_an_error_at_read_time(tmp_path):
    path = write(tmp_path, [json.dumps({"video": "nowhere.mp4", "label": "real"})])
    assert read_manifest(path)[0].video == tmp_path.resolve() / "data" / "nowhere.mp4"


@pytest.mark.parametrize("line,match", [
    ('{"video": "a.mp4", "label": "real"', "not valid JSON"),
    ('["a.mp4", "real"]', "JSON object, got list"),
    ('{"label": "real"}', "'video' must be"),
    ('{"video": "", "label": "real"}', "'video' must be"),
    ('{"video": 3, "label": "real"}', "'video' must be"),
    ('{"video": "a.mp4"}', "'label' must be 'real' or 'fake', got None"),
    ('{"video": "a.mp4", "label": "Real"}', "'label' must be"),
    ('{"video": "a.mp4", "label": "generated"}', "'label' must be"),
    ('{"video": "a.mp4", "label": "fake", "generator": 5}', "'generator'"),
    ('{"video": "a.mp4", "label": "fake", "generator": " "}', "'generator'"),
    ('{"video": "a.mp4", "label": "fake", "level": true}', "'level'"),
    ('{"video": "a.mp4", "label": "fake", "level": NaN}', "'level'"),
    ('{"video": "a.mp4", "label": "fake", "level": [1]}', "'level'"),
    ('{"video": "a.mp4", "lable": "fake"}', r"unknown key\(s\) \['lable'\]"),
])
def test_malformed_record_names_the_line(tmp_path, line, match):
    path = write(tmp_path, [json.dumps({"video": "ok.mp4", "label": "real"}), "", line])
    with pytest.raises(ManifestError, match=match) as err:
        read_manifest(path)
    assert str(err.value).startswith(f"{path}:3: ")


def test_non_utf8_line_names_the_line(tmp_path):
    path = write(tmp_path, [json.dumps({"video": "ok.mp4", "label": "real"}), b'{"video": "\xff.mp4", "label": "real"}'])
    with pytest.raises(ManifestError, match=r":2: not UTF-8"):
        read_manifest(path)


def test_empty_manifest_is_refused(tmp_path):
    with pytest.raises(ManifestError, match="no records"):
        read_manifest(write(tmp_path, ["", "  "]))


def test_missing_manifest_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_manifest(tmp_path / "absent.jsonl")
