"""VLM-RM CLIP reward: goal-baseline projection of CLIP image embeddings.

With x the normalised image embedding, g the goal-prompt embedding and b the baseline-prompt
embedding (each prompt embedding normalised, the K prompts averaged, the mean normalised again):

    d = g - b,   P = alpha * d d^T / ||d||^2 + (1 - alpha) * I,   R(x) = 1 - 0.5 * ||(x - g) P||^2

alpha = 0: R = 1 - 0.5 ||x - g||^2 = x . g (cosine similarity); alpha = 1: only the component of
x - g along the goal-baseline direction counts. `projected_reward` needs only torch; `ClipReward`
wraps an open_clip model (any architecture; pretrained weights only when present locally,
`pretrained=None` gives random weights; "tiny-clip" is a ~2M-parameter config for tests).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from rewards.learned.base import FrameRewardModel, LRUCache, cached_batch, frame_key

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)

# Tiny open_clip configs (random weights) for tests and honest baselines: CLIP(embed_dim, vision_cfg, text_cfg).
TINY_CONFIGS = {
    "tiny-clip": {
        "embed_dim": 32,
        "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "head_width": 32, "patch_size": 16},
        "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2},
    },
}


def _unit_mean(e: torch.Tensor) -> torch.Tensor:
    """[D] or [K, D] -> [D]: normalise each row, average, normalise."""
    e = e.reshape(-1, e.shape[-1]) if e.dim() == 1 else e
    e = e / e.norm(dim=-1, keepdim=True)
    m = e.mean(0)
    return m / m.norm()


def projected_reward(image_emb, goal_emb, baseline_emb, alpha: float = 0.5):
    """VLM-RM reward per image: image_emb [N, D]; goal_emb, baseline_emb [D] or [K, D] -> [N].

    Works on torch tensors or numpy arrays (returns the same kind). Image embeddings are normalised
    here, so raw CLIP outputs can be passed. alpha must be in [0, 1].
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    as_numpy = not isinstance(image_emb, torch.Tensor)
    x = torch.as_tensor(np.asarray(image_emb) if as_numpy else image_emb).double()
    if x.dim() == 1:
        x = x[None]
    g = _unit_mean(torch.as_tensor(np.asarray(goal_emb) if not isinstance(goal_emb, torch.Tensor) else goal_emb).double().to(x.device))
    b = _unit_mean(torch.as_tensor(np.asarray(baseline_emb) if not isinstance(baseline_emb, torch.Tensor) else baseline_emb).double().to(x.device))
    x = x / x.norm(dim=-1, keepdim=True)
    d = g - b
    dn2 = float(d @ d)
    y = x - g  # [N, D]
    if dn2 == 0.0:
        proj = torch.zeros_like(y)  # goal == baseline: no direction, only the isotropic part remains
    else:
        proj = (y @ d)[:, None] * d[None] / dn2
    yp = alpha * proj + (1.0 - alpha) * y  # (x - g) P, P symmetric
    r = 1.0 - 0.5 * (yp * yp).sum(-1)
    return r.numpy() if as_numpy else r.to(image_emb.dtype)


def build_open_clip(model_name: str = "ViT-B-32", pretrained: str | None = None, device: str = "cpu"):
    """(model, tokenizer, image_size, mean, std) for an open_clip architecture or a TINY_CONFIGS name.

    `pretrained` is an open_clip tag or a local checkpoint file; None = random weights (nothing is
    downloaded). Tags need the weights in the local cache: without network access they fail loudly.
    """
    import open_clip  # noqa: PLC0415  (optional dependency: pip install -e '.[clip]')

    if model_name in TINY_CONFIGS:
        from open_clip.model import CLIPTextCfg, CLIPVisionCfg  # noqa: PLC0415

        c = TINY_CONFIGS[model_name]
        model = open_clip.CLIP(c["embed_dim"], CLIPVisionCfg(**c["vision_cfg"]), CLIPTextCfg(**c["text_cfg"]))
        if pretrained:
            model.load_state_dict(torch.load(pretrained, map_location="cpu", weights_only=True))
        tokenizer = open_clip.tokenizer.SimpleTokenizer(context_length=c["text_cfg"]["context_length"])
        size, mean, std = c["vision_cfg"]["image_size"], OPENAI_MEAN, OPENAI_STD
    else:
        model = open_clip.create_model(model_name, pretrained=pretrained)
        tokenizer = open_clip.get_tokenizer(model_name)
        pp = getattr(model.visual, "preprocess_cfg", {}) or {}
        size = pp.get("size", getattr(model.visual, "image_size", 224))
        mean, std = pp.get("mean", OPENAI_MEAN), pp.get("std", OPENAI_STD)
    size = size if isinstance(size, int) else int(size[0])
    model.to(device).eval().requires_grad_(False)
    return model, tokenizer, size, tuple(mean), tuple(std)


class ClipReward(FrameRewardModel):
    """CLIP reward per frame: `projected_reward(embed(o_t), goal(instruction), baseline, alpha)`.

    Goal prompts are `goal_templates` filled with the instruction (or `goal_prompts[instruction]`
    when given); baseline prompts are fixed. Text embeddings are cached per prompt set, image
    embeddings per frame hash (LRU), and frames are embedded in batches of `batch_size`.
    """

    def __init__(self, model_name: str = "ViT-B-32", pretrained: str | None = None, alpha: float = 0.5,
                 baseline_prompts: Sequence[str] = ("a robot arm next to a table",),
                 goal_templates: Sequence[str] = ("{instruction}",), goal_prompts: dict[str, Sequence[str]] | None = None,
                 device: str = "cpu", batch_size: int = 64, cache_size: int = 8192, seed: int | None = 0) -> None:
        super().__init__(cache_size)
        if seed is not None:
            torch.manual_seed(seed)  # random-weight models are reproducible
        self.model, self.tokenizer, self.image_size, mean, std = build_open_clip(model_name, pretrained, device)
        self.device = torch.device(device)
        self.mean = torch.tensor(mean, device=self.device).view(1, 3, 1, 1)
        self.std = torch.tensor(std, device=self.device).view(1, 3, 1, 1)
        self.alpha, self.batch_size = alpha, batch_size
        self.baseline_prompts, self.goal_templates = list(baseline_prompts), list(goal_templates)
        self.goal_prompts = dict(goal_prompts or {})
        self._text: dict[tuple[str, ...], torch.Tensor] = {}
        self.image_cache = LRUCache(cache_size)

    # -- embeddings -------------------------------------------------------------------------------------
    def embed_texts(self, prompts: Sequence[str]) -> torch.Tensor:
        """Raw text embeddings [K, D] (cached per prompt tuple)."""
        key = tuple(prompts)
        if key not in self._text:
            with torch.no_grad():
                self._text[key] = self.model.encode_text(self.tokenizer(list(prompts)).to(self.device)).float().cpu()
        return self._text[key]

    def preprocess(self, frames: np.ndarray) -> torch.Tensor:
        """uint8 [N, H, W, 3] -> normalised float [N, 3, S, S] (bicubic resize to the model's size)."""
        x = torch.as_tensor(np.ascontiguousarray(frames), device=self.device).permute(0, 3, 1, 2).float() / 255.0
        if x.shape[-1] != self.image_size or x.shape[-2] != self.image_size:
            x = torch.nn.functional.interpolate(x, size=(self.image_size, self.image_size), mode="bicubic",
                                                align_corners=False, antialias=True).clamp(0, 1)
        return (x - self.mean) / self.std

    def embed_images(self, frames) -> torch.Tensor:
        """Normalised image embeddings [N, D] (LRU-cached by frame hash, batched)."""
        frames = [np.asarray(f) for f in frames]
        keys = [frame_key(f) for f in frames]

        def compute(idx):
            with torch.no_grad():
                e = self.model.encode_image(self.preprocess(np.stack([frames[i] for i in idx]))).float()
            return list((e / e.norm(dim=-1, keepdim=True)).cpu())

        return torch.stack(cached_batch(self.image_cache, keys, compute, self.batch_size))

    def goal_for(self, instruction: str) -> list[str]:
        return list(self.goal_prompts.get(instruction) or [t.format(instruction=instruction) for t in self.goal_templates])

    # -- rewards ----------------------------------------------------------------------------------------
    def _score(self, frames: np.ndarray, instructions: list[str]) -> np.ndarray:
        x = self.embed_images(frames)
        base = self.embed_texts(self.baseline_prompts)
        out = np.zeros(len(frames))
        for instr in set(instructions):
            idx = [i for i, s in enumerate(instructions) if s == instr]
            out[idx] = projected_reward(x[idx].double(), self.embed_texts(self.goal_for(instr)).double(), base.double(),
                                        self.alpha).numpy()
        return out
