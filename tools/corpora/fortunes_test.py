"""The fortune files as documents."""

import pytest

from zoo.tools.corpora import fortunes


def test_fortunes_are_documents_of_one_line_each(tmp_path, monkeypatch):
    folder = tmp_path / "fortunes"
    folder.mkdir()
    (folder / "wisdom").write_text("Drain the moat.\n%\nA critic is a man who creates nothing\n\tand judges.\n"
                                   "\t\t-- Robert Heinlein\n%\n%\n  \n%\nLast, with no closing mark.\n")
    (folder / "wisdom.dat").write_bytes(b"\x00\x02")
    (folder / "wisdom.u8").symlink_to(folder / "wisdom")
    (folder / "ascii-art").write_text("  /\\_/\\\n ( o.o )\n%\n")
    monkeypatch.setenv("ZOO_FORTUNES_DIR", str(folder))
    assert list(fortunes.documents()) == [
        ("wisdom/0", ["Drain the moat."]),
        ("wisdom/1", ["A critic is a man who creates nothing and judges. -- Robert Heinlein"]),
        ("wisdom/2", ["Last, with no closing mark."])]
    monkeypatch.setenv("ZOO_FORTUNES_DIR", str(tmp_path / "none"))
    with pytest.raises(ValueError, match="run `apt-get install fortunes` first"):
        list(fortunes.documents())
