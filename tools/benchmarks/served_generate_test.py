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


@pytest.mark.parametrize("argv, message", [
    (["--repeats", "0"], r"^--repeats must be at least 1, got 0\.$"),
    (["--calls", "0"], r"^--calls must be at least 1, got 0\.$"),
    (["--new-tokens", "0"], r"^--new-tokens must be at least 1, got 0\.$"),
    (["--head-blocks", "0"], r"^--head-blocks must be at least 1, got 0\.$"),
    (["--presets", " , "], r"^--presets must name at least one preset, got ' , '\.$"),
    ([], r"^--baseline is required: "),
])
def test_bad_input_is_one_sentence(argv, message):
    with pytest.raises(ValueError, match=message):
        served_generate.main(argv)
