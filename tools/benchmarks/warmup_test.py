"""`zoo benchmark warmup`'s table from made-up timings (the benchmark itself is not run here)."""

import pytest

from zoo.tools.benchmarks import warmup


def test_the_table_gives_medians_and_the_cold_to_warm_ratio():
    cold = [{"serving_default_s": s, "generate_s": g, "replay_s": 0.0} for s, g in ((0.4, 2.0), (0.5, 3.0), (9, 9))]
    warm = [{"serving_default_s": s, "generate_s": g, "replay_s": r} for s, g, r in ((0.1, 0.2, 1), (0.05, 0.3, 2),
                                                                                     (0.1, 0.1, 3))]
    rows = warmup.table(cold, warm).splitlines()
    assert rows[2] == "| `serving_default`, 8 sentences | 500.0 | 100.0 | 5.0× |"
    assert rows[3] == "| `generate`, 1 prompt, 20 greedy tokens | 3,000.0 | 200.0 | 15.0× |"
    assert rows[4] == "| (replaying the warmup records at load) | — | 2,000 | |"


def test_a_bad_repeat_count_is_one_sentence():
    with pytest.raises(ValueError, match=r"^--repeats must be at least 1, got 0\.$"):
        warmup.main(["--repeats", "0"])


@pytest.mark.ci  # two fresh TensorFlow processes through the harness's protocol
def test_a_fresh_process_replays_the_exports_warmup_records_only_when_asked(tmp_path, tiny_model, tiny_lines):
    from tests.model_checks import vocab_model
    from zoo.export import export_saved_model

    model, _ = vocab_model(tiny_model, tiny_lines)
    export = export_saved_model(model, str(tmp_path), "tiny")
    cold, warm = warmup.measure(export, False), warmup.measure(export, True)
    assert set(cold) == set(warm) == {"load_s", "replay_s", "serving_default_s", "generate_s"}
    assert cold["replay_s"] == 0.0 and warm["replay_s"] > 0.0  # the records were read and answered
