"""Prompt templates for grounding. The answer convention is the same for all of them: a JSON list
``[{"bbox_2d": [x1, y1, x2, y2], "label": "..."}]`` in pixels of the image the model sees."""

from __future__ import annotations

FAST = "Grounding instruction is: {instruction}. Report the bbox coordinates in JSON format."
THINK = (
    "Grounding instruction is: {instruction}. First reason about where the element is inside "
    "<think> </think> tags, then, after </think>, report the bbox coordinates in JSON format."
)
PROMPTS = {"fast": FAST, "think": THINK}
# The warm start's reading examples (config `describe_prob`): the inverse question, box -> name.
DESCRIBE = "Name the element at {box}."


def user_text(instruction: str, prompt: str = "fast") -> str:
    """The text part of the user turn (trailing punctuation of the instruction is dropped)."""
    if prompt not in PROMPTS:
        raise ValueError(f"prompt: must be one of {sorted(PROMPTS)}, got {prompt!r}")
    return PROMPTS[prompt].format(instruction=instruction.strip().rstrip(".!?"))


def build_messages(instruction: str, prompt: str = "fast", image_first: bool = True) -> list[dict]:
    """Chat messages: no system prompt; one user turn with the image placeholder, then the text
    (GUI-G1's order), or the text first when `image_first` is False."""
    return _user_turn(user_text(instruction, prompt), image_first)


def describe_messages(box, image_first: bool = True) -> list[dict]:
    """Chat messages asking for the name of the element at `box` ([x1, y1, x2, y2], model frame)."""
    x1, y1, x2, y2 = (int(round(v)) for v in box)
    return _user_turn(DESCRIBE.format(box=f"[{x1}, {y1}, {x2}, {y2}]"), image_first)


def _user_turn(text: str, image_first: bool = True) -> list[dict]:
    parts = [{"type": "image"}, {"type": "text", "text": text}]
    return [{"role": "user", "content": parts if image_first else parts[::-1]}]
