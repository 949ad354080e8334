"""The King James Bible's books as documents."""

from zoo.tools.corpora import kjv


def test_kjv_books_are_documents_and_verses_lines(monkeypatch):
    text = ("\nGenesis 1\n\n   1 In the beginning God created the heaven and the earth.\n   2 And the earth.\n"
            "\nGenesis 2\n\n   1 Thus the heavens.\n\n1 Samuel 1\n\n   1 Now there was a certain man.\n")
    monkeypatch.setattr(kjv, "bible_text", lambda: text)
    assert list(kjv.documents()) == [
        ("Genesis", ["In the beginning God created the heaven and the earth.", "And the earth.", "Thus the heavens."]),
        ("1 Samuel", ["Now there was a certain man."])]
