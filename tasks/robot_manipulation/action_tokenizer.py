"""Continuous robot actions <-> discrete tokens of a language model's vocabulary (OpenVLA-style).

Each action dimension is normalised to [-1, 1] with per-dataset quantile statistics
(q01 -> -1, q99 -> +1; values beyond are clipped), cut into `n_bins` uniform bins over [-1, 1],
and bin ``b`` becomes token id ``offset + b``. The default offset puts the bins on the LAST
`n_bins` ids of the tokenizer (``len(tokenizer) - n_bins``): ids that carry text, so a response
can be carried as text and re-tokenised (see `text_to_ids`). Decoding takes the bin centre and
un-normalises, so the round-trip error is at most half a bin width in normalised units, i.e.
``(q99 - q01) / (2 * n_bins)`` in action units for a value inside [q01, q99].

The gripper dimension is not normalised: it is binarised to -1 / +1 (encoded as the first / last
bin). `gripper_close_positive` states the convention of the actions you pass in: True (robosuite,
this repo's envs) means +1 closes; False means +1 opens (e.g. OpenVLA's converted datasets), and the
sign is flipped on the way in and out so the tokens always mean "last bin = close".

Statistics live in a small JSON file (`ActionStats.save` / `load`) saved beside a checkpoint, so a
policy is always decoded with the statistics it was trained with.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

import numpy as np


@dataclass
class ActionStats:
    """Per-dimension normalisation statistics of a dataset's actions."""

    q01: list[float]
    q99: list[float]
    mean: list[float] = field(default_factory=list)
    std: list[float] = field(default_factory=list)
    min: list[float] = field(default_factory=list)
    max: list[float] = field(default_factory=list)
    count: int = 0

    @property
    def dim(self) -> int:
        return len(self.q01)

    @classmethod
    def identity(cls, dim: int = 7) -> "ActionStats":
        """q01 = -1, q99 = +1: actions already in [-1, 1] (robosuite's OSC_POSE) are binned as they are."""
        return cls(q01=[-1.0] * dim, q99=[1.0] * dim)

    @classmethod
    def from_actions(cls, actions) -> "ActionStats":
        """Statistics of an [N, D] array of demo actions."""
        a = np.asarray(actions, dtype=np.float64)
        if a.ndim != 2 or len(a) == 0:
            raise ValueError(f"actions must be a non-empty [N, D] array, got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError("actions contain NaN or inf")
        q01, q99 = np.quantile(a, 0.01, axis=0), np.quantile(a, 0.99, axis=0)
        return cls(q01=q01.tolist(), q99=q99.tolist(), mean=a.mean(0).tolist(), std=a.std(0).tolist(),
                   min=a.min(0).tolist(), max=a.max(0).tolist(), count=int(len(a)))

    def save(self, path: str) -> str:
        """Write JSON to `path` (a file, or a directory: `path/action_stats.json`); atomic."""
        if os.path.isdir(path):
            path = os.path.join(path, STATS_FILE)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(asdict(self), f, indent=1)
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str) -> "ActionStats":
        if os.path.isdir(path):
            path = os.path.join(path, STATS_FILE)
        with open(path) as f:
            d = json.load(f)
        if len(d["q01"]) != len(d["q99"]):
            raise ValueError(f"{path}: q01 and q99 have different lengths")
        return cls(**d)


STATS_FILE = "action_stats.json"


class ActionTokenizer:
    """Bins, token ids and (un)normalisation for D-dimensional actions; pure numpy.

    vocab_size: number of ids that carry text (``len(hf_tokenizer)``; not the embedding size, whose
        padded tail ids decode to nothing).
    offset: id of bin 0; None = ``vocab_size - n_bins`` (the last n_bins ids).
    gripper_dim: index of the binarised gripper dimension; None = no gripper.
    """

    def __init__(self, vocab_size: int, stats: ActionStats | None = None, n_bins: int = 256,
                 offset: int | None = None, gripper_dim: int | None = 6, gripper_close_positive: bool = True):
        self.stats = stats or ActionStats.identity()
        self.dim = self.stats.dim
        if n_bins < 2:
            raise ValueError("n_bins must be >= 2")
        self.n_bins = n_bins
        self.offset = vocab_size - n_bins if offset is None else offset
        if self.offset < 0 or self.offset + n_bins > vocab_size:
            raise ValueError(f"action ids [{self.offset}, {self.offset + n_bins}) do not fit a vocabulary of {vocab_size}")
        if gripper_dim is not None and not 0 <= gripper_dim < self.dim:
            raise ValueError(f"gripper_dim {gripper_dim} outside 0..{self.dim - 1}")
        self.gripper_dim = gripper_dim
        self.gripper_sign = 1.0 if gripper_close_positive else -1.0
        self.bin_width = 2.0 / n_bins
        self.centers = -1.0 + (np.arange(n_bins) + 0.5) * self.bin_width
        self._q01 = np.asarray(self.stats.q01, dtype=np.float64)
        self._q99 = np.asarray(self.stats.q99, dtype=np.float64)
        # A constant dimension (q99 == q01) normalises to 0 and decodes to q01.
        self._half = np.maximum((self._q99 - self._q01) / 2.0, 1e-12)
        self._mid = (self._q99 + self._q01) / 2.0

    # --- numbers ---------------------------------------------------------------------------------
    def normalize(self, action) -> np.ndarray:
        """Action units -> [-1, 1] (clipped); the gripper becomes -1 / +1 (+1 = close)."""
        a = self._check(action)
        x = np.clip((a - self._mid) / self._half, -1.0, 1.0)
        if self.gripper_dim is not None:
            g = a[..., self.gripper_dim] * self.gripper_sign
            x[..., self.gripper_dim] = np.where(g > 0, 1.0, -1.0)
        return x

    def unnormalize(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        a = x * self._half + self._mid
        const = self._q99 == self._q01
        a = np.where(const, self._q01, a)
        if self.gripper_dim is not None:
            a[..., self.gripper_dim] = np.where(x[..., self.gripper_dim] > 0, 1.0, -1.0) * self.gripper_sign
        return a

    def to_bins(self, action) -> np.ndarray:
        x = self.normalize(action)
        return np.clip(np.floor((x + 1.0) / self.bin_width), 0, self.n_bins - 1).astype(np.int64)

    def from_bins(self, bins) -> np.ndarray:
        b = np.asarray(bins, dtype=np.int64)
        if np.any((b < 0) | (b >= self.n_bins)):
            raise ValueError(f"bins must be in 0..{self.n_bins - 1}")
        return self.unnormalize(self.centers[b])

    # --- token ids -------------------------------------------------------------------------------
    def encode(self, action) -> list[int]:
        """One action [D] -> D token ids."""
        return (self.to_bins(action) + self.offset).reshape(-1).tolist()

    def decode(self, ids) -> np.ndarray:
        """D token ids -> one action [D]; raises ValueError for a wrong count or a non-action id."""
        ids = np.asarray(list(ids), dtype=np.int64)
        if ids.shape != (self.dim,):
            raise ValueError(f"expected {self.dim} action tokens, got {len(ids)}")
        if not np.all(self.is_action_id(ids)):
            raise ValueError("not an action token id")
        return self.from_bins(ids - self.offset)

    def is_action_id(self, ids):
        ids = np.asarray(ids)
        return (ids >= self.offset) & (ids < self.offset + self.n_bins)

    def allowed_action_ids(self) -> list[int]:
        """The n_bins action ids (for constrained decoding: mask every other id)."""
        return list(range(self.offset, self.offset + self.n_bins))

    def max_error(self) -> np.ndarray:
        """Largest round-trip error per dimension for actions inside [q01, q99] (half a bin, un-normalised)."""
        return self._half * self.bin_width / 2.0

    def _check(self, action) -> np.ndarray:
        a = np.asarray(action, dtype=np.float64)
        if a.shape[-1:] != (self.dim,):
            raise ValueError(f"action must end in {self.dim} values, got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError("action contains NaN or inf")
        return a.copy()


# --- text ------------------------------------------------------------------------------------------
# The rollout engine hands the env the response TEXT (decoded with skip_special_tokens=True), and the
# supervised warm start tokenises the reference answer text. So actions travel as text:
#   ids -> text: hf_tokenizer.decode(ids)
#   text -> ids: re-tokenise with the same tokenizer. When the BPE merges of the concatenated token
#   strings differ from the original ids (e.g. "884" + "885" -> "884885" may re-tokenise differently),
#   fall back to an exact segmentation of the text into action-token strings; it is accepted only if
#   it is the unique segmentation into exactly D action tokens.

def ids_to_text(ids, hf_tokenizer) -> str:
    return hf_tokenizer.decode(list(ids), skip_special_tokens=True)


def text_to_ids(text: str, hf_tokenizer, tok: ActionTokenizer) -> list[int] | None:
    """The D action ids that `text` spells, or None if it does not spell exactly D action tokens."""
    ids = hf_tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) == tok.dim and all(tok.is_action_id(ids)):
        return list(ids)
    return _segment(text, hf_tokenizer, tok)


def _segment(text: str, hf_tokenizer, tok: ActionTokenizer) -> list[int] | None:
    table = _token_strings(hf_tokenizer, tok)
    n, D = len(text), tok.dim
    # ways[i][k]: number of segmentations of text[i:] into exactly k action strings (capped at 2).
    ways = [[0] * (D + 1) for _ in range(n + 1)]
    ways[n][0] = 1
    for i in range(n - 1, -1, -1):
        for s, _ in table.get(text[i], ()):
            j = i + len(s)
            if text.startswith(s, i):
                for k in range(1, D + 1):
                    ways[i][k] = min(2, ways[i][k] + ways[j][k - 1])
    if ways[0][D] != 1:
        return None
    out, i, k = [], 0, D
    while k:
        for s, tid in table[text[i]]:
            if text.startswith(s, i) and ways[i + len(s)][k - 1]:
                out.append(tid)
                i, k = i + len(s), k - 1
                break
    return out


_STRINGS: dict = {}


def _token_strings(hf_tokenizer, tok: ActionTokenizer) -> dict[str, list[tuple[str, int]]]:
    """Decoded string of every action id, indexed by first character (cached per tokenizer + range)."""
    key = (id(hf_tokenizer), tok.offset, tok.n_bins)
    if key not in _STRINGS:
        table: dict[str, list[tuple[str, int]]] = {}
        for tid in tok.allowed_action_ids():
            s = hf_tokenizer.decode([tid], skip_special_tokens=True)
            if s:
                table.setdefault(s[0], []).append((s, tid))
        _STRINGS[key] = table
    return _STRINGS[key]


def response_to_action(ids, tok: ActionTokenizer, eos_ids) -> np.ndarray | None:
    """The action a sampled response spells: D action ids, optionally followed by EOS; else None.

    Prefer this over text: concatenated action-token strings do not always re-tokenise into the
    sampled ids (about 16% of actions are ambiguous with the tiny model's byte-level BPE)."""
    ids = list(ids)
    while ids and ids[-1] in eos_ids:
        ids.pop()
    if len(ids) != tok.dim or not all(tok.is_action_id(ids)):
        return None
    return tok.decode(ids)


def action_to_text(action, hf_tokenizer, tok: ActionTokenizer) -> str:
    return ids_to_text(tok.encode(action), hf_tokenizer)


def text_to_action(text: str, hf_tokenizer, tok: ActionTokenizer) -> np.ndarray | None:
    ids = text_to_ids(text, hf_tokenizer, tok)
    return None if ids is None else tok.decode(ids)
