"""The record of a reproduction run: the command that reproduces it and its atomic JSON write."""

import json
import os

from zoo.tools.reproduce import record


def test_command_line_names_only_what_differs_from_the_defaults():
    assert record.command_line("table4") == "zoo reproduce table4"
    assert record.command_line("figure3", quick=True, out="my results", repeats=2, minutes=1.5) == (
        "zoo reproduce figure3 --quick --out 'my results' --repeats 2 --minutes 1.5")
    assert record.command_line("table4", out=record.DEFAULT_OUT) == "zoo reproduce table4"


def test_write_json_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = str(tmp_path / "run.json")
    record.write_json(path, {"a": 1})
    record.write_json(path, {"b": [1, 2]})
    with open(path) as f:
        assert json.load(f) == {"b": [1, 2]}
    assert os.listdir(tmp_path) == ["run.json"]
