"""Measured robot-in-the-loop session: the BC policy learns through the authenticated bridge against the simulator,
with or without a scripted operator that takes over when the arm stalls (its steps kept as demonstrations).

    python -m tasks.robot_manipulation.hitl_experiment --arm takeover --episodes 200 --out runs/hitl_takeover \
        --summary tasks/robot_manipulation/results/hitl_takeover_seed0.json

One process: a `BridgeServer` on loopback (a fresh random token) drives robosuite Lift; `RobotSession` connects as
the policy client and runs asynchronous RL (`tasks.robot_manipulation.session`); with `--arm takeover` a
`robots.bridge.sim_operator.StallOperator` connects as the operator client. The start and the session's final policy
are evaluated greedily on the same held-out init states (the eval split, as `experiment.py` does), so the paired gain
per state measures what the session changed. The session's own episodes (sampled, temperature `--temperature`) are
the learning curve: success per window of episodes, with and without the operator's help counted.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import resource
import secrets
import threading
import time
from pathlib import Path

from robots.bridge.adapters import SimAdapter
from robots.bridge.runner import ServerThread
from robots.bridge.server import BridgeConfig, BridgeServer
from robots.bridge.sim_operator import StallOperator
from robots.env import make_env
from vlrl.config import AlgoConfig, ModelConfig, RolloutConfig, TrainerConfig, resolve_path
from vlrl.stats import binomial_stderr, paired_gain

from .config import Config as TaskConfig
from .env import robosuite_config
from .experiment import _eval, _eval_once
from .session import RobotSession, SessionConfig

log = logging.getLogger(__name__)

ARMS = ("takeover", "none")


def eval_overrides(task: TaskConfig, model: str) -> list[str]:
    """Hydra overrides of the greedy held-out evaluation (the same task settings the session acts with)."""
    return ["task=robot_manipulation", f"model.path={model}", f"task.env={task.env}", f"task.camera={task.camera}",
            f"task.image_size={task.image_size}", f"task.max_steps={task.max_steps}", "task.expert_labels=false",
            f"task.stats_path={task.stats_path}", "rollout.max_new_tokens=8", f"rollout.max_turns={task.max_steps}",
            "trainer.threads=1", "eval.batch_size=10"]


def curve(episodes: list[dict], window: int) -> list[dict]:
    """Per window of consecutive session episodes: success (any), success with no takeover, takeover rate."""
    out = []
    for i in range(0, len(episodes), window):
        w = episodes[i:i + window]
        helped = [e.get("human_turns", 0) > 0 for e in w]
        out.append({"episodes": [i, i + len(w) - 1], "success": sum(bool(e.get("success")) for e in w) / len(w),
                    "success_unassisted": sum(bool(e.get("success")) and not h for e, h in zip(w, helped)) / len(w),
                    "takeover_rate": sum(helped) / len(w),
                    "mean_turns": sum(e.get("policy_turns", 0) + e.get("human_turns", 0) for e in w) / len(w)})
    return out


def run_session(cfg: SessionConfig, arm: str, minutes: float) -> tuple[dict, list[dict], StallOperator]:
    """Serve the simulator behind the bridge (with the operator for `arm == "takeover"`), run the session;
    returns (session summary, one record per episode, the watcher with its stall and takeover logs)."""
    token = secrets.token_hex(32)
    sim = SimAdapter(functools.partial(make_env, robosuite_config(cfg.task)), seed=cfg.seed)
    # Both arms are watched for stalls (the same rule); only the takeover arm's operator acts on them.
    watcher = StallOperator(sim, cfg.task.env, max_takeovers=1 if arm == "takeover" else 0)
    operator = watcher if arm == "takeover" else None
    # A loaded 2-core CPU renders a step in ~0.1 s and the policy samples between steps while the learner trains
    # in another thread: the real-robot defaults (0.2 s client silence, 1 s execution) would halt it spuriously.
    # keep_episodes=0: the session keeps its own episodes; the server's copies (every camera) would only cost memory
    bridge = BridgeConfig(port=0, watchdog_s=10.0, command_deadline_s=10.0, keep_episodes=0)
    server = ServerThread(BridgeServer(watcher, bridge, token=token, teleop=operator))
    server.start()
    cfg.uri = server.uri()
    stop_op = threading.Event()
    op_thread = None
    if operator is not None:
        op_thread = threading.Thread(target=operator.serve_forever, args=(cfg.uri, token, stop_op), daemon=True)
        op_thread.start()
    session = RobotSession(cfg, token=token)
    timer = threading.Timer(minutes * 60, session.stop)
    timer.start()
    try:
        summary = session.run()
        # an operator that died mid-run leaves takeovers asked for and never carried out: say so in the summary
        summary["operator_alive_at_end"] = None if op_thread is None else op_thread.is_alive()
        summary["operator_reconnects"] = watcher.reconnects
    finally:
        timer.cancel()
        stop_op.set()
        if op_thread is not None:
            op_thread.join(30)
        server.stop()
    return summary, [session.episode_record(ep) for ep in session.episodes], watcher


def saved_session(out: Path) -> dict | None:
    """A finished session of this run, read back so that a rerun of the command does not run it again; None if none
    finished. `out/session_result.json` (written right after the session) holds everything; a session that only
    saved its own files (`out/session/summary.json`, `episodes.jsonl`) lacks the watcher's logs, the operator's
    liveness and the wall time: those come back as None, never guessed."""
    path = out / "session_result.json"
    if path.exists():
        return {**json.loads(path.read_text()), "from": str(path)}
    files = out / "session"
    if not all((files / name).exists() for name in ("summary.json", "episodes.jsonl", "policy")):
        return None
    summary = json.loads((files / "summary.json").read_text())["summary"]
    summary.setdefault("operator_alive_at_end", None)
    summary.setdefault("operator_reconnects", None)
    with open(files / "episodes.jsonl") as f:
        episodes = [json.loads(line) for line in f if line.strip()]
    return {"summary": summary, "episodes": episodes, "takeovers": None, "first_stalls": None, "wall_s": None,
            "from": str(files)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="robot-in-the-loop session through the bridge, with or without takeovers")
    p.add_argument("--arm", choices=ARMS, required=True, help="takeover: a scripted operator takes over stalls")
    p.add_argument("--out", required=True)
    p.add_argument("--summary", default=None, help="also write the summary JSON here (a committed results file)")
    p.add_argument("--model", default="assets/tiny-vla-lift")
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--minutes", type=float, default=90.0, help="stop the session after this long")
    p.add_argument("--eval", type=int, default=50, help="held-out init states (eval split seeds 0..N-1)")
    p.add_argument("--first-state", type=int, default=2000,
                   help="episode i resets with robosuite seed first_state + i (past the BC demos' 0-199 and "
                        "the RL curriculum's 1000-1099; the eval split starts at 1,000,000)")
    p.add_argument("--seed", type=int, default=0, help="torch seed")
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--temperature", type=float, default=0.25)
    p.add_argument("--episodes-per-update", type=int, default=2)
    p.add_argument("--window", type=int, default=25, help="episodes per point of the learning curve")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # one line per episode
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    task = TaskConfig(env="Lift", camera="robot0_eye_in_hand", image_size=112, max_steps=100, expert_labels=False,
                      stats_path=f"{a.model}/action_stats.json")
    cfg = SessionConfig(
        episodes=a.episodes, max_steps=task.max_steps, episodes_per_update=a.episodes_per_update,
        interventions="demo", seed=a.first_state, out_dir=str(out / "session"), task=task,
        model=ModelConfig(path=a.model), algo=AlgoConfig(name="bridge_traj", loss_type="grpo", eps_high=0.28, importance_level="action"),
        rollout=RolloutConfig(max_new_tokens=8, temperature=a.temperature),
        trainer=TrainerConfig(lr=a.lr, seed=a.seed, threads=1, micro_batch_size=100))
    t0 = time.perf_counter()
    # Each stage is kept on disk, so a stopped run resumes: the 'before' evaluation, then the session.
    before, s0, t_eval0 = _eval_once(out / "before.json", eval_overrides(task, a.model), a.eval)
    session = saved_session(out)
    if session is None:
        t1 = time.perf_counter()
        summary, episodes, watcher = run_session(cfg, a.arm, a.minutes)
        session = {"summary": summary, "episodes": episodes, "takeovers": watcher.log, "first_stalls": watcher.stalls,
                   "wall_s": round(time.perf_counter() - t1, 1)}
        (out / "session_result.json").write_text(json.dumps(session, default=str))
    else:
        log.info("session already finished: read back from %s", session["from"])
    episodes = session["episodes"]
    after, s1 = _eval(eval_overrides(task, str(out / "session" / "policy")), a.eval)
    mean_d, se_d = paired_gain(s0, s1)
    p0, p1 = sum(s0) / len(s0), sum(s1) / len(s1)
    result = {
        "method": f"bridge_session_{a.arm}", "seed": a.seed, "arm": a.arm, "held_out_init_states": a.eval,
        "before": {"success_rate": p0, "stderr": binomial_stderr(p0, a.eval), "mean_turns": before.get("mean_turns")},
        "after": {"success_rate": p1, "stderr": binomial_stderr(p1, a.eval), "mean_turns": after.get("mean_turns")},
        "gain_points": 100 * mean_d, "gain_stderr_points": 100 * se_d,
        "session": session["summary"], "curve": curve(episodes, a.window),
        "takeovers": session["takeovers"], "first_stalls": session["first_stalls"],
        "session_read_back_from": session.get("from"),  # set when a rerun found the session already finished
        "episodes_run": len(episodes), "session_wall_s": session["wall_s"], "eval_before_wall_s": round(t_eval0, 1),
        "total_wall_s": round(time.perf_counter() - t0, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),  # Linux: KiB
        "args": vars(a), "successes_before": s0, "successes_after": s1,
        "episode_outcomes": [{"success": bool(e.get("success")), "end": e.get("end"),
                              "policy_turns": e.get("policy_turns"), "human_turns": e.get("human_turns")}
                             for e in episodes],
    }
    text = json.dumps(result, indent=1)
    (out / "summary.json").write_text(text)
    if a.summary:
        Path(resolve_path(a.summary)).write_text(text)
    print(json.dumps({k: result[k] for k in ("method", "before", "after", "gain_points", "gain_stderr_points",
                                             "episodes_run", "session_wall_s", "curve")}, indent=1), flush=True)


if __name__ == "__main__":
    main()
