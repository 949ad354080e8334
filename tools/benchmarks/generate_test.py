"""`zoo benchmark generate`: its baseline (the previous `generate`, copied) agrees with the new
`generate`, its prompts are what it says, and a `--quick --small` run prints and writes the table."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench():
    from zoo.tools.benchmarks import generate

    return generate


@pytest.fixture(scope="module")
def tiny(bench):
    return {name: bench.build_model(name, small=True) for name in ("gcnn-ptb", "lstmp-ptb")}


@pytest.mark.parametrize("name", ["gcnn-ptb", "lstmp-ptb"])
def test_previous_generate_without_its_stop_writes_what_generate_writes_greedy(bench, tiny, name):
    model = tiny[name]
    prompts = [[1], [1, 7, 9, 4], [1] + list(range(4, 30))]
    new = model.generate(prompts, max_new_tokens=15, temperature=0, stop=None)
    for prompt, row in zip(prompts, new):
        old = bench.previous_generate(model, prompt, 15, 0, None, 0, stop_at_eos=False)
        assert len(old) == len(row) == len(prompt) + 15
        assert old == row
        # with its stop (the previous behaviour): the same ids, cut after the first </s> if any
        eos = model.tokenizer.eos_id
        cut = row[:row.index(eos, len(prompt)) + 1] if eos in row[len(prompt):] else row
        assert bench.previous_generate(model, prompt, 15, 0, None, 0) == cut
    # sampling (numpy draws, reproducible): at temperature 3 </s> comes early, and only the flag
    # lets the loop write past it
    hot = bench.previous_generate(model, [1, 5], 60, 3.0, None, 7, stop_at_eos=False)
    assert hot == bench.previous_generate(model, [1, 5], 60, 3.0, None, 7, stop_at_eos=False)
    assert len(hot) == 62 and eos in hot[2:-1]
    assert bench.previous_generate(model, [1, 5], 60, 3.0, None, 7) == hot[:hot.index(eos, 2) + 1]


def test_prompts_are_the_treebank_test_stream_or_the_vocabulary_cycled(bench, tiny):
    from zoo.data.corpus import read_lines

    model = tiny["gcnn-ptb"]
    vocabulary = model.tokenizer
    ids, source = bench.text_ids(model, 300)
    assert "Penn Treebank" in source and len(ids) == 300 and ids[0] == vocabulary.bos_id
    lines = read_lines("ptb", "test")
    ends = np.flatnonzero(np.asarray(ids) == vocabulary.eos_id)
    assert ends[0] == len(lines[0].split()) + 1 and ends[1] - ends[0] == len(lines[1].split()) + 1
    ids, source = bench.text_ids(model, 100, use_treebank=False)
    assert "cycled" in source and len(ids) == 100 and ids[0] == vocabulary.bos_id
    assert ids[1:47] == list(range(4, 50)) and ids[47] == 4


@pytest.mark.ci
def test_a_quick_small_run_prints_and_writes_the_table(bench, tmp_path, capsys):
    out = tmp_path / "generate.md"
    report = bench.main(["--quick", "--small", "--models", "gcnn-ptb", "--batch", "4", "--out", str(out)])
    written = out.read_text()
    assert written in capsys.readouterr().out
    assert "zoo benchmark generate --quick --small --models gcnn-ptb --batch 4 --out" in written
    for row in ["| `gcnn-ptb` | 1 | previous `generate`", "| 1 | `generate(jit_compile=False)` (the graph loop",
                "| 1 | `generate()` (the default", "| 4 | previous `generate`, the 4 prompts one at a time",
                "| 4 | `generate(jit_compile=False)`", "| 4 | `generate()` (the default", "after a 200-token prompt",
                "| `gcnn-ptb` | "]:
        assert row in written, row
    (result,) = report["results"]
    assert result["batch_prompt_lengths"] == [1, 2, 3, 4] and result["long_prompt_tokens"] == 200
    assert all(len(times) == 2 for times in result["times_s"].values())  # --quick: 2 repeats
    assert set(result["tokens_per_s"]) == {f"{g}_{k}" for g in ("b1", "bN") for k in ("previous", "new", "xla")}
    assert result["tokens_per_s"]["bN_new"] == pytest.approx(20 * 4 / result["median_s"]["bN_new"])
    assert result["vs_previous"]["b1_xla"] == pytest.approx(result["median_s"]["b1_previous"]
                                                            / result["median_s"]["b1_xla"])
    assert result["checks"]["greedy_same_ids"] and result["checks"]["first_tokens_agree"]
    assert "write the same 20 ids: yes" in written
