"""Reading a corpus (zoo/data/corpus.py): the treebank, a directory of splits or one file, with
one-sentence errors, and the share of words a closed vocabulary reads as <unk>."""

import pytest

from zoo.data import CharTokenizer, WordTokenizer, read_lines
from zoo.data.corpus import read_file_lines


# ---- corpora -----------------------------------------------------------------------------
def test_read_ptb_valid():
    lines = read_lines("ptb", "valid")
    assert len(lines) == 3370
    assert all(line == line.strip() and line for line in lines)
    assert read_lines("ptb", "validation") == lines


def test_read_lines_missing_path(tmp_path):
    missing = str(tmp_path / "nope.txt")
    with pytest.raises(ValueError, match=r"does not exist"):
        read_lines(missing)


def test_read_lines_empty_file(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n\n")
    with pytest.raises(ValueError, match=r"is empty"):
        read_lines(str(empty))


def test_read_lines_directory_and_file_splits(tmp_path):
    (tmp_path / "train.txt").write_text("a b\n\n c \n")
    (tmp_path / "valid.txt").write_text("d\n")
    assert read_lines(str(tmp_path), "train") == ["a b", "c"]
    assert read_lines(str(tmp_path), "valid") == ["d"]
    with pytest.raises(ValueError, match="No test file"):
        read_lines(str(tmp_path), "test")
    with pytest.raises(ValueError, match="Unknown split"):
        read_lines(str(tmp_path), "trian")
    single = tmp_path / "all.txt"
    single.write_text("\n".join(f"line {i}" for i in range(40)))
    assert read_lines(str(single), "valid") == ["line 0", "line 20"]
    assert read_lines(str(single), "test") == ["line 10", "line 30"]
    assert len(read_lines(str(single), "train")) == 36


def test_read_lines_refuses_bytes_that_are_not_utf8_naming_line_and_byte(tmp_path):
    path = tmp_path / "train.txt"
    path.write_bytes("caf\u00e9 ok\nfine line\nbad \xe9t\xe9 here\n".encode("utf-8").replace(b"\xc3\xa9t", b"\xe9t"))
    with pytest.raises(ValueError) as error:
        read_lines(str(tmp_path), "train")
    message = str(error.value)
    assert message.startswith(f"The corpus file {path} is not UTF-8: line 3, byte 5 is 0xe9")
    assert "iconv" in message and "\n" not in message


def test_a_leading_byte_order_mark_is_no_part_of_the_text(tmp_path):
    # Windows editors start UTF-8 files with U+FEFF, which would be scored as 3 byte pieces
    (tmp_path / "train.txt").write_bytes("\ufeffthe first line\nthe second \ufeff line\n".encode("utf-8"))
    assert read_lines(str(tmp_path), "train") == ["the first line", "the second \ufeff line"]
    assert read_file_lines(str(tmp_path / "train.txt")) == ["the first line", "the second \ufeff line"]
    assert read_file_lines(str(tmp_path / "train.txt"), keep_empty=True) == ["the first line", "the second \ufeff line"]


def test_read_lines_drops_lines_of_control_characters_and_says_when_none_is_left(tmp_path):
    (tmp_path / "train.txt").write_text("\x00\x01\n\x07 \x1b\n ok \u200b\n")
    assert read_lines(str(tmp_path), "train") == ["ok \u200b"]
    (tmp_path / "valid.txt").write_text("\x00\x01\n\t\x07\n\n")
    with pytest.raises(ValueError, match=r"is empty: it has no usable line \(every line is blank or only control"):
        read_lines(str(tmp_path), "valid")


def test_unknown_share_counts_the_words_a_closed_vocabulary_reads_as_unk():
    from zoo.data.corpus import unknown_note, unknown_share

    vocab = WordTokenizer.build(["the cat sat", "the dog"])
    # 2 of 8 words are not in the vocabulary, and "<unk>" written in the text is one too
    assert unknown_share(["the cat flew", "a dog sat <unk> the"], vocab) == 3 / 8
    assert unknown_share(["the cat"], vocab) == 0.0
    assert unknown_share(["the cat"], CharTokenizer.build(["the cat"])) is None
    assert unknown_note(3 / 8).startswith("37.50% of the words are <unk>") and unknown_note(None) == ""
