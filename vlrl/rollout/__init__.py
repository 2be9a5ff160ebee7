"""Rollout engines behind one small interface, and the episode runner.

An engine has `generate(observations, n, greedy) -> list[list[Sample]]` (n samples per observation)
and `sync_weights()` (push the trainer's weights to the engine after an update; a no-op when the
engine uses the training model itself).
"""

from __future__ import annotations

import copy
import warnings
from typing import Callable

from vlrl.episode import Env, Episode, Turn
from vlrl.rollout.sample import Sample  # noqa: F401  (engines return it; re-exported)
from vlrl.skips import count_skip


def make_engine(cfg, model, processor):
    """`cfg`: RolloutConfig. The vLLM engine is imported lazily (vLLM lives in its own env)."""
    if cfg.engine == "hf":
        from vlrl.rollout.hf import HFEngine

        return HFEngine(model, processor, cfg)
    from vlrl.rollout.vllm_engine import VLLMEngine

    return VLLMEngine(model, processor, cfg)


class FrozenRoles:
    """An engine in which the turns of some roles are played by a second, frozen engine: self-play against a fixed
    opponent (e.g. the start keeps giving the clues while the policy learns to decide). `generate` keeps the order
    of its observations and makes at most one call per engine; `sync_weights` reaches the trained engine only."""

    def __init__(self, engine, frozen_engine, roles):
        self.engine, self.frozen_engine, self.roles = engine, frozen_engine, set(roles)

    def generate(self, observations: list, n: int = 1, greedy: bool = False) -> list[list]:
        frozen = [o.role in self.roles for o in observations]
        out: list = [None] * len(observations)
        for engine, want in ((self.engine, False), (self.frozen_engine, True)):
            idx = [i for i, f in enumerate(frozen) if f == want]
            if idx:
                for i, samples in zip(idx, engine.generate([observations[i] for i in idx], n=n, greedy=greedy)):
                    out[i] = samples
        return out

    def sync_weights(self) -> None:
        self.engine.sync_weights()


def run_episodes(
    engine,
    make_env: Callable[[], Env],
    seeds: list[int],
    group_size: int,
    max_turns: int = 1,
    greedy: bool = False,
    stats: dict | None = None,
) -> list[Episode]:
    """Roll out `group_size` episodes per seed; episodes of a group are consecutive.

    The first observation of a group is computed once and shared by its G episodes (one env is
    reset, the others are copies), so the engine encodes its images once. Later turns are decoded
    in one batched call over all live episodes (games of several players: every game's next prompt in
    one call). An observation after the first may ask for `num_samples` > 1 samples (a decision
    sampled G times): they join the same call and the env is stepped with each in order, one Turn each
    (together they count as one of the `max_turns`).

    A seed whose reset fails with OSError / ValueError (a corrupt or missing image, a bad record)
    is skipped with a warning and counted in `stats`: `skipped_samples` (total) and
    `skipped_reasons` ({reason: count}; the error's `reason` (vlrl.episode.SampleError), else its
    class name). The caller decides what is too many (training: vlrl/skips.py; evaluation reports it).
    """
    episodes: list[Episode] = []
    envs: list[Env] = []
    first_obs = []
    for seed in seeds:
        env = make_env()
        try:
            obs = env.reset(seed)
        except (OSError, ValueError) as e:
            reason = getattr(e, "reason", None) or type(e).__name__
            warnings.warn(f"skipping sample {seed} ({reason}): {type(e).__name__}: {e}", stacklevel=2)
            if stats is not None:
                count_skip(stats, reason)
            continue
        gid = len(first_obs)
        first_obs.append(obs)
        group_envs = [env] + [copy.deepcopy(env) for _ in range(group_size - 1)]
        for env_i in group_envs:
            envs.append(env_i)
            episodes.append(Episode(group_id=gid, seed=seed))

    if not first_obs:
        return []
    samples = [[s] for group in engine.generate(first_obs, n=group_size, greedy=greedy) for s in group]
    current = [first_obs[i // group_size] for i in range(len(episodes))]
    live = list(range(len(episodes)))
    for turn_idx in range(max_turns):
        next_live = []
        for k, ep_idx in enumerate(live):
            env, obs = envs[ep_idx], current[ep_idx]
            for j, sample in enumerate(samples[k]):  # one sample, or obs.num_samples of them (stepped in order)
                # Envs whose actions are tokens (VLA) take the sampled ids: text would have to be re-tokenised.
                result = env.step_ids(sample.response_ids) if hasattr(env, "step_ids") else env.step(sample.text)
                last = j == len(samples[k]) - 1 or result.done
                truncated = result.truncated or (last and not result.done and turn_idx == max_turns - 1)
                turn = Turn(
                    observation=obs,
                    response_ids=sample.response_ids,
                    logprobs=sample.logprobs,
                    response_text=sample.text,
                    rewards=dict(result.rewards),
                    done=result.done,
                    truncated=truncated,
                    info={**result.info, "finished": sample.finished},
                )
                episodes[ep_idx].turns.append(turn)
                if last:
                    break
            if truncated and result.observation is not None:
                episodes[ep_idx].info["bootstrap_observation"] = result.observation  # PPO bootstraps V from it
            if not (result.done or truncated):
                current[ep_idx] = result.observation
                next_live.append(ep_idx)
        live = next_live
        if not live:
            break
        samples = next_samples(engine, [current[i] for i in live], greedy)
    return episodes


def next_samples(engine, observations: list, greedy: bool) -> list[list]:
    """Samples for the live episodes' next turn, all in ONE generate call: `obs.num_samples` of each
    observation (1 unless the env asks for more). Returns [len(observations)][num_samples] samples."""
    counts = [max(1, int(o.num_samples)) for o in observations]
    flat = [g[0] for g in engine.generate([o for o, c in zip(observations, counts) for _ in range(c)], n=1, greedy=greedy)]
    out, i = [], 0
    for c in counts:
        out.append(flat[i : i + c])
        i += c
    return out
