"""The "Who is the spy" game as one multi-role episode: N * R clue turns, then the decision turn(s).

Turn order of a game (every turn is one Observation with its `role`):
  clue turns t = 0 .. N*R - 1: player t % N speaks in round t // N ("spy" or "civilian"), seeing its own
      image, every earlier clue and its own earlier outputs;
  decision: `observer` mode: one observation (original image + all clues) with num_samples = G (the
      rollout draws the G samples in one batched call); `vote` mode: each civilian in turn ("voter").
Rewards at step time: decision turns {"decision": decision_reward}; clue turns {"clue": 0.0}, filled in
by `score_clues` from the votes once the game is over (the last turn's info["game"] holds everything).
Warm-start prompts (`task.scripted`, vlrl/sft.py only): a mid-game clue or decision prompt with a scripted history,
or a one-turn perception sub-task outside any game (`verify`: is this phrase true of the image?; `describe`: every
object of one image), each with its reference answer in info["reference"].
"""

from __future__ import annotations

import random

import numpy as np
from PIL import Image

from rewards.vision_zero import (NA, PLAYER_BASE, boxed_contents, check_clue, clue_rewards, normalise_clue, score_decision,
                                 votes_received)
from tasks.vision_zero.config import Config
from tasks.vision_zero.language import description, is_true, look, phrases, reference_decision
from tasks.vision_zero.pairs import Pair
from vlrl.episode import Observation, StepResult

SPY_NOTE = ("You are the spy: your image differs from the others' (some objects were changed; positions are the "
            "same). Blend in.")
CIVILIAN_NOTE = "You are a civilian. One player, the spy, sees a changed image: help find the spy."
CLUE_ASK = {"grounded": "Give one new clue about your image in \\boxed{}, like \\boxed{there is a red circle}.",
            "free": "Describe one feature of your image in one new sentence inside \\boxed{}."}


def pair_seed(split: str, seed: int) -> int:
    """The generator seed of game `seed` of `split`: train and eval draw disjoint pairs."""
    return random.Random(f"vision_zero:{split}:{seed}").getrandbits(31)


def make_pair(cfg: Config, split: str, seed: int) -> Pair:
    s = pair_seed(split, seed)
    if cfg.pairs == "grid":
        from tasks.vision_zero.pairs.grid import grid_pair

        return grid_pair(s, grid=cfg.grid, k=cfg.changes, num_objects=None if cfg.changes < 2 else
                         random.Random(s).randint(max(2, cfg.changes), cfg.grid * cfg.grid - 1))
    width, height = cfg.image_width, cfg.image_width * 3 // 4
    if cfg.pairs == "chart":
        from tasks.vision_zero.pairs.charts import chart_pair

        return chart_pair(s, num_changes=cfg.changes, width=width, height=height)
    from tasks.vision_zero.pairs.clevr import clevr_pair

    return clevr_pair(s, k=cfg.changes, num_objects=random.Random(s).randint(max(3, cfg.changes), 8),
                      width=width, height=height)


def clue_lines(clues: list[dict]) -> str:
    """The earlier clues as prompt lines, "Player k: clue" (a turn without one box shows "(no clue)")."""
    if not clues:
        return "(none yet)"
    return "\n".join(f"Player {c['player'] + PLAYER_BASE}: {c['clue'] if c['clue'] is not None else '(no clue)'}"
                     for c in clues)


def clue_prompt(cfg: Config, player: int, spy: int, clues: list[dict]) -> str:
    own = [c["text"].strip()[:300] for c in clues if c["player"] == player and c["text"].strip() != f"\\boxed{{{c['clue']}}}"]
    notes = ("\nYour earlier answers:\n" + "\n".join(own)) if own else ""
    return (f"Who is the spy? You are Player {player + PLAYER_BASE} of {cfg.players}. "
            f"{SPY_NOTE if player == spy else CIVILIAN_NOTE}\nClues so far:\n{clue_lines(clues)}{notes}\n"
            f"{CLUE_ASK[cfg.clue_language]}")


def verify_prompt(clue: str) -> str:
    return (f"Is this statement true of the image? {clue}\nAnswer \\boxed{{yes}} or \\boxed{{no}}.")


DESCRIBE_ASK = "Describe the whole image: every object, in order, separated by ; inside one \\boxed{}."


def described(text: str) -> list[str]:
    """The phrases of a description answer (one box, split at ";", normalised); [] without exactly one box."""
    boxes = boxed_contents(text)
    return [normalise_clue(p) for p in boxes[0].split(";") if p.strip()] if len(boxes) == 1 else []


def verify_choice(text: str) -> bool | None:
    """True for one box holding "yes", False for "no", None otherwise (malformed: counted as wrong)."""
    boxes = boxed_contents(text)
    answer = normalise_clue(boxes[0]) if len(boxes) == 1 else None
    return {"yes": True, "no": False}.get(answer)


def decision_prompt(cfg: Config, clues: list[dict], voter: int | None) -> str:
    who = ("You watch a game of Who is the spy. This is the original image; one player, the spy, saw a changed one."
           if voter is None else f"You are Player {voter + PLAYER_BASE}, a civilian; this is your image.")
    check = {"off": "Which", "clues": "Check each clue against the image (player: clue yes/no), then say which",
             "scene_clues": "Describe the image, check each clue against it (player: clue yes/no), then say which",
             "look": "For each clue say what is at its place in the image (player: what is there yes/no), then say which"}
    check = check[cfg.observer_checks]
    return (f"{who}\nClues:\n{clue_lines(clues)}\n{check} player is the spy? Answer \\boxed{{k}} with k from 1 to "
            f"{cfg.players}, or \\boxed{{N/A}} if you cannot tell.")


def clue_checks(clues: list[dict], record: dict, looked: bool = False) -> str:
    """The checks an observer writes before its answer (`task.observer_checks`): "k: clue yes|no" per clue against the
    original image (`looked`: "k: <what is at the clue's place> yes|no"), "; "-separated; a turn without a clue
    reads "k: none"."""
    return "; ".join(f"{c['player'] + PLAYER_BASE}: " + ("none" if c["clue"] is None else
                     f"{look(c['clue'], record) if looked else c['clue']} "
                     f"{'yes' if is_true(c['clue'], record, False) else 'no'}") for c in clues)


def graded_checks(text: str, clues: list[dict], record: dict, mode: str) -> list[tuple[bool, bool]]:
    """(clue true of the original image, check right) for each clue of a game, as checked in one decision `text`
    written with `task.observer_checks=mode` (not "off"). A check is right when the decision's i-th "k: clue yes|no"
    names clue i (same player, same normalised phrase; `look`: what is at the clue's place) with the right verdict;
    a decision without checks has every check wrong. Turns without a clue are not graded."""
    expected = [(i, c, is_true(c["clue"], record, False), look(c["clue"], record) if mode == "look" else c["clue"])
                for i, c in enumerate(clues) if c["clue"] is not None]
    checks = text.split("\\boxed")[0].rstrip(" .").split(". ")[-1].split("; ")
    out = []
    for i, c, truth, said in expected:
        head, _, rest = checks[i].partition(": ") if i < len(checks) else ("", "", "")
        phrase, _, verdict = rest.rpartition(" ")
        right = (head == str(c["player"] + PLAYER_BASE) and normalise_clue(phrase) == normalise_clue(said)
                 and verdict == ("yes" if truth else "no"))
        out.append((truth, right))
    return out


def _observation(text: str, image: np.ndarray, role: str, info: dict, num_samples: int = 1) -> Observation:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    return Observation(messages=messages, images=[Image.fromarray(image)], info=info, role=role,
                       num_samples=num_samples)


def exposing_phrases(record: dict, forms) -> list[str]:
    """Phrases (of `forms`: language.phrases or .description) true of the spy's image and not of the original:
    a clue that exposes the spy."""
    original = set(forms(record, False))
    return [p for p in forms(record, True) if p not in original]


def caught(votes: list[float], spy: int) -> bool:
    """The spy is caught when it received strictly more votes than every other player."""
    return votes[spy] > 0 and all(v < votes[spy] for j, v in enumerate(votes) if j != spy)


class VisionZeroEnv:
    """One game per reset; see the module docstring for the turn order."""

    def __init__(self, cfg: Config, split: str):
        self.cfg, self.split = cfg, split
        self.pair: Pair | None = None

    def reset(self, seed: int) -> Observation:
        self.pair = make_pair(self.cfg, self.split, seed)
        self.seed = seed
        self.spy = random.Random(f"spy:{self.split}:{seed}").randrange(self.cfg.players)
        self.clues: list[dict] = []
        self.decisions: list[dict] = []
        if self.cfg.scripted == "verify":
            return self._verify_observation()
        if self.cfg.scripted == "describe":
            return self._describe_observation()
        return self._clue_observation() if self.cfg.scripted == "off" else self._scripted()

    def _verify_observation(self) -> Observation:
        """Clue verification (a warm-start sub-task, not part of a game): one image of the pair and one phrase
        in the clue language, true of it or not with even odds. A false phrase is, with even odds, one the
        other image of the pair makes true (the kind that exposes a spy) or one of another pair's images."""
        rng = random.Random(f"verify:{self.split}:{self.seed}")
        modified = rng.random() < 0.5
        forms = description if self.cfg.verify_look else phrases  # verify_look: position phrases only
        own = forms(self.pair.record, modified)
        truth = rng.random() < 0.5
        if truth:
            clue = rng.choice(own)
        else:
            other = make_pair(self.cfg, self.split, self.seed + 1_000_003).record
            pools = [("pair", forms(self.pair.record, not modified)), ("other", forms(other, False))]
            rng.shuffle(pools)
            kind, pool = next(((k, [p for p in ps if p not in own]) for k, ps in pools if any(p not in own for p in ps)))
            clue = rng.choice(pool)
        # the kind of a false phrase: "pair" (true of the pair's other image: a spy-exposing difference) or "other"
        kind = "true" if truth else kind
        look = ""
        if self.cfg.verify_look:  # first say what is at the clue's place in the shown image, then compare
            place = clue.split(" is a ")[0]
            look = next((p for p in own if p.startswith(place + " is a ")), f"{place} is empty") + ". "
        info = {"stage": "verify", "truth": truth, "clue": clue, "kind": kind, "seed": self.seed,
                "record": self.pair.record, "reference": look + ("\\boxed{yes}" if truth else "\\boxed{no}")}
        self._verify_truth, self._verify_kind = truth, kind
        return _observation(verify_prompt(clue), self.image_of(self.spy if modified else None), "verifier", info)

    def _scripted(self) -> Observation:
        """A mid-game prompt with a scripted history and its reference answer in info["reference"] (warm
        start): every earlier player said a true phrase of its own image; each spy clue is, with even odds,
        one true of both images (hiding its difference) or one true of its image only (exposing it). Decision prompts' reference: `reference_decision`."""
        rng = random.Random(f"script:{self.split}:{self.seed}")
        n_clues = self.cfg.players * self.cfg.rounds
        decision = self.cfg.scripted == "decision" or (self.cfg.scripted == "mixed" and rng.random() < 0.5)
        upto = n_clues if decision else rng.randrange(n_clues)
        forms = self._forms()
        own = {False: forms(self.pair.record, False), True: forms(self.pair.record, True)}
        shared = [p for p in own[True] if p in set(own[False])]
        exposing = exposing_phrases(self.pair.record, forms)
        said: list[str] = []
        for t in range(upto + (0 if decision else 1)):
            player = t % self.cfg.players
            pool = own[player == self.spy]
            if player == self.spy:  # half hiding (true of both images), half exposing (true of its image only)
                pool = (shared if rng.random() < 0.5 else exposing) or pool
            fresh = [p for p in pool if p not in said] or pool
            said.append(rng.choice(fresh))
        if decision and self.cfg.lie_rate:
            self._lie(said, forms)
        for t, clue in enumerate(said[:upto]):
            self.clues.append({"player": t % self.cfg.players, "round": t // self.cfg.players,
                               "text": f"\\boxed{{{clue}}}", "clue": clue, "ok": True, "reason": None})
        if decision:
            by_player = [[c["clue"] for c in self.clues if c["player"] == j] for j in range(self.cfg.players)]
            ref = reference_decision(by_player, self.pair.record)
            obs = self._decision_observation()
            answer = f"\\boxed{{{ref if ref == NA else ref + PLAYER_BASE}}}"
            checks = {"off": "", "clues": f"{clue_checks(self.clues, self.pair.record)}. ",
                      "scene_clues": f"{'; '.join(description(self.pair.record, False))}. "
                                     f"{clue_checks(self.clues, self.pair.record)}. ",
                      "look": f"{clue_checks(self.clues, self.pair.record, looked=True)}. "}[self.cfg.observer_checks]
            obs.info["reference"] = checks + answer
        else:
            obs = self._clue_observation()
            obs.info["reference"] = f"\\boxed{{{said[upto]}}}"
        return obs

    def _forms(self):
        return description if self.cfg.observer_checks == "look" else phrases  # look: position phrases only

    def _slip(self, t: int) -> str | None:
        """`task.slip_rate`: the phrase that replaces the spy's clue at turn t (true of its image only), or None (no
        slip this turn, or nothing left to expose). Its own random stream per game and turn."""
        rng = random.Random(f"slip:{self.split}:{self.seed}:{t}")
        if rng.random() >= self.cfg.slip_rate:
            return None
        said = {c["clue"] for c in self.clues}
        pool = [p for p in exposing_phrases(self.pair.record, self._forms()) if p not in said]
        return rng.choice(pool) if pool else None

    def _lie(self, said: list[str], forms) -> None:
        """`task.lie_rate`: replace each scripted clue, in place, with that chance by a phrase of the same form that is
        false of the original image (from the spy's image or another pair's), so that false clues are common in the
        warm start's decision prompts and a check must look at the image. Its own random stream: lie_rate=0 prompts
        are unchanged."""
        rng = random.Random(f"lie:{self.split}:{self.seed}")
        other = make_pair(self.cfg, self.split, self.seed + 1_000_003).record
        pool = [p for p in dict.fromkeys(forms(self.pair.record, True) + forms(other, False))
                if not is_true(p, self.pair.record, False)]
        for t in range(len(said)):
            fresh = [p for p in pool if p not in said]
            if fresh and rng.random() < self.cfg.lie_rate:
                said[t] = rng.choice(fresh)

    def _describe_observation(self) -> Observation:
        """Scene description (a warm-start sub-task): one image of the pair, target `language.description`."""
        modified = random.Random(f"describe:{self.split}:{self.seed}").random() < 0.5
        target = description(self.pair.record, modified)
        info = {"stage": "describe", "target": target, "seed": self.seed, "record": self.pair.record,
                "reference": "\\boxed{" + "; ".join(target) + "}"}
        self._describe_target = target
        return _observation(DESCRIBE_ASK, self.image_of(self.spy if modified else None), "describer", info)

    # ---- observations
    def image_of(self, player: int | None) -> np.ndarray:
        return self.pair.modified if player == self.spy else self.pair.original

    def _clue_observation(self) -> Observation:
        t = len(self.clues)
        player = t % self.cfg.players
        info = {"stage": "clue", "player": player, "round": t // self.cfg.players, "spy": self.spy, "seed": self.seed,
                "record": self.pair.record}
        return _observation(clue_prompt(self.cfg, player, self.spy, self.clues), self.image_of(player),
                            "spy" if player == self.spy else "civilian", info)

    def voters(self) -> list[int | None]:
        """Who decides: [None] (the observer) or the civilians in order."""
        return [None] if self.cfg.decision == "observer" else [j for j in range(self.cfg.players) if j != self.spy]

    def _decision_observation(self) -> Observation:
        voter = self.voters()[0 if self.cfg.decision == "observer" else len(self.decisions)]
        info = {"stage": "decision", "player": voter, "spy": self.spy, "seed": self.seed, "record": self.pair.record,
                "clues": [c["clue"] for c in self.clues], "clue_players": [c["player"] for c in self.clues]}
        n = self.cfg.observer_samples if voter is None else 1
        return _observation(decision_prompt(self.cfg, self.clues, voter), self.image_of(voter),
                            "observer" if voter is None else "voter", info, num_samples=n)

    # ---- steps
    def step(self, text: str) -> StepResult:
        if self.cfg.scripted == "describe":
            said, target = described(text), [normalise_clue(p) for p in self._describe_target]
            right = sum(p in said for p in target) / len(target)
            exact = float(said == target)
            return StepResult(None, {"describe": right}, True,
                              info={"describe": {"correct": right, "exact": exact, "extra": len(set(said) - set(target))}})
        if self.cfg.scripted == "verify":
            choice = verify_choice(text)
            correct = float(choice is not None and choice == self._verify_truth)
            return StepResult(None, {"verify": correct}, True,
                              info={"verify": {"correct": correct, "choice": choice, "truth": self._verify_truth,
                                                "kind": self._verify_kind}})
        n_clues = self.cfg.players * self.cfg.rounds
        if len(self.clues) < n_clues:
            t = len(self.clues)
            check = check_clue(text, [c["clue"] for c in self.clues])
            player = t % self.cfg.players
            slip = self._slip(t) if self.cfg.slip_rate and player == self.spy else None
            self.clues.append({"player": player, "round": t // self.cfg.players, "text": text,
                               "clue": slip or check.clue, "ok": check.ok, "reason": check.reason,
                               "slipped": slip is not None})
            nxt = self._clue_observation() if len(self.clues) < n_clues else self._decision_observation()
            return StepResult(nxt, {"clue": 0.0}, False, info={"format_ok": float(check.ok), "reason": check.reason})
        voters = self.voters()
        voter = voters[0] if self.cfg.decision == "observer" else voters[len(self.decisions)]
        s = score_decision(text, self.spy, self.cfg.players)
        info = {"choice": s["choice"], "reason": s["reason"], "acc": s["acc"]}
        if self.cfg.check_reward:
            graded = graded_checks(text, self.clues, self.pair.record, self.cfg.observer_checks)
            info["checks_right"] = sum(r for _, r in graded) / len(graded) if graded else 0.0
            # The game summary (and the viewer) shows the reward the learner got, not only the released part.
            s = {**s, "reward": s["reward"] + self.cfg.check_reward * info["checks_right"],
                 "checks_right": info["checks_right"]}
        reward = s["reward"]
        self.decisions.append({"voter": voter, "text": text, **s})
        total = self.cfg.observer_samples if self.cfg.decision == "observer" else len(voters)
        if len(self.decisions) < total:
            return StepResult(self._decision_observation(), {"decision": reward}, False, info=info)
        return StepResult(None, {"decision": reward}, True, info={**info, "game": self.summary()})

    def summary(self) -> dict:
        """The finished game: spy, clues, decisions, votes received, per-player and per-clue-turn rewards."""
        cfg = self.cfg
        votes = votes_received([d["choice"] for d in self.decisions], cfg.players)
        per_player = clue_rewards(votes, self.spy, cfg.beta, cfg.lam)
        # A slipped clue is not what its player wrote: no reward either way (None = unscored, left out of the loss).
        turn_rewards = [None if c.get("slipped") else per_player[c["player"]] - (0.0 if c["ok"] else cfg.clue_format_penalty)
                        for c in self.clues]
        return {"seed": self.seed, "spy": self.spy, "players": cfg.players, "record": self.pair.record,
                "clues": self.clues, "decisions": self.decisions, "votes": votes, "player_rewards": per_player,
                "clue_turn_rewards": turn_rewards, "caught": caught(votes, self.spy),
                "observer_checks": cfg.observer_checks}


def game_of(episode) -> dict | None:
    """The summary of a finished game (its last turn's info["game"]); None when the game did not finish."""
    return episode.turns[-1].info.get("game") if episode.turns else None


def score_clues(episodes, cfg: Config) -> None:
    """Clue turns' rewards from the finished game's votes, in place; None (unscored) if it never finished."""
    for ep in episodes:
        game = game_of(ep)
        clue_turns = [t for t in ep.turns if t.observation.info.get("stage") == "clue"]
        for i, turn in enumerate(clue_turns):
            turn.rewards["clue"] = None if game is None else game["clue_turn_rewards"][i]


