"""`zoo presets`: one line per preset with its description, its count with `--params`, and a note
where trained weights ship."""

import argparse

from zoo import registry
from zoo.tools.cli import presets
from zoo.weights import TRAINED


def _lines(capsys, params=False):
    presets.run(argparse.Namespace(params=params))
    return {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}


def test_one_line_per_preset_and_the_trained_ones_say_so(capsys):
    lines = _lines(capsys)
    assert set(lines) == set(registry.PRESETS)
    for name, line in lines.items():
        assert registry.PRESETS[name].description in line
        assert ("Trained weights ship" in line) == (name in TRAINED), name


def test_params_prints_the_count_beside_the_name(capsys, monkeypatch):
    monkeypatch.setattr(registry, "count_params", lambda name: 1_234_567 if name == "gcnn-ptb" else 1)
    assert _lines(capsys, params=True)["gcnn-ptb"].split()[1] == "1,234,567"
