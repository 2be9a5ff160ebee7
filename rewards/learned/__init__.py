"""Learned reward models (progress model, task-completion PRM, CLIP reward) with their data and training code."""
