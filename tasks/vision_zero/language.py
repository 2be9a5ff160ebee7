"""The grounded clue language: short true statements about one image, generated from its pair's scene graph.

A tiny model cannot write free sentences, so each image comes with the phrases that are true of it
(attribute phrases such as "there is a red circle", position phrases "top left is a red circle",
relation phrases "the red circle is left of the blue square"; for charts values and comparisons).
The supervised warm start teaches the model to say one of its own image's phrases; self-play then
has to find out which phrases expose the spy (true of one image only) and which hide it (true of both).
A real checkpoint plays in free text with the same code (`task.clue_language=free`): the phrases are
then used only for the warm start's targets and for the reference decision.

`phrases(record, modified)` works for the grid, chart and CLEVR generators' records
(tasks/vision_zero/pairs/); `false_clues` counts how many of a player's clues are false of an image.
"""

from __future__ import annotations

from rewards.vision_zero import NA, normalise_clue

ROWS = {2: ("top", "bottom"), 3: ("top", "middle", "bottom")}
COLS = {2: ("left", "right"), 3: ("left", "centre", "right")}


def _place(row: int, col: int, n: int) -> str:
    if n in ROWS:
        return f"{ROWS[n][row]} {COLS[n][col]}" if not (n == 3 and row == 1 and col == 1) else "centre"
    return f"row {row + 1} column {col + 1}"


def _unique_names(objs: list[dict], name) -> dict[int, str]:
    """{index: description} of the objects whose description no other object shares."""
    names = [name(o) for o in objs]
    return {i: s for i, s in enumerate(names) if names.count(s) == 1}


def _grid(record: dict, objs: list[dict]) -> list[str]:
    n = record["grid"]
    out = [f"there is a {o['colour']} {o['shape']}" for o in objs]
    out += [f"{_place(o['row'], o['col'], n)} is a {o['colour']} {o['shape']}" for o in objs]
    names = _unique_names(objs, lambda o: f"{o['colour']} {o['shape']}")
    for i, a in names.items():
        for j, b in names.items():
            if objs[i]["row"] == objs[j]["row"] and objs[i]["col"] < objs[j]["col"]:
                out.append(f"the {a} is left of the {b}")
            if objs[i]["col"] == objs[j]["col"] and objs[i]["row"] < objs[j]["row"]:
                out.append(f"the {a} is above the {b}")
    return out


def _chart(record: dict, modified: bool) -> list[str]:
    labels = record["modified_labels" if modified else "labels"]
    values = record["modified_values" if modified else "values"]
    out = [f"there are {len(labels)} items"] + [f"{lab} is {v}" for lab, v in zip(labels, values)]
    top = max(values)
    if values.count(top) == 1:
        out.append(f"{labels[values.index(top)]} is the largest")
    out += [f"{a} is more than {b}" for a, va in zip(labels, values) for b, vb in zip(labels, values) if va > vb]
    return out


def _clevr(objs: list[dict]) -> list[str]:
    out = [f"there is a {o['size']} {o['colour']} {o['material']} {o['shape']}" for o in objs]
    names = _unique_names(objs, lambda o: f"{o['colour']} {o['shape']}")
    for i, a in names.items():
        for j, b in names.items():
            if objs[i]["pixel_center"][0] < objs[j]["pixel_center"][0]:
                out.append(f"the {a} is left of the {b}")
    return out


def phrases(record: dict, modified: bool) -> list[str]:
    """True statements about one image of a pair: the original (`modified=False`) or the spy's image.

    Order is deterministic (scene order); duplicates removed. Unknown generators raise ValueError."""
    gen = record.get("generator")
    key = "modified_objects" if modified else "objects"
    if gen == "grid":
        out = _grid(record, record[key])
    elif gen == "chart":
        out = _chart(record, modified)
    elif gen == "clevr":
        out = _clevr(record[key])
    else:
        raise ValueError(f"no clue language for pairs of generator {gen!r} (grid, chart, clevr)")
    return list(dict.fromkeys(out))


def description(record: dict, modified: bool) -> list[str]:
    """The phrases that together describe one image completely, in scene order: grid "<place> is a <colour>
    <shape>" per object; chart the item count and every value; CLEVR every object's attributes. A target with
    one right answer per image (the clue targets have many), so supervised training on it must see the image."""
    gen = record.get("generator")
    key = "modified_objects" if modified else "objects"
    if gen == "grid":
        return [f"{_place(o['row'], o['col'], record['grid'])} is a {o['colour']} {o['shape']}" for o in record[key]]
    if gen == "chart":
        return _chart(record, modified)[:1 + len(record["labels"])]
    if gen == "clevr":
        return [f"there is a {o['size']} {o['colour']} {o['material']} {o['shape']}" for o in record[key]]
    raise ValueError(f"no clue language for pairs of generator {gen!r} (grid, chart, clevr)")


def look(clue: str, record: dict, modified: bool = False) -> str:
    """What is at a grid position clue's place in one image: its description phrase there, or "<place> is empty";
    any other clue is returned as it is (it names no place to look at)."""
    place, sep, _ = clue.partition(" is a ")
    if not sep or record.get("generator") != "grid":
        return clue
    n = record["grid"]
    if place not in {_place(r, c, n) for r in range(n) for c in range(n)}:
        return clue
    return next((p for p in description(record, modified) if p.startswith(place + " is a ")), f"{place} is empty")


def is_true(clue: str, record: dict, modified: bool) -> bool:
    """Is `clue` (normalised as in rewards.vision_zero) one of the image's phrases?"""
    return normalise_clue(clue) in {normalise_clue(p) for p in phrases(record, modified)}


def false_clues(clues: list[str | None], record: dict) -> int:
    """How many of `clues` are not true of the ORIGINAL image (a missing clue, None, does not count)."""
    return sum(1 for c in clues if c is not None and not is_true(c, record, False))


def reference_decision(clues_by_player: list[list[str | None]], record: dict) -> int | str:
    """What an observer who checks every clue against the original image answers: the one player with
    the most false clues (0-based), or N/A when no clue is false or several players tie."""
    counts = [false_clues(c, record) for c in clues_by_player]
    top = max(counts)
    if top == 0 or counts.count(top) > 1:
        return NA
    return counts.index(top)
