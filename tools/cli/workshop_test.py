"""`zoo benchmark` and `zoo reproduce` where the workshop, or a package it needs, is not installed:
one sentence naming what is missing and what to install, `zoo --help` still works, and a failure
inside the workshop is not disguised as its absence. (The real non-editable install: .ci/install_check.)"""

import sys

import pytest

from zoo.tools.cli import main, parser, workshop

ONE_SENTENCE = "is part of the zoo's workshop, not installed here"


def test_a_missing_room_or_dependency_is_one_sentence_naming_the_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "zoo.tools.benchmarks", None)  # as after a non-editable `pip install .`
    assert main(["benchmark", "moe"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ONE_SENTENCE in err and "(its code is missing)" in err
    assert "pip install -e '.[workshop]'" in err and "pip install ./workshop" in err
    with pytest.raises(SystemExit):  # the help says the same instead of the list of names
        parser().parse_args(["benchmark", "--help"])
    assert "zoo benchmark` is part of the zoo's workshop" in "".join(capsys.readouterr().out.split("\n"))
    monkeypatch.delitem(sys.modules, "zoo.tools.benchmarks")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # the code is here, a dependency is not
    assert main(["reproduce", "--list"]) == 2
    err = capsys.readouterr().err
    assert "`zoo reproduce` " + ONE_SENTENCE + " (its matplotlib is missing)" in err


def test_the_moe_benchmark_names_tf_models_official_when_it_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "official", None)
    with pytest.raises(workshop.WorkshopNotInstalled, match=r"\(its tf-models-official is missing\): pip install"):
        workshop.dependency("official", "zoo benchmark moe --models official")


def test_a_failure_inside_the_workshop_is_not_taken_for_its_absence(monkeypatch):
    monkeypatch.setitem(sys.modules, "zoo.tools.reproduce", None)
    monkeypatch.setitem(sys.modules, "some_broken_import", None)

    def broken(name):
        import some_broken_import  # noqa: F401

    monkeypatch.setattr(workshop.importlib, "import_module", broken)
    with pytest.raises(ModuleNotFoundError) as info:
        workshop.room("reproduce", "zoo reproduce")
    assert not isinstance(info.value, workshop.WorkshopNotInstalled) and info.value.name == "some_broken_import"


def test_the_workshop_is_here_in_a_checkout():
    assert "moe" in workshop.room("benchmarks", "zoo benchmark").names()
    from zoo.tools.reproduce import record

    assert (record.DEFAULT_OUT, record.QUICK_OUT) == ("results", "runs/reproduce-quick")
