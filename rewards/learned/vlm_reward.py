"""A reward model on the policy's own VLM classes (Qwen2/2.5/3-VL; the tiny embedded one by default).

Input: one or more camera frames + a prompt built from the instruction. Two heads (config `head`):

* ``regression``: an MLP on the final hidden state of the last prompt token -> `n_outputs` numbers.
* ``generative``: the language-model head writes the answer as integer tokens (the tiny tokenizer has
  every integer 0..1023 as one token). Each output is one answer token; a signed value v in
  [-100, 100] is written as the integer v + 100 (one token, no sign token needed), a probability as
  "0"/"1". Reading it back uses the token distribution: the expected value over the integer tokens,
  P("1") for a probability. Outputs after the first are conditioned on the greedy earlier tokens
  (`generate`, so the model really writes its answer).

Frames are patchified in torch (same layout as Qwen2VLImageProcessor, tested) and each distinct
frame of a batch goes through the vision tower once; its features are shared by every row using it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers.modeling_outputs import BaseModelOutputWithPooling

from vlrl.config import REPO_ROOT
from vlrl.encoding import left_pad

OFFSET = 100  # generative: a signed value v is written as the integer token v + OFFSET


PAIR_PROMPT = "Before:<image>After:<image>Task: {instruction}. Progress from before to after?"


@dataclass
class VLMRewardConfig:
    model_path: str = "assets/tiny-qwen2.5-vl"
    """The VLM to build on (a save_pretrained directory; resolved against the repo root if relative)."""
    head: str = "regression"
    """regression (MLP on the last hidden state) or generative (the LM head writes integer tokens)."""
    n_images: int = 2
    """Frames per query: 2 for the progress model (earlier, later), 1 for the task-completion PRM."""
    image_size: int = 84
    """Frames are resized to this square size (a multiple of patch_size * merge_size = 28)."""
    prompt: str = PAIR_PROMPT
    """Prompt template; each <image> is one frame in order, {instruction} the language goal."""
    outputs: tuple[str, ...] = ("delta", "done")
    """Names of the outputs. Signed percent outputs (delta) are tanh-squashed to [-100, 100] by the
    regression head; the others are logits (probabilities after a sigmoid)."""
    signed: tuple[str, ...] = ("delta",)
    """Which outputs are signed percentages (the rest are probabilities)."""
    head_hidden: int = 256
    """Hidden width of the regression MLP."""
    aux_weight: float = 0.0
    """Weight of an auxiliary loss (regression head): each frame's own progress in [0, 1], predicted from
    the hidden state at that frame's <|vision_end|> token (before the instruction: task-independent).
    Labels then carry n_images extra columns after the outputs. A dense signal for the vision tower."""
    reference_frames: int = 0
    """The first this-many images of every query are an in-context reference trajectory (a successful
    episode's frames at 0%..100%, see `reference_prompt`); 0 = no reference."""

    def __post_init__(self):
        if not 0 <= self.reference_frames <= self.n_images - 1:
            raise ValueError(f"reference_frames must be in [0, n_images - 1 = {self.n_images - 1}], "
                             f"got {self.reference_frames}")
        if self.head not in ("regression", "generative"):
            raise ValueError(f"head must be regression or generative, got {self.head!r}")
        if self.image_size % 28:
            raise ValueError(f"image_size must be a multiple of 28, got {self.image_size}")
        if self.prompt.count("<image>") != self.n_images:
            raise ValueError(f"prompt has {self.prompt.count('<image>')} <image> markers, n_images={self.n_images}")
        self.outputs, self.signed = tuple(self.outputs), tuple(self.signed)


def reference_prompt(k: int, base: str = PAIR_PROMPT) -> str:
    """`base` preceded by k reference images labelled with their progress: "Reference:<image>0%<image>50%..."."""
    if k < 2:
        raise ValueError(f"a reference trajectory needs at least 2 frames (start and success), got {k}")
    marks = "".join(f"<image>{round(100 * i / (k - 1))}%" for i in range(k))
    return f"Reference:{marks} {base}"


def reference_config(k: int, **kw) -> "VLMRewardConfig":
    """A progress-model config whose queries show k reference frames before the (before, after) pair."""
    if k == 0:
        return VLMRewardConfig(**kw)
    return VLMRewardConfig(prompt=reference_prompt(k), n_images=2 + k, reference_frames=k, **kw)


def resolve(path: str) -> str:
    if os.path.isabs(path) or os.path.exists(path):
        return path
    return str(REPO_ROOT / path)


def patchify(frames: torch.Tensor, mean, std, patch: int = 14, merge: int = 2, temporal: int = 2) -> torch.Tensor:
    """uint8 [N, H, W, 3] -> pixel_values [N * gh * gw, 3 * temporal * patch * patch] in Qwen-VL's layout."""
    x = frames.permute(0, 3, 1, 2).float() / 255.0
    x = (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    n, c, h, w = x.shape
    gh, gw = h // patch, w // patch
    x = x[:, None].expand(n, temporal, c, h, w)  # a still image is repeated over the temporal patch
    x = x.reshape(n, 1, temporal, c, gh // merge, merge, patch, gw // merge, merge, patch)
    x = x.permute(0, 1, 4, 7, 5, 8, 3, 2, 6, 9)
    return x.reshape(n * gh * gw, c * temporal * patch * patch)


def resize_frames(frames: np.ndarray, size: int) -> torch.Tensor:
    """uint8 [N, H, W, 3] -> uint8 tensor [N, size, size, 3] (bicubic when the size differs)."""
    t = torch.as_tensor(np.ascontiguousarray(frames))
    if t.shape[1] == size and t.shape[2] == size:
        return t
    x = t.permute(0, 3, 1, 2).float()
    x = torch.nn.functional.interpolate(x, size=(size, size), mode="bicubic", align_corners=False, antialias=True)
    return x.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1)


class VLMReward(nn.Module):
    """The VLM + head. `forward(frames, image_index, instructions)` -> raw outputs [B, n_outputs]."""

    def __init__(self, cfg: VLMRewardConfig, vlm=None, processor=None) -> None:
        super().__init__()
        from transformers import AutoModelForImageTextToText, AutoProcessor  # noqa: PLC0415

        self.cfg = cfg
        path = resolve(cfg.model_path)
        self.processor = processor or AutoProcessor.from_pretrained(path)
        self.processor.tokenizer.padding_side = "left"
        self.vlm = vlm or AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32)
        self.vlm.eval()  # no dropout anywhere
        ip = self.processor.image_processor
        self.patch, self.merge = ip.patch_size, ip.merge_size
        self.temporal = getattr(ip, "temporal_patch_size", 2)
        self.mean, self.std = tuple(ip.image_mean), tuple(ip.image_std)
        hidden = self.vlm.config.get_text_config().hidden_size
        n = len(cfg.outputs)
        if cfg.head == "regression":
            self.head = nn.Sequential(nn.Linear(hidden, cfg.head_hidden), nn.SiLU(), nn.Linear(cfg.head_hidden, n))
            if cfg.aux_weight > 0:
                self.aux_head = nn.Sequential(nn.Linear(hidden, cfg.head_hidden), nn.SiLU(), nn.Linear(cfg.head_hidden, 1))
        else:
            self.head = nn.Identity()
            self.int_ids = [self._single_token(str(i)) for i in range(2 * OFFSET + 1)]
            self.bin_ids = [self._single_token("0"), self._single_token("1")]
        self._prompt_cache: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        # Default in-context reference (uint8 [reference_frames, H, W, 3]); saved as reference_frames.npy.
        self.reference: np.ndarray | None = None
        g = cfg.image_size // self.patch
        self.grid = torch.tensor([[1, g, g]])

    def _single_token(self, s: str) -> int:
        ids = self.processor.tokenizer(s, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise ValueError(f"generative head needs {s!r} to be one token (got {ids}): use head=regression")
        return ids[0]

    @property
    def device(self) -> torch.device:
        return next(self.vlm.parameters()).device

    # -- inputs -----------------------------------------------------------------------------------------
    def prompt_ids(self, instruction: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(input_ids [P], mm_token_type_ids [P]) of the chat prompt, cached per instruction."""
        if instruction not in self._prompt_cache:
            parts = self.cfg.prompt.format(instruction=instruction).split("<image>")
            content = []
            for k, part in enumerate(parts):
                if k:
                    content.append({"type": "image"})
                if part:
                    content.append({"type": "text", "text": part})
            text = self.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                                      tokenize=False)
            dummy = [np.zeros((self.cfg.image_size, self.cfg.image_size, 3), np.uint8)] * self.cfg.n_images
            out = self.processor(text=[text], images=dummy, return_tensors="pt")
            mm = out.get("mm_token_type_ids")
            ids = out["input_ids"][0]
            self._prompt_cache[instruction] = (ids, torch.zeros_like(ids) if mm is None else mm[0])
        return self._prompt_cache[instruction]

    def vision_features(self, frames) -> list[torch.Tensor]:
        """Merged vision features per frame (list of [tokens, hidden]) for uint8 frames [U, H, W, 3]."""
        x = resize_frames(np.asarray(frames) if not isinstance(frames, torch.Tensor) else frames.numpy(), self.cfg.image_size)
        pixels = patchify(x, self.mean, self.std, self.patch, self.merge, self.temporal).to(self.device)
        grids = self.grid.repeat(len(x), 1).to(self.device)
        return list(self.vlm.model.get_image_features(pixels, grids, return_dict=True).pooler_output)

    def _batch(self, frames, image_index, instructions, answers: list[list[int]] | None = None):
        """Model inputs for rows: row b shows frames[image_index[b][k]] for its k-th image."""
        feats = self.vision_features(frames)
        seqs, mms = [], []
        for b, instr in enumerate(instructions):
            ids, mm = self.prompt_ids(instr)
            if answers is not None:
                a = torch.tensor(answers[b], dtype=torch.long)
                ids, mm = torch.cat([ids, a]), torch.cat([mm, torch.zeros_like(a)])
            seqs.append(ids)
            mms.append(mm)
        input_ids, attention_mask = left_pad(seqs, self.processor.tokenizer.pad_token_id)
        mm_token_type_ids, _ = left_pad(mms, 0)
        rows = [feats[int(i)] for idx in image_index for i in idx]
        n_img = sum(len(idx) for idx in image_index)
        dev = self.device
        return {
            "input_ids": input_ids.to(dev), "attention_mask": attention_mask.to(dev),
            "mm_token_type_ids": mm_token_type_ids.to(dev), "image_grid_thw": self.grid.repeat(n_img, 1).to(dev),
            "mm_encoder_outputs": {"image": BaseModelOutputWithPooling(pooler_output=rows)},
        }

    # -- forward ----------------------------------------------------------------------------------------
    def forward(self, frames, image_index, instructions, answers: list[list[int]] | None = None, aux: bool = False):
        """Regression: raw outputs [B, n_outputs] (and aux logits [B, n_images] when `aux`). Generative with
        `answers`: logits [B, len(answer), V] of the answer tokens (teacher forcing); without: logits [B, V]
        at the first answer position."""
        inputs = self._batch(frames, image_index, instructions, answers)
        if self.cfg.head == "regression":
            hs = self.vlm.model(**inputs, use_cache=False).last_hidden_state
            out = self.head(hs[:, -1])
            if not aux:
                return out
            end_id = self.vlm.config.vision_end_token_id
            pos = (inputs["input_ids"] == end_id).nonzero()  # row-major: each row's images in order
            h_img = hs[pos[:, 0], pos[:, 1]].view(hs.shape[0], -1, hs.shape[-1])
            return out, self.aux_head(h_img)[..., 0]
        width = len(answers[0]) if answers is not None else 0
        logits = self.vlm(**inputs, use_cache=False, logits_to_keep=width + 1).logits
        return logits[:, :-1] if answers is not None else logits[:, -1]

    # -- labels <-> answers -----------------------------------------------------------------------------
    def answer_ids(self, labels: np.ndarray) -> list[list[int]]:
        """Generative targets: labels [B, n_outputs] (percent for signed outputs, 0/1 otherwise) -> token ids."""
        out = []
        for row in np.asarray(labels, dtype=np.float64):
            ids = []
            for name, v in zip(self.cfg.outputs, row):
                if name in self.cfg.signed:
                    ids.append(self.int_ids[int(np.clip(round(v), -OFFSET, OFFSET)) + OFFSET])
                else:
                    ids.append(self.bin_ids[int(v >= 0.5)])
            out.append(ids)
        return out

    def loss(self, frames, image_index, instructions, labels: np.ndarray, weights: dict[str, float] | None = None,
             huber_delta: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
        """Training loss and the predictions [B, n_outputs] (percent / probabilities, detached)."""
        weights = weights or {}
        y = torch.as_tensor(np.asarray(labels, dtype=np.float32), device=self.device)
        if self.cfg.head == "regression":
            use_aux = self.cfg.aux_weight > 0 and y.shape[1] > len(self.cfg.outputs)
            raw = self(frames, image_index, instructions, aux=use_aux)
            total = 0.0
            if use_aux:
                raw, aux_logits = raw
                aux_y = y[:, len(self.cfg.outputs):]
                total = self.cfg.aux_weight * nn.functional.binary_cross_entropy_with_logits(aux_logits, aux_y)
            preds = []
            for k, name in enumerate(self.cfg.outputs):
                w = weights.get(name, 1.0)
                if name in self.cfg.signed:
                    p = torch.tanh(raw[:, k])  # percent / 100
                    total = total + w * nn.functional.huber_loss(p, y[:, k] / 100.0, delta=huber_delta) / huber_delta
                    preds.append(100.0 * p)
                else:
                    total = total + w * nn.functional.binary_cross_entropy_with_logits(raw[:, k], y[:, k])
                    preds.append(torch.sigmoid(raw[:, k]))
            return total, torch.stack(preds, 1).detach()
        answers = self.answer_ids(labels)
        logits = self(frames, image_index, instructions, answers)  # [B, L, V]
        tgt = torch.tensor(answers, device=self.device)
        total = 0.0
        for k, name in enumerate(self.cfg.outputs):
            total = total + weights.get(name, 1.0) * nn.functional.cross_entropy(logits[:, k].float(), tgt[:, k])
        with torch.no_grad():
            preds = torch.stack([self._read(logits[:, k], name) for k, name in enumerate(self.cfg.outputs)], 1)
        return total, preds

    def _read(self, logits: torch.Tensor, name: str) -> torch.Tensor:
        """Generative: the value an output token distribution stands for (expected integer, or P("1"))."""
        if name in self.cfg.signed:
            p = torch.softmax(logits[:, self.int_ids].float(), -1)
            vals = torch.arange(len(self.int_ids), device=logits.device, dtype=torch.float32) - OFFSET
            return p @ vals
        return torch.softmax(logits[:, self.bin_ids].float(), -1)[:, 1]

    @torch.no_grad()
    def predict(self, frames, image_index, instructions) -> np.ndarray:
        """Predictions [B, n_outputs]: percent for signed outputs, probabilities for the others."""
        if self.cfg.head == "regression":
            raw = self(frames, image_index, instructions)
            cols = [100.0 * torch.tanh(raw[:, k]) if name in self.cfg.signed else torch.sigmoid(raw[:, k])
                    for k, name in enumerate(self.cfg.outputs)]
            return torch.stack(cols, 1).cpu().numpy().astype(np.float64)
        # Generative: the answer is written token by token (greedy); each output's value is read from its
        # token distribution, conditioned on the greedy tokens before it.
        cols, prefix = [], [[] for _ in instructions]
        for k, name in enumerate(self.cfg.outputs):
            if k == 0:
                logits = self(frames, image_index, instructions)
            else:
                # teacher-force the greedy prefix; the appended copy of its last token is a placeholder whose
                # position is dropped by forward(), so [:, -1] is the distribution after the real prefix
                logits = self(frames, image_index, instructions, [p + [p[-1]] for p in prefix])[:, -1]
            cols.append(self._read(logits, name))
            allowed = self.int_ids if name in self.cfg.signed else self.bin_ids
            best = logits[:, allowed].argmax(-1).tolist()
            prefix = [p + [allowed[j]] for p, j in zip(prefix, best)]
        return torch.stack(cols, 1).cpu().numpy().astype(np.float64)

    # -- save / load ------------------------------------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self.vlm.save_pretrained(d, safe_serialization=True)
        self.processor.save_pretrained(d)
        # every non-VLM parameter (head, aux head)
        torch.save({k: v for k, v in self.state_dict().items() if not k.startswith("vlm.")}, d / "reward_head.pt")
        (d / "reward_config.json").write_text(json.dumps(dataclasses.asdict(self.cfg), indent=1))
        if self.reference is not None:
            np.save(d / "reference_frames.npy", np.asarray(self.reference, dtype=np.uint8))

    @classmethod
    def load(cls, directory: str | Path, device: str = "cpu") -> "VLMReward":
        d = Path(directory)
        cfg = VLMRewardConfig(**json.loads((d / "reward_config.json").read_text()))
        cfg = dataclasses.replace(cfg, model_path=str(d))
        m = cls(cfg)
        missing, unexpected = m.load_state_dict(torch.load(d / "reward_head.pt", map_location="cpu", weights_only=True),
                                                strict=False)
        missing = [k for k in missing if not k.startswith("vlm.")]
        if missing or unexpected:
            raise RuntimeError(f"reward head mismatch: missing {missing}, unexpected {unexpected}")
        if (d / "reference_frames.npy").exists():
            m.reference = np.load(d / "reference_frames.npy")
        return m.to(device).eval()
