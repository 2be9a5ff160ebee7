"""Iterative-SPO during training: which roles are trained at a step, game metrics and the collapse alarm.

`SelfPlaySchedule` is the task's `role_schedule` (vlrl/task.py RoleSchedule): the core asks it for the
trained roles of each step and hands it each step's episodes. Both stages are played every step; the
phase only picks the roles that get gradients: "decision" trains the observer (or the voters), "clue"
the spy and the civilians.

Collapse alarm: the winners of the last `alarm_window` games (civilians when the spy was caught, else the
spy); `alarm` is 1.0 when the window is full and one side won more than `alarm_threshold` of it.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

from rewards.vision_zero import ACC_CORRECT, NA
from tasks.vision_zero.config import Config
from tasks.vision_zero.env import game_of
from tasks.vision_zero.report import game_stats, write_viewer
from tasks.vision_zero.schedule import DecisionStats, SwitchConfig, SwitchState, next_state, phase


def decision_role(cfg: Config) -> str:
    return "observer" if cfg.decision == "observer" else "voter"


def roles(cfg: Config) -> list[str]:
    return ["spy", "civilian", decision_role(cfg)]


def decision_stats(games: list[dict]) -> DecisionStats:
    ds = [d for g in games for d in g["decisions"]]
    return DecisionStats(sum(d["acc"] == ACC_CORRECT for d in ds), sum(d["choice"] == NA for d in ds), len(ds))


def alarm(winners, window: int, threshold: float) -> tuple[float, float]:
    """(alarm 0/1, the spy's share of the window's wins); NaN share for an empty window."""
    if not winners:
        return 0.0, float("nan")
    spy = sum(w == "spy" for w in winners) / len(winners)
    return float(len(winners) >= window and max(spy, 1 - spy) > threshold), spy


class SelfPlaySchedule:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.switch = SwitchConfig(cfg.to_clue_accuracy, cfg.max_na_rate, cfg.back_accuracy, cfg.switch_window)
        self.state = SwitchState()
        self.winners: deque[str] = deque(maxlen=cfg.alarm_window)

    def phase(self, step: int) -> str:
        return phase(step, self.cfg.cycle) if self.cfg.schedule == "fixed" else self.state.phase

    def trained_roles(self, step: int) -> list[str]:
        return [decision_role(self.cfg)] if self.phase(step) == "decision" else ["spy", "civilian"]

    def observe(self, step: int, episodes, out_dir: str | None = None) -> dict[str, float]:
        games = [g for g in (game_of(ep) for ep in episodes) if g is not None]
        trained_phase = self.phase(step)
        if self.cfg.schedule == "adaptive":
            self.state = next_state(self.state, decision_stats(games), self.switch)
        self.winners.extend("civilian" if g["caught"] else "spy" for g in games)
        stats = game_stats(games)
        raised, spy_share = alarm(self.winners, self.cfg.alarm_window, self.cfg.alarm_threshold)
        dr = decision_role(self.cfg)
        out = {f"game/{k}": v for k, v in stats.items() if not k.startswith("win_rate/")}
        out.update({"game/phase_clue": float(trained_phase == "clue"), "game/collapse_alarm": raised,
                    "game/window_spy_win_rate": spy_share, "game/unfinished": float(len(episodes) - len(games)),
                    "role/spy/win_rate": stats["win_rate/spy"], "role/civilian/win_rate": stats["win_rate/civilian"],
                    f"role/{dr}/vote_accuracy": stats["vote_accuracy"], f"role/{dr}/na_rate": stats["na_rate"],
                    f"role/{dr}/accuracy": stats["decision_accuracy"]})
        done = step + 1
        if out_dir and self.cfg.viewer_every and done % self.cfg.viewer_every == 0 and episodes:
            write_viewer(episodes[:2], Path(out_dir) / "games" / f"step_{done:07d}.html", f"vision_zero step {done}")
        return out

    def state_dict(self) -> dict:
        return {"phase": self.state.phase, "window": [[s.correct, s.na, s.total] for s in self.state.window],
                "winners": list(self.winners)}

    def load_state_dict(self, state: dict) -> None:
        self.state = SwitchState(state["phase"], tuple(DecisionStats(*w) for w in state["window"]))
        self.winners = deque(state["winners"], maxlen=self.cfg.alarm_window)
