"""Annotated evaluation examples: failures first, linked from report.md."""

from pathlib import Path
from types import SimpleNamespace

from vlrl.evaluate import write_report


class _Task:
    """Just the hooks write_report calls; an episode is a dict holding its success."""

    def markdown(self, report, cfg):
        return "## report\n"

    def episode_success(self, ep, cfg):
        return ep["ok"]

    def dump_examples(self, episodes, out_dir, cfg):
        out_dir.mkdir(parents=True)
        paths = []
        for i, ep in enumerate(episodes):
            p = out_dir / f"{i:04d}_{ep['name']}.png"
            p.write_bytes(b"x")
            paths.append(str(p))
        return paths


def test_failures_first_and_linked(tmp_path):
    eps = [{"name": "a", "ok": 1.0}, {"name": "b", "ok": 0.0}, {"name": "c", "ok": 1.0}, {"name": "d", "ok": 0.0}]
    cfg = SimpleNamespace(eval=SimpleNamespace(dump_images=3), task=None)
    out = write_report({"overall": 0.5}, eps, cfg, _Task(), str(tmp_path / "r" / "report.json"))
    names = sorted(p.name for p in (tmp_path / "r" / "report").iterdir())
    assert names == ["0000_b.png", "0001_d.png", "0002_a.png"]  # both failures, in data order, then a success
    md = out.with_suffix(".md").read_text()
    assert "## Annotated examples" in md and "(report/0000_b.png)" in md and "(report/0002_a.png)" in md
    for link in ("report/0000_b.png", "report/0001_d.png"):
        assert (out.parent / link).is_file()


def test_no_examples_no_section(tmp_path):
    cfg = SimpleNamespace(eval=SimpleNamespace(dump_images=0), task=None)
    out = write_report({"overall": 0.5}, [{"name": "a", "ok": 1.0}], cfg, _Task(), str(tmp_path / "report.json"))
    assert out.with_suffix(".md").read_text() == "## report\n" and not Path(tmp_path / "report").exists()
