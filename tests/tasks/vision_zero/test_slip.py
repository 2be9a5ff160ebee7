"""task.slip_rate: the self-play spy's clue, as everyone sees it, replaced by one that exposes it."""
import pytest

from tasks.vision_zero import Config, make_env, required_max_turns, score_episodes
from tasks.vision_zero.env import exposing_phrases
from tasks.vision_zero.language import description, is_true
from tasks.vision_zero.report import write_viewer
from vlrl.rollout import run_episodes
from vlrl.rollout.sample import Sample


class Hider:
    """Every player says the first phrase true of both images (the spy hides); the observer answers N/A."""

    def generate(self, observations, n=1, greedy=False):
        out = []
        for o in observations:
            info = o.info
            if info["stage"] == "decision":
                text = "\\boxed{N/A}"
            else:
                # the first phrase true of both images (later players repeat it: a format failure, irrelevant here)
                both = [p for p in description(info["record"], False) if p in description(info["record"], True)]
                text = "\\boxed{" + both[0] + "}"
            out.append([Sample([1], [-1.0], text, True) for _ in range(n)])
        return out


def play(cfg, seeds):
    eps = run_episodes(Hider(), lambda: make_env(cfg, "train"), seeds, 1, required_max_turns(cfg))
    score_episodes(eps, cfg)
    return eps


def cfg(rate):
    return Config(grid=2, players=3, rounds=1, observer_samples=1, observer_checks="look", slip_rate=rate)


def test_a_slip_shows_everyone_an_exposing_clue_and_leaves_that_turn_unscored():
    for ep in play(cfg(1.0), range(6)):
        game = ep.turns[-1].info["game"]
        record, spy = game["record"], game["spy"]
        exposing = exposing_phrases(record, description)
        assert exposing  # grid pairs change one object: something exposes the spy
        for turn, clue in zip(ep.turns, game["clues"]):
            if clue["player"] == spy:
                assert clue["slipped"] and clue["clue"] in exposing
                assert is_true(clue["clue"], record, True) and not is_true(clue["clue"], record, False)
                assert clue["clue"] not in clue["text"]  # the spy wrote a hiding phrase; the others see the slip
                assert turn.rewards["clue"] is None
            else:
                assert not clue["slipped"] and isinstance(turn.rewards["clue"], float)
        decision = ep.turns[-1].observation
        spy_line = next(c for c in game["clues"] if c["player"] == spy)["clue"]
        assert spy_line in decision.messages[0]["content"][1]["text"]


def test_no_slip_rate_plays_the_released_game_and_half_slips_about_half(tmp_path):
    for ep in play(cfg(0.0), range(6)):
        game = ep.turns[-1].info["game"]
        assert not any(c["slipped"] for c in game["clues"])
        assert all(isinstance(t.rewards["clue"], float) for t in ep.turns[:3])
    eps = play(cfg(0.5), range(80))
    slipped = [c["slipped"] for ep in eps for c in ep.turns[-1].info["game"]["clues"]
               if c["player"] == ep.turns[-1].info["game"]["spy"]]
    assert 0.35 < sum(slipped) / len(slipped) < 0.65
    assert not any(c["slipped"] for ep in eps for c in ep.turns[-1].info["game"]["clues"]
                   if c["player"] != ep.turns[-1].info["game"]["spy"])
    page = write_viewer(play(cfg(1.0), [0]), tmp_path / "g.html", "t").read_text()
    assert page.count(">slipped<") == 1  # the spy's clue turn, shown unscored


@pytest.mark.parametrize("bad", [dict(slip_rate=1.5), dict(slip_rate=-0.1), dict(slip_rate=0.5, scripted="decision"),
                                 dict(slip_rate=0.5, clue_language="free"), dict(slip_rate=0.5, pairs="chart")])
def test_bad_slip_rate_names_the_field(bad):
    with pytest.raises(ValueError, match="slip_rate"):
        Config(**bad)
