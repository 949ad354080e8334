"""A fake Penn Treebank run for the tests of `zoo benchmark ptb-softmax` and `moe-ptb`: their
models, data and side-by-side training replaced by stand-ins that record what they were asked and
answer made-up numbers, so a test checks the benchmark's own arithmetic and wiring in a moment."""

import types

import keras
import pytest


class FakeModel:
    def __init__(self, preset, overrides, seed_set, step_s, perplexity):
        self.preset, self.overrides, self.seed_set = preset, overrides, seed_set
        self.step_s, self.valid_perplexity = step_s, perplexity
        self.compiled = False

    def compile(self):
        self.compiled = True

    def count_params(self):
        return 1000 + len(self.overrides)

    def perplexity(self, lines, mode):
        assert mode == "stream" and lines == ["valid"]
        return self.valid_perplexity


@pytest.fixture
def fake_ptb_run(monkeypatch):
    """`run.answers`: {preset-or-model-name: (median step seconds, validation perplexity, metrics)}
    to be filled in by the test (keyed by the label the benchmark gives its model); afterwards
    `run.loaded` lists (preset, overrides, seed) per `zoo.load` and `run.trained` the call to
    `train_side_by_side`."""
    import zoo
    import zoo.data as data
    from zoo.data import pipeline
    from zoo.tools.benchmarks import ptb

    run = types.SimpleNamespace(answers={}, loaded=[], trained=None)
    seeds = []
    monkeypatch.setattr(keras.utils, "set_random_seed", lambda seed: seeds.append(seed))

    def load(preset, **overrides):
        run.loaded.append((preset, overrides, seeds[-1] if seeds else None))
        return FakeModel(preset, overrides, seeds[-1] if seeds else None, None, None)

    def train(models, batches, steps, track=()):
        run.trained = {"models": list(models), "batches": batches, "steps": steps, "track": track}
        out = {}
        for label, model in models.items():
            assert model.compiled
            step_s, perplexity, metrics = run.answers[label]
            model.valid_perplexity = perplexity
            out[label] = {"median_step_s": step_s, "metrics": metrics}
        return out

    monkeypatch.setattr(zoo, "load", load)
    monkeypatch.setattr(data, "ptb_tokenizer", lambda: "ptb vocabulary")
    monkeypatch.setattr(data, "read_lines", lambda source, split: [split] if source == "ptb" else None)
    monkeypatch.setattr(pipeline, "stream_dataset", lambda lines, vocab, batch, seq_len, **kw:
                        ("batches", tuple(lines), vocab, batch, seq_len, tuple(sorted(kw.items()))))
    monkeypatch.setattr(ptb, "train_side_by_side", train)
    return run
