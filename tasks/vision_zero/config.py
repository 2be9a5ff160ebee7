"""Typed config of the Vision-Zero game (`task=vision_zero`); invalid values fail at load, naming the field."""

from __future__ import annotations

from dataclasses import dataclass

from vlrl.config import opt

DECISIONS = ("observer", "vote")
SCHEDULES = ("fixed", "adaptive")
LANGUAGES = ("grounded", "free")
PAIRS = ("grid", "chart", "clevr")
OBSERVER_CHECKS = ("off", "clues", "scene_clues", "look")
SCRIPTED = ("off", "clue", "decision", "mixed", "verify", "describe")


def _bad(field: str, value, why: str) -> ValueError:
    return ValueError(f"invalid config value for 'task.{field}': {value!r} ({why})")


@dataclass
class Config:
    name: str = opt("vision_zero", "task name in logs and reports")
    module: str = opt("tasks.vision_zero", "where the task lives")
    players: int = opt(4, "N: players per game (one of them the spy)")
    rounds: int = opt(2, "R: clue rounds; every player speaks once per round, in order")
    decision: str = opt("observer", "decision stage: observer (original image + all clues, sampled "
                        "observer_samples times) | vote (every civilian votes once)")
    observer_samples: int = opt(4, "G: samples of the observer's decision prompt (one batched call)")
    observer_checks: str = opt("off", "what the observer writes before its boxed answer: off | clues (\"2: top left is a "
                               "red circle no; ...\" per clue) | scene_clues (first the original image's description, "
                               "then the clue checks) | look (grid: per clue what is at its place, \"2: top left is a blue circle no\"; "
                               "scripted clues are then position phrases); the warm start's decision targets carry them")
    schedule: str = opt("fixed", "Iterative-SPO: fixed (decision when step % (2 cycle) < cycle) | adaptive")
    cycle: int = opt(5, "fixed schedule: L, steps per phase")
    to_clue_accuracy: float = opt(0.9, "adaptive: switch to clue training at this windowed decision accuracy ...")
    max_na_rate: float = opt(0.1, "adaptive: ... and at most this N/A rate")
    back_accuracy: float = opt(0.6, "adaptive: back to decision training below this accuracy")
    switch_window: int = opt(4, "adaptive: steps pooled for each switch judgement")
    clue_language: str = opt("grounded", "grounded (prompts name the scene-phrase forms the warm start taught) "
                             "| free (one free sentence: real checkpoints)")
    pairs: str = opt("grid", "image pairs: grid (tiny-model scenes, fast) | chart (matplotlib) | clevr (MuJoCo)")
    grid: int = opt(3, "grid pairs: cells per side (28 px each)")
    changes: int = opt(1, "objects (grid, clevr) or values/labels (chart) changed in the spy's image")
    image_width: int = opt(160, "chart / clevr pairs: width in pixels (height = 3/4 of it)")
    beta: float = opt(0.1, "clue reward: weight of Psi = v_spy - mean(v_civilians)")
    lam: float = opt(0.1, "clue reward: weight of a civilian's own excess votes")
    clue_format_penalty: float = opt(0.3, "subtracted from the clue reward of a malformed clue (no box, repeat, ...)")
    alarm_window: int = opt(50, "collapse alarm: games in the sliding window")
    alarm_threshold: float = opt(0.9, "collapse alarm: raised when one side wins more than this share of the window")
    viewer_every: int = opt(10, "write DIR/games/step_N.html (one game per page) every N steps; 0 = never")
    scripted: str = opt("off", "warm start only (vlrl/sft.py): reset(seed) returns a mid-game clue | decision | mixed "
                        "(half each) prompt with a scripted history and its reference answer, a verify prompt "
                        "(is this phrase true of the image? yes / no) or a describe prompt (every object); "
                        "off = real games")
    verify_look: bool = opt(False, "verify prompts (grid pairs) use position phrases only, and the target first says what "
                            "is at that place (\"top left is a blue circle.\" or \"... is empty.\") before the box")
    lie_rate: float = opt(0.0, "warm-start decision prompts only: chance that each scripted clue, any player's, is "
                          "replaced by a phrase false of the original image, so that checks say \"no\" often and "
                          "copying a clue does not pass for checking it; 0 = only spy clues that expose it are false")
    slip_rate: float = opt(0.0, "self-play games only: chance that the spy's clue, as everyone sees it, is replaced by a "
                           "phrase true of its image only (it exposes itself), so that checking clues pays in decisions "
                           "as often as in held-out games; a replaced clue turn is unscored; 0 = the released game")
    check_reward: float = opt(0.0, "observer decisions: + this weight x the share of its written clue checks that are "
                              "right (graded against the scene graph, so no longer label-free); 0 = the released reward")
    eval_examples: int = opt(200, "held-out games (eval seeds 0..N-1)")

    def __post_init__(self):
        checks = [
            ("players", self.players >= 3, "at least 3: one spy and two civilians"),
            ("rounds", self.rounds >= 1, "at least 1"),
            ("decision", self.decision in DECISIONS, f"one of {DECISIONS}"),
            ("observer_samples", self.observer_samples >= 1, "at least 1"),
            ("observer_checks", self.observer_checks in OBSERVER_CHECKS, f"one of {OBSERVER_CHECKS}"),
            ("schedule", self.schedule in SCHEDULES, f"one of {SCHEDULES}"),
            ("cycle", self.cycle >= 1, "at least 1"),
            ("switch_window", self.switch_window >= 1, "at least 1"),
            ("clue_language", self.clue_language in LANGUAGES, f"one of {LANGUAGES}"),
            ("pairs", self.pairs in PAIRS, f"one of {PAIRS}"),
            ("grid", 2 <= self.grid <= 4, "2 to 4"),
            ("changes", self.changes >= 1 and (self.pairs != "chart" or self.changes <= 2), "at least 1 (charts: 1 or 2)"),
            ("image_width", self.image_width >= 56, "at least 56"),
            ("beta", self.beta >= 0, ">= 0"),
            ("lam", self.lam >= 0, ">= 0"),
            ("clue_format_penalty", self.clue_format_penalty >= 0, ">= 0"),
            ("alarm_window", self.alarm_window >= 1, "at least 1"),
            ("alarm_threshold", 0.5 <= self.alarm_threshold <= 1, "in [0.5, 1]"),
            ("viewer_every", self.viewer_every >= 0, ">= 0"),
            ("scripted", self.scripted in SCRIPTED, " | ".join(SCRIPTED)),
            ("eval_examples", self.eval_examples >= 0, ">= 0"),
            ("lie_rate", 0 <= self.lie_rate <= 1, "in [0, 1]"),
            ("slip_rate", 0 <= self.slip_rate <= 1, "in [0, 1]"),
            ("check_reward", self.check_reward >= 0, ">= 0"),
        ]
        for field, ok, why in checks:
            if not ok:
                raise _bad(field, getattr(self, field), why)
        if self.observer_checks == "look" and self.pairs != "grid":
            raise _bad("observer_checks", self.observer_checks, "look needs position phrases: task.pairs=grid")
        if self.verify_look and self.pairs != "grid":
            raise _bad("verify_look", self.verify_look, "position phrases exist for grid pairs only: task.pairs=grid")
        if self.lie_rate and self.scripted not in ("decision", "mixed"):
            raise _bad("lie_rate", self.lie_rate, "changes warm-start decision prompts only: task.scripted=decision|mixed")
        if self.slip_rate and (self.scripted != "off" or self.clue_language != "grounded" or self.pairs != "grid"):
            raise _bad("slip_rate", self.slip_rate, "replaces self-play clues by scene phrases: needs task.scripted=off, "
                       "task.clue_language=grounded and task.pairs=grid")
        if self.check_reward and (self.observer_checks == "off" or self.decision != "observer"):
            raise _bad("check_reward", self.check_reward, "grades the observer's written checks: needs "
                       "task.observer_checks other than off and task.decision=observer")
        if self.back_accuracy > self.to_clue_accuracy:
            raise _bad("back_accuracy", self.back_accuracy, "must be <= to_clue_accuracy")
        for field in ("to_clue_accuracy", "max_na_rate", "back_accuracy"):
            if not 0 <= getattr(self, field) <= 1:
                raise _bad(field, getattr(self, field), "in [0, 1]")
