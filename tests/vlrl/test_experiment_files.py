import json

import pytest

from vlrl.cli import method_overrides
from vlrl.provenance import write_comparison


def test_method_overrides_group_by_method_and_name_a_bad_item():
    assert method_overrides(["a:x=1", "b:y=2", "a:z=3"], ["a", "b"]) == {"a": ["x=1", "z=3"], "b": ["y=2"]}
    assert method_overrides([], ["a"]) == {}
    for bad in ("c:x=1", "a-x=1", "a:x"):  # a method not run, no colon, no '='
        with pytest.raises(ValueError, match=repr(bad).replace("(", r"\(")):
            method_overrides([bad], ["a", "b"])


def test_write_comparison_writes_every_file_in_every_folder(tmp_path):
    rows = {"grpo": {"seed": 3, "after": 0.5}, "sft": {"seed": 3, "after": 0.6}}
    write_comparison(rows, "| table |\n", {"command": ["x"]}, tmp_path / "a", None, tmp_path / "b")
    for folder in ("a", "b"):
        assert json.loads((tmp_path / folder / "sft_seed3.json").read_text()) == {"seed": 3, "after": 0.6}
        assert json.loads((tmp_path / folder / "compare.json").read_text()) == {"command": ["x"], "rows": rows}
        assert (tmp_path / folder / "table.md").read_text() == "| table |\n"
