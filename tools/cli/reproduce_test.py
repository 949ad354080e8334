"""`zoo reproduce`'s command line: --list, an unknown or missing name, and bad budgets, each one
sentence. (The experiments themselves: tools/reproduce/ and its experiments/ folder.)"""

import pytest

from tests.cli_checks import one_sentence_error
from zoo.tools import cli, reproduce


def test_list_names_each_experiment_with_its_paper_figure(capsys):
    assert cli.main(["reproduce", "--list"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[0] for line in lines] == sorted(reproduce.experiments())
    (table4_line,) = [line for line in lines if line.startswith("table4 ")]
    assert "Table 4" in table4_line and "responsiveness" in table4_line


def test_unknown_experiment_and_missing_name_are_one_sentence(capsys, tmp_path):
    assert cli.main(["reproduce", "table99", "--out", str(tmp_path)]) == 2
    assert "table4" in capsys.readouterr().err
    assert cli.main(["reproduce"]) == 2
    assert "--list" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--repeats", "0"], "--repeats must be at least 1, got 0"),
    (["--minutes", "-1.5"], "--minutes must be a number > 0, got -1.5"),
    (["--redraw"], "table4.json to redraw: run `zoo reproduce table4` first"),
])
def test_bad_budgets_and_a_redraw_of_nothing_are_refused_before_anything_runs(argv, message, capsys, tmp_path):
    assert message in one_sentence_error(["reproduce", "table4", "--out", str(tmp_path / "r"), *argv], capsys)
    assert not (tmp_path / "r").exists()


def test_quick_writes_into_its_own_folder_unless_out_is_given(monkeypatch, tmp_path):
    """Before, `zoo reproduce table4 --quick` wrote its tiny run over results/table4.json, and the
    next `--results` put it into RESULTS.md."""
    import zoo.tools.reproduce as experiments

    calls = []
    monkeypatch.setattr(experiments, "reproduce", lambda name, out, **kw: calls.append((name, out, kw["quick"])))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["reproduce", "table4", "--quick"]) == 0
    assert cli.main(["reproduce", "table4"]) == 0
    assert cli.main(["reproduce", "table4", "--quick", "--out", "mine"]) == 0
    assert calls == [("table4", "runs/reproduce-quick", True), ("table4", "results", False), ("table4", "mine", True)]
    from zoo.tools.reproduce.record import command_line

    assert command_line("table4", quick=True, out="runs/reproduce-quick") == "zoo reproduce table4 --quick"
