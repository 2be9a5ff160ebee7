"""The PPO critic: V(observation) from a VLM backbone's last prompt token.

`critic="shared"` puts a linear value head on the policy's own backbone (the value loss also trains
the backbone, as VLA-RL does); `critic="separate"` loads a second copy of the model as the critic's
backbone. Either way the critic owns its optimizer (head, plus backbone when separate), so the
policy optimizer and its checkpoints are unchanged by the choice.
"""

from __future__ import annotations

import torch
from torch import nn

from vlrl.encoding import collate_prompts, encode, text_position_ids
from vlrl.episode import Observation
from vlrl.models import base_model


class Critic(nn.Module):
    def __init__(self, backbone: nn.Module, separate: bool):
        super().__init__()
        hidden = base_model(backbone).config.get_text_config().hidden_size
        # The backbone is a plain attribute when shared, so the critic's state_dict and optimizer hold
        # only what the critic owns.
        if separate:
            self.own_backbone = backbone
        else:
            self.__dict__["shared_backbone"] = backbone
        self.head = nn.Linear(hidden, 1)
        nn.init.zeros_(self.head.weight)  # V = 0 everywhere at the start: no arbitrary early advantages
        nn.init.zeros_(self.head.bias)

    @property
    def backbone(self) -> nn.Module:
        return self.own_backbone if "own_backbone" in self._modules else self.__dict__["shared_backbone"]

    @property
    def separate(self) -> bool:
        return "own_backbone" in self._modules

    def forward(self, processor, observations: list[Observation], train_backbone: bool = True) -> torch.Tensor:
        """Values [N] of the observations (prompt only: the value of the state the action is taken in).

        `train_backbone=False` keeps the backbone out of the graph (critic warm-up on a shared backbone
        must not move the policy)."""
        inner = base_model(self.backbone).model
        device = self.head.weight.device
        batch = collate_prompts([encode(processor, o) for o in observations], processor.tokenizer.pad_token_id)
        batch = {k: v.to(device) for k, v in batch.items()}
        if "pixel_values" not in batch and "pixel_values_videos" not in batch:
            batch["position_ids"] = text_position_ids(batch["attention_mask"])
        with torch.set_grad_enabled(torch.is_grad_enabled() and train_backbone):
            last = inner(**batch, use_cache=False).last_hidden_state[:, -1]  # left-padded: last prompt token
        return self.head(last.float()).squeeze(-1)


@torch.no_grad()
def observation_values(critic: Critic, processor, observations: list[Observation], batch_size: int = 32) -> list[float]:
    """Values of many observations without gradient, in batches."""
    out: list[float] = []
    for i in range(0, len(observations), batch_size):
        out.extend(critic(processor, observations[i : i + batch_size]).tolist())
    return out


def make_critic(cfg, policy: nn.Module, device) -> tuple[Critic, torch.optim.Optimizer]:
    """The critic of `cfg.algo.critic` and its AdamW (lr `algo.critic_lr`, or trainer.lr when 0)."""
    from vlrl.models import load_model

    separate = cfg.algo.critic == "separate"
    backbone = load_model(cfg.model, device) if separate else policy
    critic = Critic(backbone, separate).to(device)
    params = [p for p in critic.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.algo.critic_lr or cfg.trainer.lr, betas=tuple(cfg.trainer.adam_betas),
                                  weight_decay=cfg.trainer.weight_decay)
    return critic, optimizer


def episode_values(critic: Critic, processor, episodes, batch_size: int = 32) -> tuple[list[list[float]], list[float | None]]:
    """Rollout-time values: [T_i] per episode, and the value of the observation after a truncated last
    turn (`episode.info["bootstrap_observation"]`, else None)."""
    obs = [t.observation for ep in episodes for t in ep.turns]
    boot_idx = [i for i, ep in enumerate(episodes) if "bootstrap_observation" in ep.info]
    flat = observation_values(critic, processor, obs + [episodes[i].info["bootstrap_observation"] for i in boot_idx],
                              batch_size)
    values, k = [], 0
    for ep in episodes:
        values.append(flat[k : k + len(ep.turns)])
        k += len(ep.turns)
    bootstrap: list[float | None] = [None] * len(episodes)
    for j, i in enumerate(boot_idx):
        bootstrap[i] = flat[k + j]
    return values, bootstrap
