"""The record of a reproduction run: the command that reproduces it (its JSON writer is zoo.files', tested
in zoo/files_test.py)."""

import pytest

from zoo.tools.reproduce import record


def test_command_line_names_only_what_differs_from_the_defaults():
    assert record.command_line("table4") == "zoo reproduce table4"
    assert record.command_line("figure3", quick=True, out="my results", repeats=2, minutes=1.5) == (
        "zoo reproduce figure3 --quick --out 'my results' --repeats 2 --minutes 1.5")
    assert record.command_line("table4", out=record.DEFAULT_OUT) == "zoo reproduce table4"


@pytest.mark.parametrize("path, kind, want", [
    ("/work/runs52/moe-en-10k-cosine/moe-64-s1", "runs", "runs/moe-en-10k-cosine/moe-64-s1"),
    ("/work/runs/gcnn-en-tech.log", "runs", "runs/gcnn-en-tech.log"),
    ("/work/corpora/en/", "corpora", "corpora/en"),
    ("/tmp/elsewhere/en-tech", "corpora", "corpora/en-tech"),  # no corpora folder: its last name
    ("/srv/runs/a/runs-b/c", "runs", "runs/c"),  # the last folder named runs... counts
])
def test_a_recorded_path_names_no_folder_of_this_machine(path, kind, want):
    assert record.portable(path, kind) == want
