"""The record of a reproduction run: the command that reproduces it (its JSON writer is zoo.files', tested
in zoo/files_test.py)."""

from zoo.tools.reproduce import record


def test_command_line_names_only_what_differs_from_the_defaults():
    assert record.command_line("table4") == "zoo reproduce table4"
    assert record.command_line("figure3", quick=True, out="my results", repeats=2, minutes=1.5) == (
        "zoo reproduce figure3 --quick --out 'my results' --repeats 2 --minutes 1.5")
    assert record.command_line("table4", out=record.DEFAULT_OUT) == "zoo reproduce table4"
