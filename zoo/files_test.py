"""The atomic JSON writer: a round trip, a replaced file, and the old file intact when a write fails."""

import json
import os

import pytest

from zoo.files import write_json


def test_write_json_round_trips_and_replaces_the_file_leaving_no_temporary(tmp_path):
    path = tmp_path / "r.json"
    write_json(path, {"a": 1})
    write_json(path, {"b": [1, 2], "word": "×"}, indent=2, ensure_ascii=False)
    assert json.loads(path.read_text(encoding="utf-8")) == {"b": [1, 2], "word": "×"}
    assert path.read_text(encoding="utf-8") == '{\n  "b": [\n    1,\n    2\n  ],\n  "word": "×"\n}\n'
    assert os.listdir(tmp_path) == ["r.json"]


def test_a_failed_write_leaves_the_old_file_intact_and_no_temporary(tmp_path):
    path = tmp_path / "r.json"
    write_json(path, {"kept": True})
    before = path.read_bytes()
    with pytest.raises(TypeError, match="not JSON serializable"):
        write_json(path, {"half": [1, 2, object()]})  # json.dump has written part of it when it fails
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["r.json"]
