"""`zoo presets`: one line per preset with its description, its count with `--params`, and a note
where trained weights ship."""

import argparse

import pytest

import zoo
from zoo import registry
from zoo.tools.cli import main, presets
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


# `zoo presets --params` of the release before counts were read off the layers' own shapes (they
# were a hand-written mirror of the layers then); docs/presets.md's tables print these.
PARAMETER_COUNTS = {
    "gcnn-13": 458_502_544, "gcnn-14b": 418_745_939, "gcnn-9": 170_008_871, "gcnn-8b": 182_492_931,
    "gcnn-8": 131_782_893, "gcnn-14": 223_498_623, "gcnn-ptb": 3_096_850, "lstm-ptb": 6_181_650,
    "rnn-char": 313_920, "moe-4": 433_585_419, "moe-32": 463_017_227, "moe-256": 698_471_691,
    "moe-256-h": 698_488_075, "moe-1024-h": 1_505_760_523, "moe-4096-h": 4_734_850_315,
    "moe-34m": 5_167_555_331, "moe-143m": 5_223_940_867, "moe-1-wide": 433_579_787,
    "moe-1-deep": 433_579_787, "4xlstm-512": 433_579_275, "lstm-2048-512": 434_627_851,
    "lstm-moe-ptb": 10_408_722, "lstm-wide-ptb": 6_707_218, "gcnn-moe-ptb": 4_161_810,
    "lstmp-ptb": 3_162_386, "gcnn-en": 8_390_866,
}


@pytest.mark.ci
def test_presets_params_prints_every_preset_with_its_unchanged_count(capsys):
    assert main(["presets", "--params"]) == 0
    lines = capsys.readouterr().out.strip().split("\n")
    assert [l.split()[0] for l in lines] == list(zoo.presets())
    counts = {l.split()[0]: int(l.split()[1].replace(",", "")) for l in lines}
    assert {name: counts[name] for name in PARAMETER_COUNTS} == PARAMETER_COUNTS
    assert counts["gcnn-ptb"] == zoo.load("gcnn-ptb").count_params()


@pytest.mark.parametrize("argv, command", [(["generate", "gcnn-ptb", "the", "--top_k", "5"], "zoo generate"),
                                           (["presets", "--x"], "zoo presets"),
                                           (["convert", "fairseq", "a.pt", "--dictionary", "d", "--out", "o", "--y"],
                                            "zoo convert fairseq"),
                                           (["--bogus", "presets"], "zoo"),  # a flag before the subcommand: zoo's
                                           (["convert", "--q", "fairseq", "a.pt", "--dictionary", "d", "--out", "o"],
                                            "zoo convert")])
def test_an_unknown_flag_is_told_with_the_subcommands_usage(argv, command, capsys):
    """Before, the top-level `zoo` usage was printed, which lists no subcommand's flags."""
    from zoo.tools.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.startswith(f"usage: {command} ") and f"{command}: error: unrecognized arguments: " in err
