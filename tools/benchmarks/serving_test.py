"""The served-model benchmarks (tools/benchmarks/serving.py): `serving`'s helpers and a tiny
end-to-end run, `served-generate`, `serving-threads`, `serving-memory` and `warmup`: their tables
from made-up figures, their fresh processes on a tiny export (their answers, not their speed), and
bad input. Runs of real processes and exports are in the `ci` tier."""

import itertools
import json
import os

import numpy as np
import pytest
from zoo.data.vocab import SPECIALS, WordTokenizer

from zoo.tools.benchmarks import harness, serving

MIB = 2 ** 20


@pytest.fixture(scope="module")
def bench():
    return serving


def test_sentences_are_20_vocabulary_words_and_reproducible(bench):
    vocabulary = WordTokenizer(list(SPECIALS) + [f"w{i}" for i in range(46)])
    lines = bench.sentences(vocabulary, 64)
    assert len(lines) == 64 and all(len(line.split()) == 20 for line in lines)
    assert all(vocabulary.unk_id not in vocabulary.encode(line) for line in lines)
    assert {w for line in lines for w in line.split()} <= set(vocabulary.tokens[4:])
    assert lines == bench.sentences(vocabulary, 64) and lines != bench.sentences(vocabulary, 64, seed=1)


def test_stress_counts_calls_errors_and_wrong_answers(bench):
    counter, seen = itertools.count(1), []

    def served(texts):
        n = next(counter)  # atomic: every call gets its own number
        seen.append(n)
        if n % 7 == 0:
            raise RuntimeError("boom")
        value = 0.5 if n % 5 == 0 else 0.0
        return {"token_log_probs": np.array([[value, value]]), "perplexity": np.array([1.0])}

    stress = bench.run_stress(served, ["x"], np.array([0.0, 0.0]), threads=3, seconds=0.2)
    assert stress["calls"] == len(seen) > 0
    assert stress["errors"] == sum(1 for n in seen if n % 7 == 0) and stress["first_error"] == "RuntimeError: boom"
    assert stress["wrong_answers"] == sum(1 for n in seen if n % 5 == 0 and n % 7)


@pytest.mark.ci
def test_a_tiny_run_prints_the_table_with_ratios_and_no_errors(bench, capsys):
    out = bench.main(["--small", "--presets", "gcnn-ptb", "--seconds", "1", "--latency-calls", "20",
                         "--batch-calls", "5", "--threads", "4", "--generate-calls", "5", "--new-tokens", "6"])
    printed = capsys.readouterr().out
    assert "SavedModel serving_default" in printed and "ratio SavedModel / in-process" in printed
    (result,) = out["results"]
    assert result["stress"]["errors"] == 0 and result["stress"]["wrong_answers"] == 0
    assert result["stress"]["calls"] > 0 and set(result["ratios"]) == {"latency_p50", "latency_p99", "batch"}
    assert "SavedModel generate (6 new tokens)" in printed and set(result["ratios_generate"]) == {"p50", "p99"}
    assert result["generate_saved"]["calls"] == result["generate_local"]["calls"] == 5


# ---- served-generate
def test_the_generate_table_gives_rates_from_medians_and_this_version_as_a_multiple_of_the_baseline():
    runs = lambda *pairs: [{"generate_s": g, "serving_default_s": s, "new_tokens": 100} for g, s in pairs]
    results = {"gcnn-ptb": {"baseline": runs((1.0, 0.5), (2.0, 0.8), (9, 9)),
                            "this version": runs((0.5, 1.0), (0.25, 0.8), (0.1, 0.1))}}
    rows = serving.generate_table(results).splitlines()
    assert rows[2] == "| `gcnn-ptb` | 50 | 400 | 8.00× | 80 | 80 | 1.00× |"


def test_the_floor_table_gives_each_side_per_token_and_the_step_alone_as_the_ceiling():
    runs = lambda *g: [{"generate_s": x, "new_tokens": 100} for x in g]
    results = {"lstmp-ptb": {"baseline": runs(0.04, 0.05, 0.06), "this version": runs(0.02, 0.025, 0.03),
                             serving.FLOOR: runs(0.01, 0.0125, 0.015)}}
    rows = serving.floor_table(results).splitlines()
    assert rows[2] == "| `lstmp-ptb` | 2,000 (500) | 4,000 (250) | 8,000 (125) | 4.00× | 50% |"


def test_the_floor_runs_the_models_greedy_path_with_the_output_layer_in_blocks(tmp_path, tiny_model, tiny_lines,
                                                                                 monkeypatch):
    """The step alone is the model's own greedy decoding (no ids banned) with the export's blocks
    of the output layer: its last id after n steps is that of an eager loop over `step` and the
    whole output layer."""
    import tensorflow as tf

    from tests.model_checks import vocab_model
    from zoo.models import generation

    model, _ = vocab_model(tiny_model, tiny_lines)
    cut, blocks = [], model.head.blocks_computed_once
    monkeypatch.setattr(model.head, "blocks_computed_once", lambda n: cut.append(n) or blocks(n))
    path = serving.floor_export(model, str(tmp_path / "floor"), head_blocks=3)
    assert cut == [3]  # the output layer in the export's blocks while the loop was traced
    loaded = tf.saved_model.load(path).signatures["generate"]
    ids = tf.constant([serving.FLOOR_PROMPT], tf.int32)
    hidden, state = generation.prefill(model, ids, tf.constant([ids.shape[1]]))
    for n in range(1, 6):
        token = tf.argmax(model.head.log_prob(hidden), -1, output_type=tf.int32)
        hidden, state = model.step(token, state)
        out = loaded(text=tf.constant(["ignored"]), max_new_tokens=tf.constant(n))
        assert out["lengths"].numpy().tolist() == [n]
        assert out["completion"].numpy().tolist() == [str(int(token[0])).encode()]


def test_the_baseline_is_the_newest_complete_version_of_the_preset(tmp_path):
    for version, complete in ((1, True), (2, True), (3, False)):
        os.makedirs(tmp_path / "gcnn-ptb" / str(version))
        if complete:
            (tmp_path / "gcnn-ptb" / str(version) / "saved_model.pb").write_bytes(b"")
    assert serving.baseline_export(str(tmp_path), "gcnn-ptb") == str(tmp_path / "gcnn-ptb" / "2")
    with pytest.raises(ValueError, match=r"^--baseline .* holds no export of lstmp-ptb "):
        serving.baseline_export(str(tmp_path), "lstmp-ptb")


@pytest.mark.ci
def test_a_side_by_side_run_of_an_export_against_itself_writes_the_same_text(tmp_path, monkeypatch, capsys,
                                                                             tiny_model, tiny_lines):
    from tests.model_checks import vocab_model
    from zoo.export import export_saved_model

    model, _ = vocab_model(tiny_model, tiny_lines)
    export = export_saved_model(model, str(tmp_path / "base"), "tiny")
    asked = []

    def exports_of(base, presets, seed, head_blocks, floor=False):  # --floor's: the step alone, a third side
        if floor:
            return {"tiny": serving.floor_export(model, os.path.join(base, "floor"), head_blocks["tiny"])}
        return asked.append(head_blocks) or {"tiny": export}

    monkeypatch.setattr(serving, "exports_of", exports_of)
    serving.served_generate(["--baseline", str(tmp_path / "base"), "--presets", "tiny", "--repeats", "1", "--calls",
                             "1", "--new-tokens", "3", "--top-k", "5", "--head-blocks", "3", "--json",
                             str(tmp_path / "out.json")])
    assert asked == [3] and json.loads((tmp_path / "out.json").read_text())["head_blocks"] == {"tiny": 1}
    out = capsys.readouterr().out
    assert "both sides wrote the same text: tiny yes" in out
    row = next(line for line in out.splitlines() if line.startswith("| `tiny` |"))
    assert len(row.split("|")) == 9 and row.count("×") == 2
    # --floor: the step alone, timed in the same alternation, a third side
    serving.served_generate(["--baseline", str(tmp_path / "base"), "--presets", "tiny", "--repeats", "1", "--calls",
                             "1", "--new-tokens", "3", "--top-k", "5", "--floor", "--json",
                             str(tmp_path / "floor.json")])
    record = json.loads((tmp_path / "floor.json").read_text())
    floor = record["results"]["tiny"][serving.FLOOR]
    assert len(floor) == 1 and floor[0]["new_tokens"] == 3 and "serving_default_s" not in floor[0]
    assert record["same_text"] == {"tiny": True}  # the floor's output is not the text
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| `tiny` |")]
    assert len(rows) == 2 and rows[1].count("×") == 1 and rows[1].endswith("% |")


@pytest.mark.parametrize("argv, message", [
    (["--repeats", "0"], r"^--repeats must be at least 1, got 0\.$"),
    (["--calls", "0"], r"^--calls must be at least 1, got 0\.$"),
    (["--new-tokens", "0"], r"^--new-tokens must be at least 1, got 0\.$"),
    (["--head-blocks", "0"], r"^--head-blocks must be at least 1, got 0\.$"),
    (["--presets", " , "], r"^--presets must name at least one preset, got ' , '\.$"),
    (["--write-exports", "x", "--floor"], r"^--floor times a third side beside a baseline; it does not apply to "),
    ([], r"^--baseline is required: "),
])
def test_bad_served_generate_input_is_one_sentence(argv, message):
    with pytest.raises(ValueError, match=message):
        serving.served_generate(argv)


# ---- serving-threads
def test_the_threads_table_gives_rates_from_medians_and_ratios_to_the_server_defaults():
    runs = lambda *pairs: [{"generate_s": g, "serving_default_s": s} for g, s in pairs]
    results = {"server defaults (0, 0)": runs((1.0, 0.5), (2.0, 0.8), (9, 9)),
               "intra 1, inter 1": runs((0.5, 1.0), (1.0, 1.6), (0.1, 2))}
    rows = serving.threads_table(results, new_tokens=100).splitlines()
    assert rows[2] == "| server defaults (0, 0) | 50 | 1.00× | 80 | 1.00× |"
    assert rows[3] == "| intra 1, inter 1 | 200 | 4.00× | 40 | 0.50× |"


@pytest.mark.ci
def test_a_process_loads_an_export_as_the_server_does_and_the_threads_never_change_the_answer(
        tmp_path, tiny_model, tiny_lines):
    from tests.model_checks import vocab_model
    from zoo.export import export_saved_model

    model, _ = vocab_model(tiny_model, tiny_lines)
    export = export_saved_model(model, str(tmp_path), "tiny")
    one = serving.session_run(export, 1, 1, calls=1, new_tokens=5, top_k=5)
    default = serving.session_run(export, 0, 0, calls=1, new_tokens=5, top_k=5)
    assert 1 <= one["new_tokens"] <= 5 and one["completion"].split()
    assert (one["new_tokens"], one["completion"]) == (default["new_tokens"], default["completion"])
    assert one["generate_s"] > 0 and one["serving_default_s"] > 0


@pytest.mark.parametrize("flag", ["--repeats", "--calls", "--new-tokens"])
def test_a_thread_setting_count_below_one_is_one_sentence(flag):
    with pytest.raises(ValueError, match=rf"^{flag} must be at least 1, got 0\.$"):
        serving.serving_threads([flag, "0"])


# ---- serving-memory
def test_the_memory_table_gives_the_models_memory_above_a_process_that_imported_tensorflow():
    runs = [{"imported_rss": i * MIB, "loaded_rss": (i + 10) * MIB, "served_rss": (i + 25) * MIB,
             "peak_rss": (i + 30) * MIB} for i in (300, 310, 900)]
    rows = serving.memory_table([("gcnn-ptb", 3_100_000, "trained", 12.5 * MIB, runs)]).splitlines()
    assert rows[2] == "| `gcnn-ptb` | 3,100,000 | trained | 12.5 | 10.0 | 25.0 | 340.0 |"


@pytest.mark.ci
def test_a_process_reads_its_own_memory_at_each_stage(tmp_path, tiny_model, tiny_lines):
    from tests.model_checks import vocab_model
    from zoo.export import export_saved_model

    model, _ = vocab_model(tiny_model, tiny_lines)
    run = serving.memory_run(export_saved_model(model, str(tmp_path), "tiny"))
    assert 0 < run["imported_rss"] < run["loaded_rss"] <= run["peak_rss"]
    assert run["served_rss"] <= run["peak_rss"]
    assert harness.directory_bytes(str(tmp_path)) > 0


def test_bad_memory_counts_and_an_empty_list_are_one_sentence():
    with pytest.raises(ValueError, match=r"^--repeats must be at least 1, got 0\.$"):
        serving.serving_memory(["--repeats", "0"])
    with pytest.raises(ValueError, match=r"^--presets names no preset; give at least one"):
        serving.serving_memory(["--presets", ","])


# ---- warmup
def test_the_warmup_table_gives_medians_and_the_cold_to_warm_ratio():
    cold = [{"serving_default_s": s, "generate_s": g, "replay_s": 0.0} for s, g in ((0.4, 2.0), (0.5, 3.0), (9, 9))]
    warm = [{"serving_default_s": s, "generate_s": g, "replay_s": r} for s, g, r in ((0.1, 0.2, 1), (0.05, 0.3, 2),
                                                                                     (0.1, 0.1, 3))]
    rows = serving.warmup_table(cold, warm).splitlines()
    assert rows[2] == "| `serving_default`, 8 sentences | 500.0 | 100.0 | 5.0× |"
    assert rows[3] == "| `generate`, 1 prompt, 20 greedy tokens | 3,000.0 | 200.0 | 15.0× |"
    assert rows[4] == "| (replaying the warmup records at load) | — | 2,000 | |"


def test_a_bad_warmup_repeat_count_is_one_sentence():
    with pytest.raises(ValueError, match=r"^--repeats must be at least 1, got 0\.$"):
        serving.warmup(["--repeats", "0"])


@pytest.mark.ci  # two fresh TensorFlow processes through the harness's protocol
def test_a_fresh_process_replays_the_exports_warmup_records_only_when_asked(tmp_path, tiny_model, tiny_lines):
    from tests.model_checks import vocab_model
    from zoo.export import export_saved_model

    model, _ = vocab_model(tiny_model, tiny_lines)
    export = export_saved_model(model, str(tmp_path), "tiny")
    cold, warm = serving.first_calls(export), serving.first_calls(export, True)
    assert set(cold) == set(warm) == {"load_s", "replay_s", "serving_default_s", "generate_s"}
    assert cold["replay_s"] == 0.0 and warm["replay_s"] > 0.0  # the records were read and answered
