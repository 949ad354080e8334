"""`zoo benchmark serving-threads`: its table from made-up timings, one real process on a tiny
export (its answers, not its speed), and bad input."""

import pytest

from zoo.tools.benchmarks import serving_threads


def test_the_table_gives_rates_from_medians_and_ratios_to_the_server_defaults():
    results = {"server defaults (0, 0)": [{"generate_s": g, "serving_default_s": s} for g, s in ((1.0, 0.5), (2.0, 0.8), (9, 9))],
               "intra 1, inter 1": [{"generate_s": g, "serving_default_s": s} for g, s in ((0.5, 1.0), (1.0, 1.6), (0.1, 2))]}
    rows = serving_threads.table(results, new_tokens=100).splitlines()
    assert rows[2] == "| server defaults (0, 0) | 50 | 1.00× | 80 | 1.00× |"
    assert rows[3] == "| intra 1, inter 1 | 200 | 4.00× | 40 | 0.50× |"


@pytest.mark.ci
def test_a_process_loads_an_export_as_the_server_does_and_the_threads_never_change_the_answer(
        tmp_path, tiny_model, tiny_lines):
    from tests.model_checks import vocab_model
    from zoo.export import export_saved_model

    model, _ = vocab_model(tiny_model, tiny_lines)
    export = export_saved_model(model, str(tmp_path), "tiny")
    one = serving_threads.measure(export, 1, 1, calls=1, new_tokens=5, top_k=5)
    default = serving_threads.measure(export, 0, 0, calls=1, new_tokens=5, top_k=5)
    assert 1 <= one["new_tokens"] <= 5 and one["completion"].split()
    assert (one["new_tokens"], one["completion"]) == (default["new_tokens"], default["completion"])
    assert one["generate_s"] > 0 and one["serving_default_s"] > 0


@pytest.mark.parametrize("flag", ["--repeats", "--calls", "--new-tokens"])
def test_a_count_below_one_is_one_sentence(flag):
    with pytest.raises(ValueError, match=rf"^{flag} must be at least 1, got 0\.$"):
        serving_threads.main([flag, "0"])
