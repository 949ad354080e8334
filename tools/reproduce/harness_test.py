"""The harness's resumption of an interrupted run and its refusal of a minutes budget where an
experiment has none (a whole `reproduce`: experiments/table4_test.py)."""

import json
import types

import pytest

from zoo.tools.reproduce import harness


def test_a_partial_record_is_resumed_only_with_the_same_settings(tmp_path):
    path, said = str(tmp_path / "x.partial.json"), []
    assert harness._resumed(path, {"quick": True}, said.append) is None  # nothing to resume
    with open(path, "w") as f:
        json.dump({"settings": {"quick": True}, "units": {"a": 1}}, f)
    assert harness._resumed(path, {"quick": True}, said.append)["units"] == {"a": 1}
    assert harness._resumed(path, {"quick": False}, said.append) is None
    with open(path, "w") as f:
        f.write("{not json")
    assert harness._resumed(path, {"quick": True}, said.append) is None
    assert [s.split("; ")[1] for s in said] == ["starting afresh.", "starting afresh."]
    assert "other settings" in said[0] and "unreadable" in said[1]


def test_minutes_reach_only_an_experiment_timed_by_minutes():
    timed = types.SimpleNamespace(TIMED_BY_MINUTES=True, settings=lambda **kw: kw)
    untimed = types.SimpleNamespace(settings=lambda **kw: kw)
    assert harness._settings(timed, "t", True, None, 2.0) == {"quick": True, "repeats": None, "minutes": 2.0}
    assert harness._settings(untimed, "u", False, 3, None) == {"quick": False, "repeats": 3}
    with pytest.raises(ValueError, match="not of u, whose budget is not set in minutes"):
        harness._settings(untimed, "u", False, None, 2.0)


def test_paper_figures_are_those_figures_that_have_a_paper_value(tmp_path):
    exp = types.SimpleNamespace(
        figures=lambda settings, units: [{"id": "a", "paper": 2.0}, {"id": "b", "paper": None}, {"id": "c"}],
        extras=lambda settings, units: {"extra": 1},
        plot=lambda result, path: open(path, "w").close())
    result = {"experiment": "x", "settings": {}, "units": {}, "plot": "x.png"}
    harness._write(exp, result, str(tmp_path), lambda *a: None)
    with open(tmp_path / "x.json") as f:
        written = json.load(f)
    assert written["paper_figures"] == {"a": 2.0} and written["extra"] == 1
    assert (tmp_path / "x.png").exists()
