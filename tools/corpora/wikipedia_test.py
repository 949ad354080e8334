"""Wikipedia markup to plain paragraphs."""

from zoo.tools.corpora import wikipedia


def test_wikipedia_markup_becomes_plain_paragraphs():
    markup = ("{{Infobox person|name=X|born={{birth date|1900|1|1}}}}\n"
              "'''Ada Lovelace''' was an [[England|English]] [[mathematician]].<ref>A source.</ref> "
              "See [http://example.org the site] <!-- hidden -->.\n"
              "[[File:Ada.jpg|thumb|A [[portrait]]]]\n"
              "== Early life ==\n"
              "{| class=wikitable\n| a || b\n|}\n"
              "* a list item that is not prose\n"
              "She was born in London &amp; died young.\n"
              "[[Category:Mathematicians]]\n")
    assert wikipedia.plain_text(markup) == [
        "Ada Lovelace was an English mathematician. See the site .", "Early life",
        "She was born in London & died young."]
