"""RL algorithm pieces as pure tensor functions: advantages, losses, GAE, curriculum weights."""

from vlrl.algos.advantages import ADVANTAGE_SCALES, group_advantages
from vlrl.algos.curriculum import curriculum_weights, learnability_weights
from vlrl.algos.gae import gae
from vlrl.algos.losses import (
    IMPORTANCE_LEVELS,
    KL_ESTIMATORS,
    LOSS_TYPES,
    LossTerms,
    aggregate,
    entropy_from_logits,
    kl_penalty,
    loss_terms,
    policy_loss,
    sequence_logprob,
    token_logprobs,
    value_loss,
)

__all__ = [
    "ADVANTAGE_SCALES",
    "IMPORTANCE_LEVELS",
    "KL_ESTIMATORS",
    "LOSS_TYPES",
    "LossTerms",
    "aggregate",
    "curriculum_weights",
    "learnability_weights",
    "entropy_from_logits",
    "gae",
    "group_advantages",
    "kl_penalty",
    "loss_terms",
    "policy_loss",
    "sequence_logprob",
    "token_logprobs",
    "value_loss",
]
