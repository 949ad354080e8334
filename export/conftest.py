"""The word-model exports the tests of export/export_test.py, saved_model_test.py and
signatures_test.py call: a GCNN with an adaptive softmax, a tied GCNN, an LSTM baseline and an
LSTM–MoE–LSTM stack, exported once per session (each test file reads the same exports)."""

import os

import pytest
import tensorflow as tf

import zoo.export as export
from tests.export_checks import FAMILIES, discourage_end_of_sentence, vocabulary


@pytest.fixture(scope="session")
def exported(tmp_path_factory, tiny_model):
    """{family: (model, export path)}; the models exported once, to `base/<family>/1`."""
    base = str(tmp_path_factory.mktemp("exports"))
    out = {}
    for family, make in FAMILIES.items():
        model = make(tiny_model)
        model.tokenizer = vocabulary()
        discourage_end_of_sentence(model)
        path = export.export_saved_model(model, base, family)
        assert path == os.path.join(base, family, "1")
        out[family] = (model, path)
    return out


@pytest.fixture(scope="session")
def loaded(exported):
    return {family: tf.saved_model.load(path) for family, (_, path) in exported.items()}
