"""Asynchronous actor / learner RL for any vlrl Env: the actor keeps collecting episodes from the newest
published weights while the learner updates a separate copy of the policy.

Actor (the thread that calls `run`): `collect(i)` runs episode i; the default runs one `Env` (vlrl/episode.py:
`reset(seed)`, `step(text)` or `step_ids(ids)`) for up to `rollout.max_turns` turns, one sample per turn from the
ACTOR's copy of the policy (`sample`), recording the weights version that produced each turn. Subclasses override
`collect` for environments that are more than an Env (a robot behind a network bridge, people taking over).

Learner (a thread): whenever `episodes_per_update` episodes have finished, one `vlrl.trainer.update` on the
learner's model. Rows come from `make_rows` (default: every turn with its episode's advantage); the advantage is
the episode's return against the returns of the last `baseline_window` episodes (an env that cannot replay a start
state has no GRPO groups). The weights are then copied into the actor's model under a lock, between two samples
(`publish`, version + 1). The actor never waits for an update.

Stop: `stop()` (any thread) ends the current episode after its turn and the run after it; the learner finishes the
update in progress and trains on nothing more. An exception in either thread stops both and is re-raised by `run`.
When the actor ends normally, the learner trains on every episode still queued (a last, smaller batch).
"""

from __future__ import annotations

import collections
import copy
import json
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np
import torch

from vlrl.algos import group_advantages
from vlrl.config import AlgoConfig, ModelConfig, RolloutConfig, TrainerConfig, UsageError, opt
from vlrl.episode import Env, Episode, Observation, Turn
from vlrl.models import load_model, load_processor
from vlrl.rollout import Sample, make_engine
from vlrl.trainer import TrainRow, build_rows, make_optimizer, make_scheduler, update

log = logging.getLogger(__name__)


@dataclass
class ActorLearnerConfig:
    """The asynchronous loop and the vlrl configs it trains with."""

    episodes: int = opt(10, "episodes the actor collects")
    episodes_per_update: int = opt(1, "finished episodes per learner update")
    baseline_window: int = opt(16, "advantage: an episode's return against the returns of the last N episodes")
    seed: int = opt(0, "episode i is reset with seed + i; also seeds torch")
    greedy: bool = opt(False, "greedy actions (evaluation); RL samples")
    out_dir: str | None = opt(None, "save the final policy, episodes.jsonl, updates.jsonl and summary.json here")
    keep_images: bool = opt(False, "keep each episode's images and their encodings after the learner trained on it "
                                   "(memory grows per episode)")
    model: ModelConfig = field(default_factory=ModelConfig, metadata={"help": "the policy"})
    algo: AlgoConfig = field(default_factory=AlgoConfig, metadata={"help": "loss and reward weights"})
    rollout: RolloutConfig = field(default_factory=RolloutConfig, metadata={"help": "the actor's sampling"})
    trainer: TrainerConfig = field(default_factory=TrainerConfig, metadata={"help": "the learner's optimisation"})

    def __post_init__(self) -> None:
        for name in ("episodes", "episodes_per_update", "baseline_window"):
            if getattr(self, name) < 1:
                raise ValueError(f"invalid config value for '{name}': must be >= 1")


def baseline_advantages(returns: list[float], history: list[float], window: int, scale: str) -> list[float]:
    """Advantages of `returns` [B] against themselves and the `history` before them, over the last
    max(window, B) returns (normalised like one GRPO group, `scale` as in AlgoConfig)."""
    recent = (list(history) + list(returns))[-max(window, len(returns)):]
    adv = group_advantages(torch.tensor(recent, dtype=torch.float32), len(recent), scale=scale)
    return adv[-len(returns):].tolist()


class ActorLearner:
    """Asynchronous RL on `make_env()` (or a subclass's `collect`). `run()` returns `summary()`."""

    def __init__(self, cfg: ActorLearnerConfig, make_env: Callable[[], Env] | None = None,
                 device: str | None = None) -> None:
        if cfg.rollout.frozen_roles:
            raise UsageError("invalid config value for 'rollout.frozen_roles': the actor/learner loop plays every turn "
                             "with the actor's policy (no roles)")
        self.loop_cfg = cfg
        self.make_env, self.env = make_env, None
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if cfg.trainer.threads:
            torch.set_num_threads(cfg.trainer.threads)
        torch.manual_seed(cfg.seed)
        # Two processors: a fast tokenizer must not be used from two threads at once.
        self.processor = load_processor(cfg.model)  # actor
        self.learn_processor = load_processor(cfg.model)  # learner
        self.model = load_model(cfg.model, self.device)  # the learner's (trained) weights
        self.actor_model = copy.deepcopy(self.model).requires_grad_(False)  # what the actor samples with
        self.engine = make_engine(cfg.rollout, self.actor_model, self.processor)
        self.ref_model = load_model(cfg.model, self.device, trainable=False) if cfg.algo.beta > 0 else None
        total_updates = max(1, -(-cfg.episodes // cfg.episodes_per_update))
        self.optimizer = make_optimizer(self.model, cfg.trainer)
        self.scheduler = make_scheduler(self.optimizer, cfg.trainer, total_updates)

        self.version = 0  # weights version the actor uses (+1 per published update)
        self._weights = threading.Lock()  # held by the actor while sampling and by the learner while publishing
        self._cv = threading.Condition()
        self._pending: list[Episode] = []  # finished, not yet trained on
        self._actor_done = False
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self._returns: list[float] = []
        self.current: Episode | None = None  # the episode being collected (read by monitors / tests)
        self.episodes: list[Episode] = []
        self.updates: list[dict] = []
        self.actor_finished = False  # set by a collector that cannot go on (the run ends after this episode)

    # ---- the run ------------------------------------------------------------------------------
    def run(self) -> dict:
        """Collect `episodes` episodes with the learner alongside; returns `summary()`."""
        self.on_start()
        learner = threading.Thread(target=self._guard(self._learner_loop), name="vlrl-learner", daemon=True)
        learner.start()
        try:
            self._guard(self._actor_loop)()
        finally:
            with self._cv:
                self._actor_done = True
                self._cv.notify_all()
            learner.join()
            self.on_finish()
        if self._errors:
            raise self._errors[0]
        if self.loop_cfg.out_dir:
            self.save(self.loop_cfg.out_dir)
        return self.summary()

    def on_start(self) -> None:
        """Before the first episode (connect to the environment): builds the default actor's env."""
        if self.make_env is not None:
            self.env = self.make_env()

    def on_finish(self) -> None:
        """After the last update, also after an error (disconnect, release)."""

    def stop(self) -> None:
        """Ask the run to end after the current turn (thread-safe)."""
        self._stop.set()
        with self._cv:
            self._cv.notify_all()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _guard(self, fn):
        def run() -> None:
            try:
                fn()
            except BaseException as e:  # noqa: BLE001  (re-raised by run())
                log.exception("%s failed", threading.current_thread().name)
                self._errors.append(e)
                self.stop()

        return run

    # ---- actor --------------------------------------------------------------------------------
    def _actor_loop(self) -> None:
        for i in range(self.loop_cfg.episodes):
            if self._stop.is_set():
                break
            ep = self.collect(i)
            self.episodes.append(ep)
            if ep.turns:
                with self._cv:
                    self._pending.append(ep)
                    self._cv.notify_all()
            if self.actor_finished:
                break

    def sample(self, obs: Observation) -> tuple[Sample, int]:
        """One response to `obs` from the actor's weights, and the version of those weights."""
        with self._weights:
            return self.engine.generate([obs], n=1, greedy=self.loop_cfg.greedy)[0][0], self.version

    def collect(self, index: int) -> Episode:
        """Episode `index` on the Env: reset with seed + index, then sample / step until done or rollout.max_turns."""
        if self.env is None:
            raise RuntimeError("no env: pass make_env, or override collect()")
        cfg = self.loop_cfg
        ep = Episode(group_id=index, seed=cfg.seed + index, info={"index": index})
        self.current = ep
        obs, end = self.env.reset(ep.seed), "step_limit"
        for t in range(cfg.rollout.max_turns):
            if self._stop.is_set():
                end = "stopped"
                break
            sample, version = self.sample(obs)
            t_sent = time.time()
            step_ids = getattr(self.env, "step_ids", None)  # action-token envs take ids: text is not exact
            result = step_ids(sample.response_ids) if step_ids else self.env.step(sample.text)
            last = t == cfg.rollout.max_turns - 1
            ep.turns.append(Turn(
                observation=obs, response_ids=sample.response_ids, logprobs=sample.logprobs, response_text=sample.text,
                rewards=dict(result.rewards), done=result.done, truncated=result.truncated or (last and not result.done),
                info={**result.info, "finished": sample.finished, "policy_version": version, "t": t_sent}))
            if result.done or result.truncated:
                end = "done" if result.done else "truncated"
                break
            obs = result.observation
        if ep.turns and not ep.turns[-1].done:
            ep.turns[-1].truncated = True
        ep.info.update(end=end, env_return=ep.total_reward(cfg.algo.reward_weights))
        return ep

    # ---- learner ------------------------------------------------------------------------------
    def _learner_loop(self) -> None:
        k = self.loop_cfg.episodes_per_update
        while True:
            with self._cv:
                self._cv.wait_for(lambda: len(self._pending) >= k or self._actor_done or self._stop.is_set())
                if self._stop.is_set() and not self._actor_done:
                    return
                if not self._pending:
                    return  # the actor is done and everything was trained on
                n = k if len(self._pending) >= k else len(self._pending)  # the remainder after the last episode
                batch, self._pending = self._pending[:n], self._pending[n:]
            self.learn(batch)

    def make_rows(self, batch: list[Episode], advantages: list[float]) -> tuple[list[TrainRow], dict]:
        """Training rows of `batch` (each turn with its episode's advantage) and counts for the update record."""
        rows = build_rows(batch, torch.as_tensor(advantages, dtype=torch.float32))
        return rows, {"rows": len(rows)}

    def learn(self, batch: list[Episode]) -> dict:
        """One update on `batch` (finished episodes), then publish the weights to the actor."""
        cfg = self.loop_cfg
        t0 = time.time()
        returns = [ep.total_reward(cfg.algo.reward_weights) for ep in batch]
        adv = baseline_advantages(returns, self._returns, cfg.baseline_window, cfg.algo.scale)
        self._returns.extend(returns)
        rows, counts = self.make_rows(batch, adv)
        stats: dict = {}
        if rows:
            stats = update(self.model, self.learn_processor, self.optimizer, self.scheduler, rows, cfg,
                           ref_model=self.ref_model)
            self.publish()
        if not cfg.keep_images:
            # Every turn holds a camera frame and its encoding (the processor's float pixel values: ~0.3 MB at
            # 112 px); a session of hundreds of episodes would otherwise grow by GBs.
            for ep in batch:
                for turn in ep.turns:
                    turn.observation.release()
        record = {"update": len(self.updates) + 1, "version": self.version,
                  "episodes": [ep.info.get("index") for ep in batch], "returns": returns,
                  "advantages": [round(float(a), 6) for a in adv], **counts, "t_start": t0, "t_end": time.time(), **stats}
        self.updates.append(record)
        log.info("update %d: %s, loss %.4f -> weights v%d", record["update"], counts, stats.get("loss", float("nan")),
                 self.version)
        return record

    def publish(self) -> None:
        """Copy the learner's weights into the actor's model (between two samples) and bump the version."""
        with self._weights:
            self.actor_model.load_state_dict(self.model.state_dict())
            self.version += 1
            self.engine.sync_weights()

    # ---- results ------------------------------------------------------------------------------
    def summary(self) -> dict:
        eps = self.episodes
        returns = [ep.info.get("env_return", ep.total_reward(self.loop_cfg.algo.reward_weights)) for ep in eps]
        return {"episodes": len(eps), "updates": len(self.updates), "version": self.version,
                "successes": sum(bool(ep.info.get("success")) for ep in eps),
                "turns": sum(len(ep.turns) for ep in eps),
                "end_reasons": dict(collections.Counter(ep.info.get("end") for ep in eps)),
                "mean_return": float(np.mean(returns)) if eps else 0.0}

    def episode_record(self, ep: Episode) -> dict:
        """One line of episodes.jsonl."""
        turns = [{"response": t.response_text, "rewards": t.rewards, "version": t.info.get("policy_version")}
                 for t in ep.turns]
        return {**ep.info, "turns": turns}

    def save(self, out_dir: str) -> None:
        """The trained policy (save_pretrained + processor in out_dir/policy), episodes.jsonl, updates.jsonl and
        summary.json (with the config)."""
        os.makedirs(out_dir, exist_ok=True)
        policy = os.path.join(out_dir, "policy")
        self.model.save_pretrained(policy)
        self.learn_processor.save_pretrained(policy)
        with open(os.path.join(out_dir, "episodes.jsonl"), "w") as f:
            for ep in self.episodes:
                f.write(json.dumps(self.episode_record(ep), default=str) + "\n")
        with open(os.path.join(out_dir, "updates.jsonl"), "w") as f:
            for u in self.updates:
                f.write(json.dumps(u) + "\n")
        with open(os.path.join(out_dir, "summary.json"), "w") as f:
            json.dump({"summary": self.summary(), "config": asdict(self.config_to_save())}, f, indent=1, default=str)

    def config_to_save(self):
        """The dataclass config written to summary.json."""
        return self.loop_cfg
