"""Robot-in-the-loop RL of a VLA policy through the authenticated robot bridge: one user of the core's
asynchronous actor/learner loop (`vlrl.actor_learner.ActorLearner`), which owns the threads, the weight hand-over,
the advantages, the updates and stop handling. This module adds the bridge connection, the bridge episodes (with
human takeover) and the demonstration rows.

    python -m robots.bridge --task Lift --image-size 64 --reward-shaping            # next to the robot / simulator
    python -m tasks.robot_manipulation.session --uri ws://127.0.0.1:8765 --episodes 20 --out runs/robot_session

Actor (`collect`, in the thread that calls `run`): bridge observation (camera image + instruction) -> the task's
VLA prompt, constrained to 7 action tokens + EOS (`vla_observation`) -> one sample from the ACTOR's copy of the
policy (the newest weights the learner has published) -> action -> the bridge, whose server clamps it (safety
layer). Each executed step becomes a vlrl `Turn` with `info["source"] = "policy"`, the sampling log-probs and the
weights version that produced it.

Human takeover: an operator (operator client with `RemoteTeleop`, a gamepad, a `ScriptedTeleop` in tests) takes
over at the server; the policy's commands are refused ("takeover") and the server streams every human step as a
`human_step` notice (the observation it acted on and the action applied after the safety clamps). Each becomes a
`Turn` with `info["source"] = "human"`, whose response is that action's tokens + EOS and whose `logprobs` are
empty (no policy sampled it). `interventions="demo"` trains on them as demonstrations, `"exclude"` drops them.

Learner (the core's thread): whenever `episodes_per_update` episodes have finished, one `vlrl.trainer.update` on
the learner's model. Rows (`make_rows`): policy turns are PPO/GRPO rows carrying their episode's advantage (episode
return against the returns of the last `baseline_window` episodes: the robot cannot replay a start state, so there
are no groups); human turns (demo) are rows with advantage `demo_advantage` whose old log-probs are the current
policy's, so the first PPO epoch's gradient is exactly `demo_advantage` x the tokens' negative log-likelihood
(behaviour cloning, later epochs clipped like any row). The weights are then copied into the actor's model under a
lock (version + 1). The robot never waits for an update; it acts from whatever version is current.

Episodes end on success, the env's timeout, `max_steps` turns (checked before each policy action, so a human
takeover in progress is never cut), a refusal the session cannot act through (e-stop), or a dropped connection:
the turns recorded so far are kept and trained on, and the session reconnects (`reconnect_attempts`).
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import time

import numpy as np
import torch
from websockets.exceptions import WebSocketException

from robots.bridge.auth import load_token
from robots.bridge.client import AuthError, BridgeClient, BridgeError
from vlrl.actor_learner import ActorLearner
from vlrl.config import ModelConfig, RolloutConfig, TrainerConfig, resolve_path
from vlrl.episode import Episode, Observation, Turn
from vlrl.forward import Row, response_logprobs
from vlrl.models import base_model
from vlrl.trainer import TrainRow, build_rows, micro_batches

from .action_tokenizer import STATS_FILE, ActionStats, ActionTokenizer
from .config import Config as TaskConfig
from .env import action_constraint, vla_observation
from .session_config import INTERVENTIONS, SessionConfig

log = logging.getLogger(__name__)
_CONNECTION_ERRORS = (BridgeError, OSError, WebSocketException)


def training_rows(episodes: list[Episode], advantages, interventions: str,
                  demo_advantage: float = 1.0) -> tuple[list[TrainRow], list[TrainRow]]:
    """(policy rows, demo rows). Policy turns carry their episode's advantage (`build_rows`); human turns
    become demo rows (advantage `demo_advantage`, old log-probs left empty for the learner to fill) when
    `interventions == "demo"` and are dropped when it is "exclude"."""
    if interventions not in INTERVENTIONS:
        raise ValueError(f"interventions must be one of {INTERVENTIONS}, got {interventions!r}")
    policy_only = [Episode(turns=[t for t in ep.turns if t.info.get("source") != "human"]) for ep in episodes]
    rows = build_rows(policy_only, torch.as_tensor(list(advantages), dtype=torch.float32))
    demo = []
    if interventions == "demo":
        demo = [TrainRow(Row(t.observation, list(t.response_ids)), [], float(demo_advantage))
                for ep in episodes for t in ep.turns if t.info.get("source") == "human" and t.response_ids]
    return rows, demo


def _eos_ids(model, tokenizer) -> list[int]:
    eos = base_model(model).generation_config.eos_token_id
    eos = tokenizer.eos_token_id if eos is None else eos
    return sorted(set(eos if isinstance(eos, (list, tuple)) else [eos]))


def _action_stats(cfg: SessionConfig) -> ActionStats:
    """The task's stats file, else the one saved beside the policy checkpoint, else identity ([-1, 1])."""
    if cfg.task.stats_path:
        return ActionStats.load(resolve_path(cfg.task.stats_path))
    beside = os.path.join(resolve_path(cfg.model.path), STATS_FILE)
    return ActionStats.load(beside) if os.path.exists(beside) else ActionStats.identity(7)


class RobotSession(ActorLearner):
    """Asynchronous RL of a VLA policy on a robot (or simulator) behind the bridge. `run()` returns a summary.

    The actor/learner machinery (threads, weight hand-over, advantages, updates, stop) is `vlrl.actor_learner`;
    this class supplies the bridge episodes (`collect`), the demonstration rows (`make_rows`) and the connection."""

    def __init__(self, cfg: SessionConfig, token: str | None = None, device: str | None = None) -> None:
        self.cfg = cfg
        self.token = token if token is not None else load_token(cfg.token_file)
        super().__init__(cfg.actor_learner(), device=device)
        t = cfg.task
        self.tok = ActionTokenizer(len(self.processor.tokenizer), _action_stats(cfg), n_bins=t.n_bins,
                                   offset=t.token_offset, gripper_dim=6, gripper_close_positive=t.gripper_close_positive)
        self.eos_ids = _eos_ids(self.model, self.processor.tokenizer)
        tok_eos = self.processor.tokenizer.eos_token_id
        self.eos_id = tok_eos if tok_eos in self.eos_ids else self.eos_ids[0]  # ends human responses
        self.client: BridgeClient | None = None
        self.dropped_human_steps = 0  # human steps that arrived after their episode had ended
        self.connection_lost = False

    # ---- connection -----------------------------------------------------------------------------
    def connect(self) -> None:
        """Connect as the policy client; retries refused-busy and network errors, never bad credentials."""
        cfg = self.cfg
        for attempt in range(cfg.reconnect_attempts + 1):
            try:
                self.client = BridgeClient(cfg.uri, self.token, role="policy", cafile=cfg.cafile,
                                           timeout_s=cfg.request_timeout_s)
                return
            except AuthError as e:
                if e.code != "busy" or attempt == cfg.reconnect_attempts:
                    raise
            except _CONNECTION_ERRORS:
                if attempt == cfg.reconnect_attempts:
                    raise
            time.sleep(cfg.reconnect_wait_s)

    def _disconnect(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001  (already gone)
                pass

    def on_start(self) -> None:
        self.connect()

    def on_finish(self) -> None:
        self._disconnect()

    # ---- actor --------------------------------------------------------------------------------
    def collect(self, index: int) -> Episode:
        """Episode `index` through the bridge: policy turns, the human turns of a takeover, its end reason."""
        ep = Episode(group_id=index, seed=self.cfg.seed + index, info={"index": index})
        self.current = ep
        try:
            end = self._episode_loop(ep, self._start(ep.seed))
        except _CONNECTION_ERRORS as e:
            log.warning("episode %d: connection lost (%s); keeping its %d turns", index, e, len(ep.turns))
            end = "disconnect"
            ep.info["error"] = str(e)[:500]
            self._disconnect()
            try:
                self.connect()
            except _CONNECTION_ERRORS as e2:  # AuthError too (a BridgeError): stop, keep what we have
                log.error("could not reconnect: %s", e2)
                self.connection_lost = self.actor_finished = True
        if ep.turns:
            last = ep.turns[-1]
            last.done = end == "success"
            last.truncated = end != "success"
        sources = collections.Counter(t.info.get("source") for t in ep.turns)
        ep.info.update(end=end, success=end == "success", policy_turns=sources["policy"], human_turns=sources["human"],
                       env_return=ep.total_reward(self.cfg.algo.reward_weights))
        log.info("episode %d: %s after %d turns (%d human), return %.3f, weights v%d", index, end, len(ep.turns),
                 sources["human"], ep.info["env_return"], self.version)
        return ep

    def _start(self, seed: int) -> dict:
        """Reset (or, when resets are people's job, observe) and drop notices of the previous episode."""
        deadline = time.monotonic() + self.cfg.wait_human_s
        while True:
            if not self.cfg.reset:
                reply = self._observe()
                break
            reply = self.client.reset(seed=seed)
            if reply.get("type") == "obs":
                break
            if reply.get("code") == "reset_not_allowed":
                reply = self._observe()
                break
            if reply.get("reason") == "estopped" and time.monotonic() < deadline:
                time.sleep(self.cfg.poll_s * 4)  # an operator must clear the e-stop first
                continue
            raise RuntimeError(f"the bridge refused the reset: {reply.get('reason') or reply.get('code')}")
        self.dropped_human_steps += sum(n.get("type") == "human_step" for n in self.client.pop_notices())
        return reply

    def _observe(self) -> dict:
        reply = self.client.observe()
        if reply.get("type") != "obs":
            raise BridgeError(f"observe failed: {reply.get('code') or reply.get('reason')}")
        return reply

    def _episode_loop(self, ep: Episode, msg: dict) -> str:
        cfg = self.cfg
        while True:
            if len(ep.turns) >= cfg.max_steps:
                return "step_limit"
            if self._stop.is_set():
                return "stopped"
            obs = self._observation(msg, len(ep.turns))
            sample, version = self.sample(obs)
            action = self._decode(sample.response_ids)
            t_sent = time.time()
            reply = self.client.act(action)
            end = self._absorb(ep)  # human steps applied before this reply come first
            kind = reply.get("type")
            if kind == "obs":
                result = reply.get("result") or {}
                applied = reply.get("applied")
                ep.turns.append(Turn(
                    observation=obs, response_ids=sample.response_ids, logprobs=sample.logprobs,
                    response_text=sample.text, rewards=self._rewards(result),
                    info={"source": "policy", "policy_version": version, "t": t_sent, "finished": sample.finished,
                          "requested": [float(v) for v in action],
                          "action": None if applied is None else [float(v) for v in applied],
                          "safety": list(reply.get("safety") or [])}))
                end = end or ("success" if result.get("success") else "timeout" if result.get("truncated") else None)
                if end:
                    return end
                msg = reply
                continue
            if end:
                return end
            reason = reply.get("reason") or reply.get("code")
            if kind == "refused" and reason in ("stale", "superseded"):
                msg = self._observe()  # nothing was applied: act again on a fresh observation
            elif kind == "refused" and reason in ("takeover", "paused"):
                msg, end = self._wait_for_operator(ep)
                if end:
                    return end
            else:
                return f"refused_{reason}"  # e-stop, needs_reset, bad_action: this episode cannot go on

    def _wait_for_operator(self, ep: Episode) -> tuple[dict | None, str | None]:
        """While a human drives (or the robot is paused): record the human's steps until control comes back."""
        deadline = time.monotonic() + self.cfg.wait_human_s
        while True:
            if self._stop.is_set():
                return None, "stopped"
            time.sleep(self.cfg.poll_s)
            status = self.client.status()
            end = self._absorb(ep)
            if end:
                return None, end
            if status.get("estopped") or status.get("needs_reset"):
                return None, "estop"
            if not status.get("takeover") and not status.get("paused"):
                msg = self._observe()  # the scene after the human's steps
                return msg, self._absorb(ep)
            if time.monotonic() > deadline:
                return None, "operator_timeout"

    def _absorb(self, ep: Episode) -> str | None:
        """Turn the human_step notices received so far into human turns; the episode's end if one ended it."""
        end = None
        for note in self.client.pop_notices():
            if note.get("type") != "human_step":
                continue  # halted / estopped notices: the status and refusals say the same
            if end:
                self.dropped_human_steps += 1
                continue
            applied = np.asarray(note["action"], dtype=np.float64)
            ids = self.tok.encode(applied) + [self.eos_id]
            result = note.get("result") or {}
            ep.turns.append(Turn(
                observation=self._observation(note, len(ep.turns)), response_ids=ids, logprobs=[],
                response_text=self.processor.tokenizer.decode(ids, skip_special_tokens=True),
                rewards=self._rewards(result),
                info={"source": "human", "policy_version": self.version, "t": time.time(),
                      "action": applied.tolist(),
                      "requested": np.asarray(note.get("requested", applied), dtype=np.float64).tolist(),
                      "safety": list(note.get("safety") or [])}))
            end = "success" if result.get("success") else "timeout" if result.get("truncated") else None
        return end

    def _observation(self, msg: dict, step: int) -> Observation:
        images = msg.get("images") or {}
        cam = self.cfg.task.camera
        if cam not in images:
            raise RuntimeError(f"camera {cam!r} is not in the bridge's observations (has {sorted(images)}); "
                               "set task.camera, and send_images on the server")
        instruction = self.cfg.task.instruction or msg.get("instruction") or ""
        info = {"instruction": instruction, "step": step, "proprio": np.asarray(msg.get("proprio", [])).tolist()}
        return vla_observation(images[cam], instruction, info, action_constraint(self.tok, self.eos_ids))

    def _decode(self, ids: list[int]) -> np.ndarray:
        try:
            return self.tok.decode(ids[: self.tok.dim])
        except ValueError:  # cannot happen with constrained decoding; hold still if it does
            return np.zeros(self.tok.dim)

    @staticmethod
    def _rewards(result: dict) -> dict:
        return {"env": float(result.get("reward", 0.0)), "_success": 1.0 if result.get("success") else 0.0}

    # ---- learner ------------------------------------------------------------------------------
    def make_rows(self, batch: list[Episode], advantages: list[float]) -> tuple[list[TrainRow], dict]:
        """Policy rows with their episode's advantage, plus the human turns as demonstration rows."""
        rows, demo = training_rows(batch, advantages, self.cfg.interventions, self.cfg.demo_advantage)
        self._fill_old_logprobs(demo)
        return rows + demo, {"policy_rows": len(rows), "demo_rows": len(demo)}

    def _fill_old_logprobs(self, demo: list[TrainRow]) -> None:
        """Old log-probs of demo rows = the current policy's, so the first epoch's ratio is 1 (a BC gradient)."""
        with torch.no_grad():
            for mb in micro_batches(demo, self.cfg.trainer.micro_batch_size):
                logp, _ = response_logprobs(self.model, self.learn_processor, [r.row for r in mb], self.cfg.rollout.temperature)
                for i, r in enumerate(mb):
                    n = len(r.row.response_ids)
                    r.old_logprobs = logp[i, logp.shape[1] - n:].tolist()

    # ---- results ------------------------------------------------------------------------------
    def summary(self) -> dict:
        eps = self.episodes
        return {**super().summary(), "policy_turns": sum(ep.info.get("policy_turns", 0) for ep in eps),
                "human_turns": sum(ep.info.get("human_turns", 0) for ep in eps),
                "dropped_human_steps": self.dropped_human_steps, "connection_lost": self.connection_lost}

    def episode_record(self, ep: Episode) -> dict:
        turns = [{"source": t.info.get("source"), "action": t.info.get("action"), "rewards": t.rewards,
                  "version": t.info.get("policy_version")} for t in ep.turns]
        return {**ep.info, "turns": turns}

    def config_to_save(self) -> SessionConfig:
        return self.cfg

    def save(self, out_dir: str) -> None:
        """The trained policy (save_pretrained + processor + action stats) and per-episode / per-update JSONL."""
        super().save(out_dir)
        self.tok.stats.save(os.path.join(out_dir, "policy"))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="robot-in-the-loop RL of a VLA policy through the robot bridge")
    p.add_argument("--uri", default="ws://127.0.0.1:8765")
    p.add_argument("--token-file", default=None, help="default: $VLRL_BRIDGE_TOKEN")
    p.add_argument("--cafile", default=None)
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--max-steps", type=int, default=100)
    p.add_argument("--episodes-per-update", type=int, default=1)
    p.add_argument("--interventions", choices=INTERVENTIONS, default="demo")
    p.add_argument("--demo-advantage", type=float, default=1.0)
    p.add_argument("--model", default="assets/tiny-qwen2.5-vl", help="policy checkpoint (hub id or directory)")
    p.add_argument("--stats", default=None, help="action_stats.json (default: beside the checkpoint, else identity)")
    p.add_argument("--camera", default="agentview")
    p.add_argument("--instruction", default=None)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-reset", action="store_true", help="people reset the scene (real robots)")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = SessionConfig(
        uri=a.uri, token_file=a.token_file, cafile=a.cafile, episodes=a.episodes, max_steps=a.max_steps,
        episodes_per_update=a.episodes_per_update, interventions=a.interventions, demo_advantage=a.demo_advantage,
        seed=a.seed, reset=not a.no_reset, out_dir=a.out,
        task=TaskConfig(camera=a.camera, instruction=a.instruction, stats_path=a.stats, expert_labels=False),
        model=ModelConfig(path=a.model), rollout=RolloutConfig(max_new_tokens=8, temperature=a.temperature),
        trainer=TrainerConfig(lr=a.lr, seed=a.seed))
    print(json.dumps(RobotSession(cfg).run(), indent=1))


if __name__ == "__main__":
    main()
