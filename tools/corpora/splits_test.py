"""The corpora's document splits."""

from zoo.tools.corpora import splits


def test_split_documents_depends_on_each_documents_name_alone():
    docs = [(f"d{i}", ["w " * (i + 1)]) for i in range(50)]
    a = splits.split_documents("src", docs)
    b = splits.split_documents("src", list(reversed(docs)) + [("new", ["a b c"])])
    for split in ("train", "valid", "test"):
        assert {n for n, _ in a[split]} <= {n for n, _ in b[split]} | {n for n, _ in a["test"]} | {n for n, _ in a["valid"]}
    assert [len(splits.split_documents("s", docs[:k])["test"]) > 0 for k in (3, 4, 10)] == [True] * 3
    assert all(splits.split_documents("s", docs[:3])[s] for s in ("train", "valid", "test"))
