"""`zoo benchmark served-generate`: its table from made-up timings, the baseline directory it
reads, a real side-by-side run of a tiny export against itself (its answers, not its speed), and
bad input."""

import json
import os

import pytest

from zoo.tools.benchmarks import served_generate


def test_the_table_gives_rates_from_medians_and_this_version_as_a_multiple_of_the_baseline():
    runs = lambda *pairs: [{"generate_s": g, "serving_default_s": s, "new_tokens": 100} for g, s in pairs]
    results = {"gcnn-ptb": {"baseline": runs((1.0, 0.5), (2.0, 0.8), (9, 9)),
                            "this version": runs((0.5, 1.0), (0.25, 0.8), (0.1, 0.1))}}
    rows = served_generate.table(results).splitlines()
    assert rows[2] == "| `gcnn-ptb` | 50 | 400 | 8.00× | 80 | 80 | 1.00× |"


def test_the_floor_table_gives_each_side_per_token_and_the_step_alone_as_the_ceiling():
    runs = lambda *g: [{"generate_s": x, "new_tokens": 100} for x in g]
    results = {"lstmp-ptb": {"baseline": runs(0.04, 0.05, 0.06), "this version": runs(0.02, 0.025, 0.03),
                             served_generate.FLOOR: runs(0.01, 0.0125, 0.015)}}
    rows = served_generate.floor_table(results).splitlines()
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
    path = served_generate.floor_export(model, str(tmp_path / "floor"), head_blocks=3)
    assert cut == [3]  # the output layer in the export's blocks while the loop was traced
    loaded = tf.saved_model.load(path).signatures["generate"]
    ids = tf.constant([served_generate.FLOOR_PROMPT], tf.int32)
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
    assert served_generate.baseline_export(str(tmp_path), "gcnn-ptb") == str(tmp_path / "gcnn-ptb" / "2")
    with pytest.raises(ValueError, match=r"^--baseline .* holds no export of lstmp-ptb "):
        served_generate.baseline_export(str(tmp_path), "lstmp-ptb")


@pytest.mark.ci
def test_a_side_by_side_run_of_an_export_against_itself_writes_the_same_text(tmp_path, monkeypatch, capsys,
                                                                             tiny_model, tiny_lines):
    from tests.model_checks import vocab_model
    from zoo.export import export_saved_model

    model, _ = vocab_model(tiny_model, tiny_lines)
    export = export_saved_model(model, str(tmp_path / "base"), "tiny")
    asked = []
    monkeypatch.setattr(served_generate, "exports_of",
                        lambda base, presets, seed, head_blocks: asked.append(head_blocks) or {"tiny": export})
    served_generate.main(["--baseline", str(tmp_path / "base"), "--presets", "tiny", "--repeats", "1", "--calls", "1",
                          "--new-tokens", "3", "--top-k", "5", "--head-blocks", "3", "--json", str(tmp_path / "out.json")])
    assert asked == [3] and json.loads((tmp_path / "out.json").read_text())["head_blocks"] == {"tiny": 1}
    out = capsys.readouterr().out
    assert "both sides wrote the same text: tiny yes" in out
    row = next(line for line in out.splitlines() if line.startswith("| `tiny` |"))
    assert len(row.split("|")) == 9 and row.count("×") == 2
    # --floor: the step alone, timed in the same alternation, a third side
    monkeypatch.setattr(served_generate, "floor_exports", lambda base, presets, seed, blocks: {
        "tiny": served_generate.floor_export(model, os.path.join(base, "floor"), blocks["tiny"])})
    served_generate.main(["--baseline", str(tmp_path / "base"), "--presets", "tiny", "--repeats", "1", "--calls", "1",
                          "--new-tokens", "3", "--top-k", "5", "--floor", "--json", str(tmp_path / "floor.json")])
    record = json.loads((tmp_path / "floor.json").read_text())
    floor = record["results"]["tiny"][served_generate.FLOOR]
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
def test_bad_input_is_one_sentence(argv, message):
    with pytest.raises(ValueError, match=message):
        served_generate.main(argv)
