"""Group-level training rewards, added after each rollout (the task's `post_rollout` hook):

* length control: rewards["length"] = rewards.video.length_bonus over each group (cfg.length_control);
* GRPO-TA (cfg.reward == "ta"): each group's clip is perturbed (tasks.video_authenticity.perturb),
  `cfg.ta_samples` extra answers are sampled on the copy (labelled fake; they are scored here and then
  dropped: never trained on), and rewards["temporal"] = rewards.video.temporal_bonus for the originals.

Also returns decode metrics for the step: seconds spent decoding the step's clips (first decodes only:
cache hits cost nothing) and clips decoded.
"""

from __future__ import annotations

import numpy as np

from rewards.video import length_bonus, score, temporal_bonus
from tasks.video_authenticity.config import Config
from tasks.video_authenticity.perturb import perturb
from vlrl.episode import Observation


def groups_of(episodes) -> list[list]:
    """Consecutive episodes with the same group_id (the runner's layout)."""
    out: list[list] = []
    for ep in episodes:
        if out and out[-1][0].group_id == ep.group_id and out[-1][0].seed == ep.seed:
            out[-1].append(ep)
        else:
            out.append([ep])
    return out


def correct_flags(group) -> list[float]:
    return [float(ep.turns[0].info.get("correct", 0.0)) if ep.turns else 0.0 for ep in group]


def add_length_rewards(episodes, cfg: Config) -> None:
    """rewards["length"] per episode, in place (0 when the rule does not apply)."""
    for group in groups_of(episodes):
        lengths = [len(ep.turns[0].response_ids) if ep.turns else 0 for ep in group]
        bonus = length_bonus(correct_flags(group), lengths, cfg.length_lo, cfg.length_hi, cfg.length_bonus)
        for ep, b in zip(group, bonus):
            if ep.turns:
                ep.turns[0].rewards["length"] = b


def perturbed_observation(obs: Observation, seed: int) -> tuple[Observation, dict]:
    """The observation with its clip perturbed (GRPO-TA), drawn from `seed`; the perturbation's info."""
    frames = np.stack([np.asarray(f) for f in obs.videos[0]])
    out, info = perturb(frames, np.random.default_rng([seed, 29]))
    pert = Observation(messages=obs.messages, videos=[list(out)], video_fps=list(obs.video_fps),
                       video_names=[f"{obs.video_names[0]} (perturbed: {info['kind']})"] if obs.video_names else [],
                       info={**obs.info, "label": "fake", "perturbed": info})
    return pert, info


def add_temporal_rewards(episodes, generate, cfg: Config) -> dict:
    """GRPO-TA: sample cfg.ta_samples answers per group on a perturbed copy; rewards["temporal"] in place.
    Returns metrics: the perturbed answers' accuracy and the share of groups that got the bonus."""
    groups = [g for g in groups_of(episodes) if g[0].turns]
    if not groups:
        return {}
    copies = [perturbed_observation(g[0].turns[0].observation, g[0].seed)[0] for g in groups]
    samples = generate(copies, cfg.ta_samples)
    right, paid = [], 0
    for group, extra in zip(groups, samples):
        pert_ok = [score(s.text, "fake")["accuracy"] for s in extra]
        right.extend(pert_ok)
        real = group[0].turns[0].observation.info["label"] == "real"
        bonus = temporal_bonus(correct_flags(group), pert_ok, real)
        paid += any(b > 0 for b in bonus)
        for ep, b in zip(group, bonus):
            ep.turns[0].rewards["temporal"] = b
    return {"ta/perturbed_accuracy": sum(right) / max(len(right), 1), "ta/bonus_groups": paid / len(groups)}


def post_rollout(episodes, generate, cfg: Config) -> dict:
    """The task's hook: length and temporal rewards in place; metrics of the step."""
    metrics = {}
    if cfg.reward == "ta":
        metrics.update(add_temporal_rewards(episodes, generate, cfg))
    if cfg.length_control:
        add_length_rewards(episodes, cfg)
    metrics.update(decode_metrics(cfg))
    return metrics


_seen: dict[int, tuple[float, int, int]] = {}


def decode_metrics(cfg: Config) -> dict:
    """Decode seconds, clips decoded and cache hits since the previous call (this process's loader)."""
    from tasks.video_authenticity.env import loader_for

    loader = loader_for(cfg)
    now = (loader.decode_s, loader.decoded, loader.cache_hits)
    before = _seen.get(id(loader), (0.0, 0, 0))
    _seen[id(loader)] = now
    return {"decode/seconds": now[0] - before[0], "decode/clips": now[1] - before[1],
            "decode/cache_hits": now[2] - before[2]}
