"""A Project Gutenberg text's lines without the project's header and footer."""

from zoo.tools.corpora.gutenberg import work_lines


def test_the_header_and_footer_are_cut_and_blank_lines_dropped(tmp_path):
    path = tmp_path / "pg.txt"
    path.write_bytes(b"The Project Gutenberg eBook of X\r\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\r\n\r\n"
                     b"Call me Ishmael.\r\n  \r\nSome years ago\r\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\r\n"
                     b"licence text\r\n")
    assert work_lines(str(path)) == ["Call me Ishmael.", "Some years ago"]


def test_a_text_without_markers_is_kept_whole_and_an_old_footer_still_ends_it(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("one\n\ntwo\n")
    assert work_lines(str(plain)) == ["one", "two"]
    old = tmp_path / "old.txt"
    old.write_text("*** START OF THIS PROJECT GUTENBERG EBOOK ***\nthe text\nEnd of the Project Gutenberg EBook\nafter\n")
    assert work_lines(str(old)) == ["the text"]
