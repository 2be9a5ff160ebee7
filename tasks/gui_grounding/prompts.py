"""Prompt templates for grounding. The answer convention is the same for all of them: a JSON list
``[{"bbox_2d": [x1, y1, x2, y2], "label": "..."}]`` in pixels of the image the model sees."""

from __future__ import annotations

FAST = "Grounding instruction is: {instruction}. Report the bbox coordinates in JSON format."
THINK = (
    "Grounding instruction is: {instruction}. First reason about where the element is inside "
    "<think> </think> tags, then, after </think>, report the bbox coordinates in JSON format."
)
PROMPTS = {"fast": FAST, "think": THINK}


def user_text(instruction: str, prompt: str = "fast") -> str:
    """The text part of the user turn (trailing punctuation of the instruction is dropped)."""
    if prompt not in PROMPTS:
        raise ValueError(f"prompt: must be one of {sorted(PROMPTS)}, got {prompt!r}")
    return PROMPTS[prompt].format(instruction=instruction.strip().rstrip(".!?"))


def build_messages(instruction: str, prompt: str = "fast") -> list[dict]:
    """Chat messages: no system prompt; one user turn with the image placeholder, then the text."""
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": user_text(instruction, prompt)}]}]
