"""RL algorithm pieces as pure tensor functions: advantages, losses, GAE, curriculum weights, log-probs.

The allowed values of the algorithm's config choices are defined here, next to the code that implements
them (vlrl/config.py validates against them): ADVANTAGE_ESTIMATORS, ADVANTAGE_SCALES, LOSS_TYPES,
KL_ESTIMATORS, IMPORTANCE_LEVELS, CURRICULUM_WEIGHTINGS.
"""

from vlrl.algos.advantages import ADVANTAGE_ESTIMATORS, ADVANTAGE_SCALES, group_advantages
from vlrl.algos.curriculum import CURRICULUM_WEIGHTINGS, curriculum_weights, learnability_weights
from vlrl.algos.gae import gae
from vlrl.algos.logprobs import entropy_from_logits, sequence_logprob, token_logprobs
from vlrl.algos.losses import (
    IMPORTANCE_LEVELS,
    KL_ESTIMATORS,
    LOSS_TYPES,
    LossTerms,
    aggregate,
    kl_penalty,
    loss_terms,
    policy_loss,
    value_loss,
)

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "ADVANTAGE_SCALES",
    "CURRICULUM_WEIGHTINGS",
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
