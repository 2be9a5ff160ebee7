"""A LIBERO suite as a multi-turn vlrl Env for VLA policies, under the official evaluation protocol.

Seeds index (task, trial) in evaluation order: with T = trials_per_task, seed s runs task
``tasks[(s // T) % len(tasks)]`` from the package's fixed init state ``s % T`` (trial k = init state k,
as in robots/libero_eval.py). The "train" split instead runs task ``tasks[s % len(tasks)]`` from a fresh
placement that LIBERO's samplers draw from seed s (robots.libero_env.LiberoEnv.reset, init_state="random"), so
training (RL, demos) never starts from the shipped init states that the official evaluation uses. reset(seed) loads that init state, runs the protocol's no-op wait steps
(zero deltas, gripper open; they do not count) and returns the first observation: the camera image and
the OpenVLA prompt "In: What action should the robot take to {instruction}?\\nOut:".

Each turn the policy answers with 7 action tokens (as text); the env re-tokenises the text, decodes the
action (tasks.robot_manipulation.action_tokenizer) and steps LIBERO. A response that is not exactly 7
action tokens makes the robot hold still for that step (zero deltas, unchanged gripper command; info
reason "invalid_action"). Reward per turn: ``success`` (1 on the step LIBERO's success predicate holds,
which ends the episode). The episode is truncated after the suite's step limit (robots.libero_env.SUITE_MAX_STEPS).

Observations constrain decoding (`Observation.allowed_ids`): 7 positions of action ids, then EOS.

Building a LIBERO simulator takes seconds, so simulators are pooled per process: an env takes one for
its task at reset and gives it back when its episode ends (or on close), and a later env of the same
task reuses it. At most `cfg.env_cache_size` idle simulators are kept (least recently used closed first).
Closing a simulator changes what the other live ones render (robots/README.md, "Trap"): suites of at most
`env_cache_size` tasks (all but libero_90 with the default 32) never close one during an evaluation.
"""

from __future__ import annotations

import functools
from collections import OrderedDict

import numpy as np
from PIL import Image

from robots.libero_env import SUITE_MAX_STEPS, LiberoConfig
from robots.libero_eval import NOOP_ACTION
from vlrl.episode import Observation, StepResult

# The libero Config has the robot task's tokenizer fields, so its cached tokenizers serve both tasks.
from tasks.robot_manipulation.env import ActionTokenEnv, action_constraint, action_tokenizer, hf_tokenizer, vla_observation

def allowed_ids(cfg) -> list:
    """Constrained decoding: 7 action-token positions, then EOS."""
    return action_constraint(action_tokenizer(cfg), [hf_tokenizer(cfg.tokenizer_path).eos_token_id])


# --- protocol helpers -------------------------------------------------------------------------------

def max_steps(cfg) -> int:
    """Policy steps per episode: task.max_steps, else the suite's official limit."""
    return cfg.max_steps if cfg.max_steps is not None else SUITE_MAX_STEPS[cfg.suite]


@functools.lru_cache(maxsize=None)
def _suite_tasks(suite: str) -> tuple[tuple[str, str], ...]:
    from robots.libero_env import list_tasks

    return list_tasks(suite)


def eval_task_ids(cfg) -> list[int]:
    """The evaluated task ids in order (task.task_ids, else every task of the suite)."""
    n = len(_suite_tasks(cfg.suite))
    ids = list(cfg.task_ids) or list(range(n))
    bad = [i for i in ids if not 0 <= i < n]
    if bad:
        raise ValueError(f"invalid config value for 'task.task_ids': {bad} outside 0..{n - 1} ({cfg.suite} has {n} tasks)")
    return ids


@functools.lru_cache(maxsize=None)
def num_init_states(suite: str, task_id: int) -> int:
    from robots.libero_env import init_states

    return len(init_states(suite, task_id))


def check_trials(cfg) -> None:
    """Every evaluated task has at least trials_per_task fixed init states (LIBERO ships 50)."""
    for tid in eval_task_ids(cfg):
        n = num_init_states(cfg.suite, tid)
        if cfg.trials_per_task > n:
            raise ValueError(f"invalid config value for 'task.trials_per_task': {cfg.trials_per_task} > the {n} "
                             f"init states of {cfg.suite} task {tid}")


def task_info(cfg, task_id: int) -> tuple[str, str]:
    """(name, language instruction) of a task of the configured suite."""
    return _suite_tasks(cfg.suite)[task_id]


def locate(cfg, seed: int) -> tuple[int, int]:
    """seed -> (task id, trial index = init state index), in evaluation order; seeds past the end wrap."""
    ids = eval_task_ids(cfg)
    seed = int(seed) % (len(ids) * cfg.trials_per_task)
    return ids[seed // cfg.trials_per_task], seed % cfg.trials_per_task


def sim_config(cfg, task_id: int) -> LiberoConfig:
    # The simulator's own step limit is never what ends an episode: the env counts policy steps.
    return LiberoConfig(suite=cfg.suite, task_id=task_id, cameras=(cfg.camera,), image_size=cfg.render_size,
                        flip=cfg.flip, max_steps=max_steps(cfg) + cfg.num_wait_steps + 1)


# --- simulator pool ---------------------------------------------------------------------------------

class SimPool:
    """Idle LIBERO simulators by config, least recently released first out when over capacity."""

    def __init__(self) -> None:
        self._idle: OrderedDict[int, tuple[tuple, object]] = OrderedDict()
        self.builds = 0  # simulators built so far (diagnostics, tests)

    @staticmethod
    def key(lcfg: LiberoConfig) -> tuple:
        return (lcfg.suite, lcfg.task_id, tuple(lcfg.cameras), lcfg.image_size, lcfg.flip, lcfg.max_steps,
                lcfg.task_order_index, lcfg.hard_reset, lcfg.control_freq)

    def acquire(self, lcfg: LiberoConfig):
        key = self.key(lcfg)
        for ident, (k, sim) in reversed(self._idle.items()):
            if k == key:
                del self._idle[ident]
                return sim
        from robots.env import make_env

        sim = make_env(lcfg)  # closed at exit if still pooled then (robots.suite_base.track_for_exit)
        self.builds += 1
        return sim

    def release(self, sim, capacity: int) -> None:
        self._idle[id(sim)] = (self.key(sim.cfg), sim)
        while len(self._idle) > capacity:
            _, (_, old) = self._idle.popitem(last=False)
            old.close()

    def clear(self) -> None:
        while self._idle:
            _, (_, sim) = self._idle.popitem(last=False)
            sim.close()

    def __len__(self) -> int:
        return len(self._idle)


POOL = SimPool()


# --- the env ----------------------------------------------------------------------------------------

class LiberoTaskEnv(ActionTokenEnv):
    """One episode at a time of a LIBERO suite under the official protocol (see the module docstring)."""

    def __init__(self, cfg, split: str = "eval"):
        self.cfg, self.split = cfg, split
        self.tok = action_tokenizer(cfg)
        self.hf_tok = hf_tokenizer(cfg.tokenizer_path)
        self.max_steps = max_steps(cfg)
        self._allowed = allowed_ids(cfg)
        self._sim = None
        self._seed = 0
        self.task_id, self.trial, self.steps = 0, 0, 0
        self.instruction = ""

    def reset(self, seed: int) -> Observation:
        if self.split == "train":  # a fresh placement drawn from the seed, never one of the shipped init states
            ids = eval_task_ids(self.cfg)
            self.task_id, self.trial = ids[int(seed) % len(ids)], None
        else:
            self.task_id, self.trial = locate(self.cfg, seed)
        self._seed = int(seed)
        lcfg = sim_config(self.cfg, self.task_id)
        if self._sim is not None and SimPool.key(self._sim.cfg) != SimPool.key(lcfg):
            self._release()
        if self._sim is None:
            self._sim = POOL.acquire(lcfg)
        sim = self._sim
        self.instruction = sim.instruction
        if self.trial is None:
            obs = sim.reset(seed=self._seed, init_state="random")
        else:
            if self.trial >= len(sim.init_states):  # LiberoEnv would wrap around silently
                check_trials(self.cfg)
            obs = sim.reset(seed=self.cfg.env_seed, init_state=self.trial)
        for _ in range(self.cfg.num_wait_steps):  # objects settle; not counted, never seen by the policy
            obs, *_ = sim.step(NOOP_ACTION)
        self.steps = 0
        return self._observation(obs)

    def _act(self, action: np.ndarray | None) -> StepResult:
        sim = self._sim
        if sim is None:
            raise RuntimeError("step() before reset() (or after the episode ended)")
        invalid = action is None
        action = np.zeros(7) if invalid else action
        obs, _, term, _, _ = sim.step(action)
        self.steps += 1
        success = bool(term)
        truncated = not success and self.steps >= self.max_steps
        info = {"reason": "invalid_action" if invalid else None, "success": success, "step": self.steps,
                "task_id": self.task_id, "trial": self.trial, "action": [float(v) for v in action]}
        done = success
        next_obs = None if done else self._observation(obs)  # truncated: kept for value bootstrapping
        if done or truncated:
            self._release()  # the episode is over: the simulator serves the next episode of this task
        return StepResult(next_obs, {"success": 1.0 if success else 0.0}, done, truncated=truncated, info=info)

    def _observation(self, obs: dict) -> Observation:
        image = Image.fromarray(obs["images"][self.cfg.camera])
        if image.size != (self.cfg.image_size, self.cfg.image_size):
            image = image.resize((self.cfg.image_size, self.cfg.image_size), Image.LANCZOS)
        info = {"suite": self.cfg.suite, "task_id": self.task_id, "trial": self.trial,
                "init_state": "random" if self.trial is None else self.trial,
                "task_instruction": self.instruction, "step": self.steps, "sim_step": self._sim._t, "seed": self._seed}
        return vla_observation(image, self.instruction.lower(), info, self._allowed)

    def _release(self) -> None:
        sim, self._sim = self._sim, None
        if sim is not None:
            POOL.release(sim, self.cfg.env_cache_size)

    def __deepcopy__(self, memo):
        """A second simulator in the same state (run_episodes copies an env right after reset for G > 1)."""
        new = LiberoTaskEnv(self.cfg, self.split)
        if self._sim is not None:
            new.reset(self._seed)  # same init state and wait steps
            if self.steps:  # copied mid-episode: also copy the physics state
                new._sim._set_state(self._sim.get_state())
                new._sim._t, new.steps = self._sim._t, self.steps
        memo[id(self)] = new
        return new

    def close(self) -> None:
        self._release()

    def __del__(self):
        try:
            self._release()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass
