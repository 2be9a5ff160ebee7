"""The example type every GUI data source returns (its own module: data.py and blocks.py both build them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from PIL import Image


@dataclass
class Example:
    """One grounding example in original pixels."""

    image: Image.Image
    instruction: str
    bbox: list[float]
    metadata: dict = field(default_factory=dict)
