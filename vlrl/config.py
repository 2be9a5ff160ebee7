"""Typed configs behind the Hydra tree in configs/.

Every field has a one-line help string (shown by `python vlrl/train.py --help`, vlrl/cli.py). Types are
enforced by OmegaConf when the YAML is merged onto these dataclasses, and values are checked in
`__post_init__`; either way the error names the field (e.g. `trainer.lr`).

Task configs are owned by the task folder (`tasks/<name>/__init__.py: Config`) and validated the
same way, so adding a task never touches this file.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from vlrl.algos import ADVANTAGE_ESTIMATORS, ADVANTAGE_SCALES, CURRICULUM_WEIGHTINGS, IMPORTANCE_LEVELS, KL_ESTIMATORS, LOSS_TYPES

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "configs"


def opt(default: Any, help: str):
    """A dataclass field with a help string (mutable defaults are copied per instance)."""
    if isinstance(default, (list, dict)) or is_dataclass(default):
        return field(default_factory=lambda: copy.deepcopy(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})


class UsageError(ValueError):
    """A mistake in how a run was asked for (a missing model, a run folder in use, ...): the entry points print it
    as one line (vlrl/cli.py)."""


def _check(cond: bool, name: str, msg: str) -> None:
    if not cond:
        raise ValueError(f"invalid config value for '{name}': {msg}")


def _one_of(value: Any, name: str, allowed: tuple) -> None:
    _check(value in allowed, name, f"{value!r} is not one of {list(allowed)}")


@dataclass
class LoraConfig:
    r: int = opt(0, "LoRA rank; 0 trains all weights (no peft)")
    alpha: int = opt(16, "LoRA alpha (scaling = alpha / r)")
    dropout: float = opt(0.0, "dropout on the LoRA branch")
    target_modules: list[str] = opt(["q_proj", "k_proj", "v_proj", "o_proj"], "module names that get adapters")

    def __post_init__(self):
        _check(self.r >= 0, "model.lora.r", "must be >= 0")


@dataclass
class ModelConfig:
    path: str = opt("assets/tiny-qwen2.5-vl", "hub id or local directory (relative paths: cwd, then repo root)")
    dtype: str = opt("auto", "auto (fp32 on CPU, bf16 on GPU) | float32 | bfloat16")
    attn_implementation: str = opt("sdpa", "transformers attention backend: sdpa | eager | flash_attention_2")
    freeze_vision: bool = opt(False, "freeze the vision tower (and merger)")
    gradient_checkpointing: bool = opt(False, "recompute each decoder / vision block's activations in backward to save memory")
    min_pixels: int | None = opt(None, "override the processor's min_pixels for images")
    max_pixels: int | None = opt(None, "override the processor's max_pixels for images")
    lora: LoraConfig = opt(LoraConfig(), "LoRA adapters (peft); r=0 disables")

    def __post_init__(self):
        _one_of(self.dtype, "model.dtype", ("auto", "float32", "bfloat16", "float16"))
        _one_of(self.attn_implementation, "model.attn_implementation", ("sdpa", "eager", "flash_attention_2"))


@dataclass
class AlgoConfig:
    name: str = opt("grpo", "label for logs: grpo | dapo | dr_grpo | gui_g1 | ppo")
    group_size: int = opt(8, "G: rollouts per prompt / initial state")
    advantage: str = opt("group", "advantage estimator: group (group-relative) | gae | role (per-turn r - b_role, "
                         "EMA baseline per role the task declares: multi-role games)")
    role_decay: float = opt(0.9, "role: EMA decay of the per-role baselines (weight of the old baseline)")
    scale: str = opt("group", "group advantages: divide by std of the group | batch | none (Dr.GRPO, GUI-G1)")
    loss_type: str = opt("dapo", "loss aggregation, TRL names: " + " | ".join(LOSS_TYPES))
    eps_low: float = opt(0.2, "lower ratio clip: r >= 1 - eps_low")
    eps_high: float = opt(0.2, "upper ratio clip: r <= 1 + eps_high (DAPO clip-higher: 0.28)")
    importance_level: str = opt("token", "importance ratio per token | sequence (GSPO: mean log-ratio) | action (VLA-RL: sum over the action's tokens)")
    beta: float = opt(0.0, "KL coefficient; 0 loads no reference model")
    kl: str = opt("k3", "KL estimator: " + " | ".join(KL_ESTIMATORS))
    num_iterations: int = opt(1, "PPO epochs over each generation batch")
    length_norm: float = opt(64.0, "gui_g1: constant divisor of each sequence's token sum")
    reward_weights: dict[str, float] = opt({}, "weight per named sub-reward (missing names: 1.0)")
    gamma: float = opt(0.99, "gae: discount")
    lam: float = opt(0.95, "gae: lambda")
    critic: str = opt("shared", "gae: value head on the policy backbone (shared) | a second copy of the model (separate)")
    vf_coef: float = opt(0.5, "gae: weight of the value loss")
    value_clip: float = opt(0.2, "gae: clip of the value change per update (PPO value clipping); 0 = off")
    critic_lr: float = opt(0.0, "gae: critic learning rate; 0 = trainer.lr")
    critic_warmup: int = opt(0, "gae: first N steps train only the critic (no policy update)")
    filter_groups: bool = opt(False, "drop groups whose rewards are all equal (all fail / all succeed): no signal")

    def __post_init__(self):
        _check(self.group_size >= 1, "algo.group_size", "must be >= 1")
        _one_of(self.advantage, "algo.advantage", ADVANTAGE_ESTIMATORS)
        _one_of(self.scale, "algo.scale", ADVANTAGE_SCALES)
        _one_of(self.loss_type, "algo.loss_type", LOSS_TYPES)
        _one_of(self.importance_level, "algo.importance_level", IMPORTANCE_LEVELS)
        _one_of(self.critic, "algo.critic", ("shared", "separate"))
        _check(self.advantage != "gae" or self.scale in ("batch", "none"), "algo.scale",
               "with advantage=gae use batch (whiten over the batch) or none")
        _check(0 <= self.role_decay <= 1, "algo.role_decay", "must be in [0, 1]")
        _check(0 <= self.gamma <= 1, "algo.gamma", "must be in [0, 1]")
        _check(0 <= self.lam <= 1, "algo.lam", "must be in [0, 1]")
        _check(self.vf_coef >= 0, "algo.vf_coef", "must be >= 0")
        _check(self.value_clip >= 0, "algo.value_clip", "must be >= 0")
        _check(self.critic_lr >= 0, "algo.critic_lr", "must be >= 0")
        _check(self.critic_warmup >= 0, "algo.critic_warmup", "must be >= 0")
        _one_of(self.kl, "algo.kl", KL_ESTIMATORS)
        _check(0 <= self.eps_low < 1, "algo.eps_low", "must be in [0, 1)")
        _check(self.eps_high >= 0, "algo.eps_high", "must be >= 0")
        _check(self.beta >= 0, "algo.beta", "must be >= 0")
        _check(self.num_iterations >= 1, "algo.num_iterations", "must be >= 1")
        _check(self.length_norm > 0, "algo.length_norm", "must be > 0")


@dataclass
class RolloutConfig:
    engine: str = opt("hf", "hf (transformers generate, CPU/GPU) | vllm (GPU build, or the CPU build in its own env)")
    max_new_tokens: int = opt(32, "max completion length in tokens")
    temperature: float = opt(1.0, "sampling temperature (log-probs use the same temperature)")
    top_p: float = opt(1.0, "nucleus sampling")
    top_k: int = opt(0, "top-k sampling; 0 = off")
    max_turns: int = opt(1, "turn limit of multi-turn episodes")
    batch_size: int = opt(64, "max sequences per generate call")
    vllm_gpu_memory_utilization: float = opt(0.3, "vllm: share of GPU memory for the colocated engine")
    vllm_tensor_parallel_size: int = opt(1, "vllm: tensor parallel degree")
    frozen_roles: list[str] = opt([], "training: roles whose turns a frozen copy of the start (model.path) plays, never trained (self-play against a fixed opponent)")

    def __post_init__(self):
        _one_of(self.engine, "rollout.engine", ("hf", "vllm"))
        _check(self.max_new_tokens >= 1, "rollout.max_new_tokens", "must be >= 1")
        _check(self.temperature > 0, "rollout.temperature", "must be > 0")
        _check(0 < self.top_p <= 1, "rollout.top_p", "must be in (0, 1]")
        _check(self.max_turns >= 1, "rollout.max_turns", "must be >= 1")
        _check(not self.frozen_roles or self.engine == "hf", "rollout.frozen_roles", "needs rollout.engine=hf")


@dataclass
class TrainerConfig:
    seed: int = opt(0, "global seed: prompts, sampling and init derive from it")
    steps: int = opt(100, "optimizer steps (one generation batch each)")
    prompts_per_step: int = opt(4, "prompts (groups) per step per process")
    micro_batch_size: int = opt(16, "sequences per forward/backward (gradient accumulation splits the rest)")
    lr: float = opt(1e-5, "peak learning rate")
    lr_schedule: str = opt("constant", "constant | cosine | linear (after warmup)")
    warmup_steps: int = opt(0, "linear warmup steps")
    weight_decay: float = opt(0.0, "AdamW weight decay")
    adam_betas: list[float] = opt([0.9, 0.999], "AdamW betas")
    max_grad_norm: float = opt(1.0, "gradient clipping norm; 0 disables")
    output_dir: str = opt("outputs/run", "run directory: metrics, samples, checkpoints, plots (a folder holding another "
                                         "run is refused: see resume, overwrite)")
    resume: str = opt("none", "none | auto (latest checkpoint in output_dir, refused when written by another run: "
                              "model.path, task or algo differ) | path to a checkpoint")
    overwrite: bool = opt(False, "replace the run already in output_dir (its metrics, checkpoints, plots); "
                                 "false: such a folder is refused unless this run continues it (resume)")
    save_every: int = opt(50, "checkpoint every N steps (and at the end); 0 = only at the end")
    keep_checkpoints: int = opt(2, "how many recent checkpoints to keep; 0 = all")
    log_every: int = opt(1, "log metrics every N steps")
    samples_every: int = opt(10, "log a table of a few prompts/responses/rewards every N steps; 0 = never")
    eval_every: int = opt(0, "evaluate on held-out data every N steps; 0 = only at the end if eval_examples > 0")
    eval_examples: int = opt(0, "held-out examples for evaluation during training")
    loggers: list[str] = opt(["jsonl"], "jsonl (always) plus tensorboard / wandb")
    wandb_project: str = opt("vlrl", "wandb project")
    progress: bool = opt(True, "show a progress bar")
    threads: int = opt(0, "torch CPU threads (training and evaluation); 0 = torch default")
    shared_prefix: bool | None = opt(None, "training forward runs each group's prompt through the language model once, its KV cache shared by the G answers (same log-probs and gradients, "
                                           "fewer tokens): null = on where supported (data parallel, ZeRO-3), off under FSDP2; true = on (refused under FSDP2); false = every row as its full sequence")
    max_minutes: float = opt(0.0, "> 0: stop after the step that crosses this wall-clock budget (checkpoint saved); 0 = no limit")
    curriculum_pool: int = opt(0, "> 0: draw training seeds from first_seed..first_seed+pool-1 by success-rate curriculum; 0 = fresh seeds")
    curriculum_first_seed: int = opt(0, "curriculum: first seed of the pool (e.g. past the seeds a BC warm start was trained on)")
    curriculum_window: int = opt(8, "curriculum: outcomes remembered per seed")
    curriculum_temperature: float = opt(1.0, "curriculum: T in weight^(1/T); low T = concentrate on the top-weighted seeds")
    curriculum_weighting: str = opt("failure", "curriculum: failure = weight 1 - SR (hardest first), learnability = SR (1 - SR) (mixed outcomes first)")
    max_skip_fraction: float = opt(0.05, "skip budget: stop the run when more than this share of the prompts of the last skip_window steps were skipped (unreadable image, bad record; reasons in metrics skipped/*), and at any step with no usable prompt; 1 = never stop")
    skip_window: int = opt(20, "skip budget: steps in the window; judged once the window is full, or at the last step of a shorter run")

    def __post_init__(self):
        _check(self.seed >= 0, "trainer.seed", "must be >= 0")
        _check(self.steps >= 0, "trainer.steps", "must be >= 0")
        _check(self.prompts_per_step >= 1, "trainer.prompts_per_step", "must be >= 1")
        _check(self.micro_batch_size >= 1, "trainer.micro_batch_size", "must be >= 1")
        _check(self.lr > 0, "trainer.lr", "must be > 0")
        _one_of(self.lr_schedule, "trainer.lr_schedule", ("constant", "cosine", "linear"))
        _check(len(self.adam_betas) == 2, "trainer.adam_betas", "needs two values")
        _check(self.warmup_steps >= 0, "trainer.warmup_steps", "must be >= 0")
        _check(self.output_dir.strip() != "", "trainer.output_dir", "required: name this run's folder (trainer.output_dir=DIR)")
        _check(not (self.overwrite and self.resume != "none"), "trainer.overwrite",
               "starts the run over: set trainer.resume=none with it")
        _check(self.save_every >= 0, "trainer.save_every", "must be >= 0 (0 = only at the end)")
        _check(self.keep_checkpoints >= 0, "trainer.keep_checkpoints", "must be >= 0 (0 = keep all)")
        _check(self.log_every >= 1, "trainer.log_every", "must be >= 1")
        _check(self.samples_every >= 0, "trainer.samples_every", "must be >= 0 (0 = never)")
        _check(self.eval_every >= 0, "trainer.eval_every", "must be >= 0")
        _check(self.eval_examples >= 0, "trainer.eval_examples", "must be >= 0")
        _check(self.threads >= 0, "trainer.threads", "must be >= 0 (0 = torch default)")
        _check(self.max_minutes >= 0, "trainer.max_minutes", "must be >= 0")
        _check(0 <= self.max_skip_fraction <= 1, "trainer.max_skip_fraction", "must be in [0, 1]")
        _check(self.skip_window >= 1, "trainer.skip_window", "must be >= 1")
        _check(self.curriculum_pool >= 0, "trainer.curriculum_pool", "must be >= 0")
        _check(self.curriculum_first_seed >= 0, "trainer.curriculum_first_seed", "must be >= 0")
        _check(self.curriculum_window >= 1, "trainer.curriculum_window", "must be >= 1")
        _check(self.curriculum_temperature > 0, "trainer.curriculum_temperature", "must be > 0")
        _one_of(self.curriculum_weighting, "trainer.curriculum_weighting", CURRICULUM_WEIGHTINGS)
        for lg in self.loggers:
            _one_of(lg, "trainer.loggers", ("jsonl", "tensorboard", "wandb"))


@dataclass
class EvalConfig:
    output: str = opt("", "report path (.json); a Markdown table is written beside it; default: beside the model's "
                          "folder, <model.path>.eval-<task>-<split>.json (required for a hub id)")
    split: str = opt("eval", "which split of the task to evaluate")
    num_examples: int = opt(0, "examples to evaluate; 0 = the task's default (all records, or 1000 for generators)")
    first_example: int = opt(0, "evaluate seeds first_example .. first_example + num_examples - 1 (unused states)")
    batch_size: int = opt(32, "prompts per generate call")
    greedy: bool = opt(True, "greedy decoding (else sample at rollout.temperature)")
    seed: int = opt(0, "torch seed for sampled decoding (the evaluated examples do not depend on it)")
    dump_images: int = opt(0, "write this many annotated examples next to the report, when the task supports it")

    def __post_init__(self):
        _check(self.num_examples >= 0, "eval.num_examples", "must be >= 0")
        _check(self.first_example >= 0, "eval.first_example", "must be >= 0")


@dataclass
class SFTConfig:
    curriculum: list[dict] = opt([], "stages [{until: STEP, task: {field: value}}]: task overrides while step < until")
    eval_examples: int = opt(200, "held-out examples scored (greedy) at each trainer.eval_every")

    def __post_init__(self):
        last = -1
        for i, stage in enumerate(self.curriculum):
            _check(isinstance(stage, dict) and "until" in stage, f"sft.curriculum[{i}]", "needs an 'until' step")
            _check(stage["until"] > last, f"sft.curriculum[{i}].until", "stages must be in increasing order")
            last = stage["until"]


@dataclass
class Config:
    task: Any = opt({}, "the task's own config (tasks/<name>: Config)")
    model: ModelConfig = opt(ModelConfig(), "policy model")
    algo: AlgoConfig = opt(AlgoConfig(), "advantage estimator and loss")
    rollout: RolloutConfig = opt(RolloutConfig(), "rollout engine and sampling")
    trainer: TrainerConfig = opt(TrainerConfig(), "optimisation, checkpoints, logging")
    eval: EvalConfig = opt(EvalConfig(), "evaluation")
    sft: SFTConfig = opt(SFTConfig(), "supervised warm start (vlrl/sft.py)")


def import_task(cfg_task: DictConfig | dict):
    """The task module named by `task.module`: a dotted name (tasks.gui_grounding) or a path to a
    task folder / .py file outside the package (my_tasks/foo), so a user's task needs no install."""
    module = cfg_task.get("module") if cfg_task is not None else None
    if not module:
        raise ValueError("config 'task.module' is missing: choose a task, e.g. `task=gui_grounding`")
    if is_task_path(module):
        return _import_path(module)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise ValueError(f"config 'task.module': cannot import {module!r} ({e})") from e


def _import_path(module: str):
    path = Path(resolve_path(module))
    file = path / "__init__.py" if path.is_dir() else path
    if not file.exists():
        raise ValueError(f"config 'task.module': no task at {module!r} (looked for {file})")
    # Keyed by the resolved path: two task folders with the same name (copies of a template) stay apart.
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    name = f"vlrl_user_task_{path.stem.replace('-', '_')}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file, submodule_search_locations=[str(path)] if path.is_dir() else None)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def is_task_path(module: str) -> bool:
    """`task.module` names a folder or file (outside the package) rather than a dotted module."""
    return "/" in module or module.endswith(".py")


def task_yaml(module: str) -> Path:
    """Where a path task keeps its config: `FOLDER/task.yaml`, or `NAME.yaml` beside `NAME.py`."""
    path = Path(resolve_path(module))
    return path / "task.yaml" if path.is_dir() or not path.suffix else path.with_suffix(".yaml")


def _split_task_overrides(overrides: list[str]) -> tuple[str | None, list[str], list]:
    """(the task path when `task.module=PATH` names one, the other overrides, the parsed task.* overrides)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    path = next((str(o.value()) for o in parsed if o.key_or_group == "task.module" and is_task_path(str(o.value()))), None)
    if path is None:
        return None, list(overrides), []
    rest = [text for text, o in zip(overrides, parsed) if o.key_or_group != "task" and not o.key_or_group.startswith("task.")]
    mine = [o for o in parsed if o.key_or_group.startswith("task.")]
    return path, rest, mine


def compose(overrides: list[str] | None = None, config_name: str = "config") -> DictConfig:
    """Compose the Hydra tree with command-line style overrides (no chdir, no output dirs).

    `task.module=PATH` (a task folder or .py file anywhere) takes the task's config from the YAML beside it
    (`task_yaml`), or from its Config's defaults when there is none, instead of configs/task/."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.config_store import ConfigStore
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import ConfigCompositionException, OverrideParseException

    # The typed schema under the YAML tree: every field exists (with its default) even when a group's
    # YAML file does not list it, and a wrongly typed override fails at composition.
    ConfigStore.instance().store(name="_schema", node=Config)
    try:
        task_path, overrides, task_overrides = _split_task_overrides(list(overrides or []))
    except OverrideParseException as e:
        raise ValueError(f"invalid override: {e}") from None
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        try:
            raw = hydra_compose(config_name=config_name, overrides=overrides + (["~task"] if task_path else []))
        except ConfigCompositionException as e:
            from vlrl.suggest import composition_error

            raise ValueError(composition_error(e, overrides, lambda rest: compose(rest, config_name))) from None
    if task_path:
        yaml = task_yaml(task_path)
        node = OmegaConf.load(yaml) if yaml.exists() else OmegaConf.create({})
        node.module = task_path
        for o in task_overrides:
            OmegaConf.update(node, o.key_or_group[len("task."):], o.value(), force_add=True)
        with open_dict(raw):
            raw.task = node
    return raw


def validate(raw: DictConfig) -> tuple[Config, Any]:
    """`(cfg, task)`: the typed config (its `task` field the task's own typed Config) and the task behind
    its contract (`vlrl.task.LoadedTask`); errors name the field or the missing task member."""
    from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

    from vlrl.task import load_task

    raw = copy.deepcopy(raw)
    task_raw = raw.get("task")
    task_mod = load_task(import_task(task_raw))
    prefix = ""
    try:
        schema = OmegaConf.structured(Config)
        # A plain container: a node typed by the composition schema would let force-added keys through.
        plain = OmegaConf.to_container(raw, resolve=True)
        with_task = OmegaConf.merge(schema, {k: v for k, v in plain.items() if k != "task"})
        cfg: Config = OmegaConf.to_object(with_task)
        prefix, task_schema = "task.", OmegaConf.structured(task_mod.Config)
        task_cfg = OmegaConf.to_object(OmegaConf.merge(task_schema, task_raw))
    except OmegaConfBaseException as e:
        key = f"{prefix}{getattr(e, 'full_key', None)}"
        if isinstance(e, ConfigKeyError):  # a field the schema does not have
            from vlrl.suggest import unknown_field

            known = OmegaConf.merge(OmegaConf.structured(Config), {"task": OmegaConf.structured(task_mod.Config)})
            raise ValueError(unknown_field(key, known)) from None
        raise ValueError(f"invalid config value for '{key}': {e.msg if hasattr(e, 'msg') else e}") from None
    cfg.task = task_cfg
    return cfg, task_mod


def load(overrides: list[str] | None = None) -> tuple[Config, Any]:
    """Compose + validate in one call: `(cfg, task_module)`."""
    return validate(compose(overrides))


def resolve_path(path: str) -> str:
    """A user path as given if it exists, else relative to the repo root if that exists, else unchanged (hub id)."""
    if os.path.exists(path):
        return path
    candidate = REPO_ROOT / path
    return str(candidate) if candidate.exists() else path
