"""Clipped policy-gradient losses (GRPO / DAPO / Dr. GRPO / GSPO / GUI-G1) and the PPO value loss.

The policy loss is split in two steps so the trainer can normalise across gradient-accumulation
micro-batches and processes:

* `loss_terms` -> per-token loss ``[B, L]`` (zero on padding) and detached diagnostics;
* `aggregate` -> the scalar, normalised per ``loss_type`` with counts that may be GLOBAL.

Aggregation contract. Let an optimizer step see micro-batches ``m = 1..M`` spread over all
processes (M = ``num_microbatches``), ``S`` sequences in total (``num_sequences``) and ``T`` active
tokens in total (``num_tokens``). Then

    sum over m of aggregate(per_token_loss_m, mask_m, loss_type, num_sequences=S, num_tokens=T,
                            num_microbatches=M, ...)

equals the loss of the whole batch computed at once for ``grpo``, ``dr_grpo``, ``dapo`` and
``gui_g1``, and the mean over micro-batches of each micro-batch's own ``bnpo`` loss for ``bnpo``
(TRL defines bnpo per micro-batch). The same holds for gradients. DDP averages gradients over
processes, so a trainer that backpropagates each micro-batch's `aggregate` value must multiply it by
the world size to get the gradient of that sum. `policy_loss` is `aggregate` with this micro-batch's
own counts, i.e. the single-process, single-micro-batch loss.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from vlrl.algos.logprobs import _check_same_shape, _masked_mean

# The allowed values of algo.loss_type, algo.kl and algo.importance_level (vlrl/config.py checks against these).
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "gui_g1")
KL_ESTIMATORS = ("k1", "k3")
IMPORTANCE_LEVELS = ("token", "sequence", "action")


class LossTerms(NamedTuple):
    """Output of `loss_terms`.

    per_token_loss: [B, L], ``-min(r*A, clip(r)*A) + beta*KL``, exactly 0 where mask is 0.
    diagnostics: detached 0-d tensors over active tokens: ``clip_frac_low`` (r < 1-eps_low with
        A < 0), ``clip_frac_high`` (r > 1+eps_high with A > 0), ``clip_frac`` (their sum),
        ``ratio_mean``, and ``kl_mean`` when beta > 0.
    """

    per_token_loss: torch.Tensor
    diagnostics: dict[str, torch.Tensor]


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kl: str = "k3") -> torch.Tensor:
    """Per-token estimate of KL(policy || reference) from sampled tokens.

    ``k1 = logp - ref_logp`` (unbiased, can be negative);
    ``k3 = exp(ref_logp - logp) - (ref_logp - logp) - 1`` (unbiased, always >= 0).

    logp, ref_logp: [B, L]. Returns [B, L].
    """
    if kl not in KL_ESTIMATORS:
        raise ValueError(f"kl must be one of {KL_ESTIMATORS}, got {kl!r}")
    if kl == "k1":
        return logp - ref_logp
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def loss_terms(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    ref_logp: torch.Tensor | None = None,
    beta: float = 0.0,
    kl: str = "k3",
    importance_level: str = "token",
) -> LossTerms:
    """Per-token clipped surrogate loss, before any normalisation.

    Ratio ``r = exp(logp - old_logp)`` per token (``importance_level="token"``), or per sequence
    (``"sequence"``, GSPO): ``exp`` of the masked mean log-ratio of the sequence, the same value for
    all of its tokens (the gradient flows through the mean); or per action (``"action"``, VLA-RL: a
    response is one action of D tokens, and the action's probability is the product of its tokens'):
    ``exp`` of the masked SUM of the log-ratios.

    Args:
        logp: [B, L] log-probs of the sampled tokens under the current policy (with grad).
        old_logp: [B, L] log-probs under the sampling policy.
        advantages: [B] per-sequence advantages, or [B, L] per-token ones.
        mask: [B, L] 1/True on response tokens, 0/False on padding.
        eps_low, eps_high: clip range ``[1 - eps_low, 1 + eps_high]``.
        ref_logp: [B, L] reference-policy log-probs; only needed when beta > 0.
        beta: KL coefficient.
        kl: "k1" or "k3", the KL estimator.
        importance_level: "token", "sequence" or "action".

    Returns:
        LossTerms(per_token_loss [B, L], diagnostics).
    """
    if logp.dim() != 2:
        raise ValueError(f"logp must be [B, L], got shape {tuple(logp.shape)}")
    _check_same_shape("old_logp", old_logp, logp)
    _check_same_shape("mask", mask, logp)
    if advantages.shape not in (logp.shape[:1], logp.shape):
        raise ValueError(
            f"advantages must be [B] or [B, L] with (B, L) = {tuple(logp.shape)}, got {tuple(advantages.shape)}"
        )
    if importance_level not in IMPORTANCE_LEVELS:
        raise ValueError(f"importance_level must be one of {IMPORTANCE_LEVELS}, got {importance_level!r}")
    if kl not in KL_ESTIMATORS:
        raise ValueError(f"kl must be one of {KL_ESTIMATORS}, got {kl!r}")
    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"eps_low and eps_high must be >= 0, got eps_low={eps_low!r}, eps_high={eps_high!r}")
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta!r}")
    if beta > 0:
        if ref_logp is None:
            raise ValueError("ref_logp is required when beta > 0")
        _check_same_shape("ref_logp", ref_logp, logp)

    # The sampling and reference policies are constants of the objective. In the on-policy case a
    # caller may pass old_logp = logp; without detach the ratio's gradient would vanish.
    old_logp = old_logp.detach()
    ref_logp = ref_logp.detach() if ref_logp is not None else None
    active = mask.bool()
    zeros = torch.zeros_like(logp)
    # Zero the log-ratio on padding *before* exp: padded log-probs can be arbitrary (even -inf), and
    # exp overflow there would turn into NaN gradients even if the loss were masked afterwards.
    log_ratio = torch.where(active, logp - old_logp, zeros)
    if importance_level == "sequence":
        seq_log_ratio = log_ratio.sum(dim=1, keepdim=True) / active.sum(dim=1, keepdim=True).clamp(min=1)
        log_ratio = seq_log_ratio.expand_as(logp)
    elif importance_level == "action":
        log_ratio = log_ratio.sum(dim=1, keepdim=True).expand_as(logp)
    ratio = torch.exp(log_ratio)

    adv = advantages.to(logp.dtype)
    if adv.dim() == 1:
        adv = adv.unsqueeze(1)
    clipped_ratio = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    objective = torch.minimum(ratio * adv, clipped_ratio * adv)
    loss = -objective

    diagnostics: dict[str, torch.Tensor] = {}
    if beta > 0:
        # Same reason as for the ratio: padding must stay finite through exp and its gradient.
        kl_tok = kl_penalty(torch.where(active, logp, zeros), torch.where(active, ref_logp.to(logp.dtype), zeros), kl)
        loss = loss + beta * kl_tok
        diagnostics["kl_mean"] = _masked_mean(kl_tok.detach(), active)

    with torch.no_grad():
        adv_b = adv.expand_as(ratio)
        low = active & (ratio < 1.0 - eps_low) & (adv_b < 0)
        high = active & (ratio > 1.0 + eps_high) & (adv_b > 0)
        n_active = active.sum().clamp(min=1)
        diagnostics["clip_frac_low"] = low.sum() / n_active
        diagnostics["clip_frac_high"] = high.sum() / n_active
        diagnostics["clip_frac"] = (low | high).sum() / n_active
        diagnostics["ratio_mean"] = _masked_mean(ratio.detach(), active)

    return LossTerms(torch.where(active, loss, zeros), diagnostics)


def aggregate(
    per_token_loss: torch.Tensor,
    mask: torch.Tensor,
    loss_type: str,
    *,
    num_sequences: int | torch.Tensor | None = None,
    num_tokens: int | torch.Tensor | None = None,
    num_microbatches: int = 1,
    max_completion_length: int | None = None,
    length_norm: float = 64.0,
    seq_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reduce a per-token loss to this micro-batch's share of the step's scalar loss.

    With ``s_i = sum_t loss[i, t]`` over active tokens and ``n_i`` the active token count of row i:

    * ``grpo``:    ``sum_i (s_i / n_i) / num_sequences``
    * ``bnpo``:    ``(sum_i s_i / sum_i n_i) / num_microbatches`` (this micro-batch's own token count)
    * ``dr_grpo``: ``sum_i s_i / (num_sequences * max_completion_length)``
    * ``dapo``:    ``sum_i s_i / num_tokens``
    * ``gui_g1``:  ``sum_i seq_weights[i] * s_i / length_norm / num_sequences``

    `num_sequences` and `num_tokens` are the GLOBAL counts over every micro-batch of every process
    of the optimizer step, `num_microbatches` the global number of micro-batches; left at their
    defaults they are this micro-batch's own counts (and 1). Summing the result over all micro-batches
    gives the full-batch loss (mean of the per-micro-batch losses for bnpo); see the module docstring.

    Args:
        per_token_loss: [B, L], zero on padding (as returned by `loss_terms`).
        mask: [B, L] 1/True on response tokens.
        loss_type: one of "grpo", "bnpo", "dr_grpo", "dapo", "gui_g1".
        num_sequences: global sequence count (grpo, dr_grpo, gui_g1); default B.
        num_tokens: global active-token count (dapo); default this micro-batch's.
        num_microbatches: global micro-batch count (bnpo).
        max_completion_length: required for dr_grpo.
        length_norm: GUI-G1's constant length normaliser.
        seq_weights: [B] per-sequence weights, gui_g1 only (default 1).

    Returns:
        0-d tensor.
    """
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    if per_token_loss.dim() != 2:
        raise ValueError(f"per_token_loss must be [B, L], got shape {tuple(per_token_loss.shape)}")
    _check_same_shape("mask", mask, per_token_loss)
    if seq_weights is not None and loss_type != "gui_g1":
        raise ValueError(f"seq_weights is only used by loss_type='gui_g1', got loss_type={loss_type!r}")
    if num_microbatches < 1:
        raise ValueError(f"num_microbatches must be >= 1, got {num_microbatches!r}")

    active = mask.bool()
    # Re-mask: callers may hand in a loss that is not already zero on padding.
    masked = torch.where(active, per_token_loss, torch.zeros_like(per_token_loss))
    seq_sum = masked.sum(dim=1)  # [B]
    if num_sequences is None:
        num_sequences = per_token_loss.shape[0]

    if loss_type == "grpo":
        seq_mean = seq_sum / active.sum(dim=1).clamp(min=1)
        return seq_mean.sum() / num_sequences
    if loss_type == "bnpo":
        return seq_sum.sum() / active.sum().clamp(min=1) / num_microbatches
    if loss_type == "dr_grpo":
        if max_completion_length is None:
            raise ValueError("max_completion_length is required for loss_type='dr_grpo'")
        if max_completion_length <= 0:
            raise ValueError(f"max_completion_length must be > 0, got {max_completion_length!r}")
        return seq_sum.sum() / (num_sequences * max_completion_length)
    if loss_type == "dapo":
        if num_tokens is None:
            num_tokens = active.sum()
        if isinstance(num_tokens, torch.Tensor):
            num_tokens = num_tokens.clamp(min=1)
        else:
            num_tokens = max(num_tokens, 1)
        return seq_sum.sum() / num_tokens
    # gui_g1
    if length_norm <= 0:
        raise ValueError(f"length_norm must be > 0, got {length_norm!r}")
    if seq_weights is not None:
        if seq_weights.shape != seq_sum.shape:
            raise ValueError(f"seq_weights must have shape {tuple(seq_sum.shape)}, got {tuple(seq_weights.shape)}")
        seq_sum = seq_sum * seq_weights.to(seq_sum.dtype)
    return (seq_sum / length_norm).sum() / num_sequences


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    loss_type: str,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    max_completion_length: int | None = None,
    ref_logp: torch.Tensor | None = None,
    beta: float = 0.0,
    kl: str = "k3",
    importance_level: str = "token",
    length_norm: float = 64.0,
    seq_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Clipped policy-gradient loss of one micro-batch on one process.

    ``aggregate(loss_terms(...).per_token_loss, mask, loss_type, ...)`` with this micro-batch's own
    counts. Shapes: logp, old_logp, ref_logp, mask: [B, L]; advantages: [B]; seq_weights: [B].
    See `loss_terms` and `aggregate` for the arguments. Returns a 0-d tensor.
    """
    if loss_type not in LOSS_TYPES:  # fail before doing any work
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    terms = loss_terms(
        logp,
        old_logp,
        advantages,
        mask,
        eps_low=eps_low,
        eps_high=eps_high,
        ref_logp=ref_logp,
        beta=beta,
        kl=kl,
        importance_level=importance_level,
    )
    return aggregate(
        terms.per_token_loss,
        mask,
        loss_type,
        max_completion_length=max_completion_length,
        length_norm=length_norm,
        seq_weights=seq_weights,
    )


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor | None = None,
    clip: float | None = None,
) -> torch.Tensor:
    """PPO value loss.

    ``0.5 * mean(max((v - R)^2, (v_clip - R)^2))`` with ``v_clip = old + clamp(v - old, -clip, clip)``;
    without `clip`, ``0.5 * mean((v - R)^2)``. The mean is over entries where mask != 0.

    values, old_values, returns, mask: [N] (any matching shape works). Returns a 0-d tensor.
    """
    _check_same_shape("old_values", old_values, values)
    _check_same_shape("returns", returns, values)
    if clip is not None and clip < 0:
        raise ValueError(f"clip must be >= 0 or None, got {clip!r}")
    returns = returns.to(values.dtype)
    err = (values - returns) ** 2
    if clip is not None:
        old = old_values.to(values.dtype)
        v_clipped = old + torch.clamp(values - old, -clip, clip)
        err = torch.maximum(err, (v_clipped - returns) ** 2)
    if mask is None:
        return 0.5 * err.mean()
    _check_same_shape("mask", mask, values)
    return 0.5 * _masked_mean(err, mask.bool())
