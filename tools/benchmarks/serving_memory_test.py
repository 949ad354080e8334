"""`zoo benchmark serving-memory`: its table from made-up figures, one real process on a tiny
export (what it reads, not how much), and bad input."""

import pytest

from zoo.tools.benchmarks import harness, serving_memory

MIB = 2 ** 20


def test_the_table_gives_the_models_memory_above_a_process_that_imported_tensorflow():
    runs = [{"imported_rss": i * MIB, "loaded_rss": (i + 10) * MIB, "served_rss": (i + 25) * MIB,
             "peak_rss": (i + 30) * MIB} for i in (300, 310, 900)]
    rows = serving_memory.table([("gcnn-ptb", 3_100_000, "trained", 12.5 * MIB, runs)]).splitlines()
    assert rows[2] == "| `gcnn-ptb` | 3,100,000 | trained | 12.5 | 10.0 | 25.0 | 340.0 |"


@pytest.mark.ci
def test_a_process_reads_its_own_memory_at_each_stage(tmp_path, tiny_model, tiny_lines):
    from tests.model_checks import vocab_model
    from zoo.export import export_saved_model

    model, _ = vocab_model(tiny_model, tiny_lines)
    run = serving_memory.measure(export_saved_model(model, str(tmp_path), "tiny"))
    assert 0 < run["imported_rss"] < run["loaded_rss"] <= run["peak_rss"]
    assert run["served_rss"] <= run["peak_rss"]
    assert harness.directory_bytes(str(tmp_path)) > 0


def test_bad_counts_and_an_empty_list_are_one_sentence():
    with pytest.raises(ValueError, match=r"^--repeats must be at least 1, got 0\.$"):
        serving_memory.main(["--repeats", "0"])
    with pytest.raises(ValueError, match=r"^--presets names no preset; give at least one"):
        serving_memory.main(["--presets", ","])
