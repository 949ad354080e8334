"""A trained model's tokenizer extended (zoo.models.extend, LanguageModel.extend_tokenizer): for each
output layer (adaptive, full, tied) the old ids keep their rows, the new rows start from the pieces
they replace, text spelt with old pieces only scores as before to within 1e-3 at every position,
and the refusals are one sentence each."""

import numpy as np
import pytest

from zoo.data import SubwordTokenizer
from zoo.data.tokenizers_test import TECHNICAL, corpus, one_sentence
from zoo.models.extend import EPSILON, extend_tokenizer, output_vectors

ADDED = 12
HEADS = {"adaptive": {"cutoffs": [60, 200], "blocks": [[[3, 16]]]}, "full": {}, "tied": {"tie_embeddings": True, "blocks": [[[3, 8]]]}}


@pytest.fixture(scope="module")
def tokenizer():
    return SubwordTokenizer.train(corpus(), 400)


def spread(model):
    """Biases like a unigram model's plus noise, so that the ids' probabilities differ a lot and
    the new rows' share is visible."""
    bias = model.head.head_bias if hasattr(model.head, "head_bias") else model.head.bias
    rng = np.random.default_rng(1)
    bias.assign((-0.02 * np.arange(bias.shape[0]) + rng.normal(0, 1.0, bias.shape[0])).astype("float32"))
    return model


@pytest.fixture(scope="module", params=sorted(HEADS))
def pair(request, tokenizer):
    from conftest import build_tiny_model

    model = spread(build_tiny_model("gcnn", tokenizer=tokenizer, **HEADS[request.param]))
    before = [w.copy() for w in model.get_weights()]
    extended, replaced = extend_tokenizer(model, TECHNICAL, ADDED)
    return request.param, model, extended, replaced, before


def test_the_model_it_came_from_is_unchanged(pair):
    _, model, extended, _, before = pair
    assert extended is not model
    for a, b in zip(model.get_weights(), before, strict=True):
        np.testing.assert_array_equal(a, b)
    assert model.tokenizer.added_pieces == 0 and extended.tokenizer.added_pieces == ADDED


def test_old_ids_keep_their_rows_and_new_embedding_rows_start_from_the_replaced_pieces(pair, tokenizer):
    head, model, extended, replaced, _ = pair
    n = len(tokenizer)
    assert extended.vocabulary_size == n + ADDED
    old, new = model.embedding.embeddings.numpy(), extended.embedding.embeddings.numpy()
    np.testing.assert_array_equal(new[:n], old)
    for row, ids in zip(new[n:], replaced):
        want = old[ids[0]] if head == "tied" else old[ids].mean(axis=0)
        np.testing.assert_allclose(row, want, rtol=1e-6)
    if head == "adaptive":
        assert extended.head.cutoffs == [60, 200, n]
        assert extended.head.tail_widths == [4, 1, 16]  # the new cluster as wide as the hidden state
        np.testing.assert_allclose(extended.head.tail_kernels[2].numpy(),
                                   output_vectors(model.head, [ids[0] for ids in replaced]), rtol=1e-6)


def test_text_without_new_pieces_scores_as_before_at_step_0(pair, tokenizer):
    _, model, extended, _, _ = pair
    n = len(tokenizer)
    lines = [line for line in corpus(60, seed=7) if max(extended.tokenizer.encode(line)) < n]
    assert len(lines) > 40
    worst, mass = 0.0, 0.0
    for line in lines[:20]:
        ids = [tokenizer.encode(line)]
        assert extended.tokenizer.encode(line) == ids[0]
        before = np.asarray(model.log_probs(ids))[0]
        after = np.asarray(extended.log_probs(ids))[0]
        worst = max(worst, float(np.abs(after[:, :n] - before).max()))  # every old id, every position
        mass = max(mass, float(np.exp(after[:, n:]).sum(axis=-1).max()))
    assert worst <= 1e-3 and worst <= np.log1p(EPSILON) + 1e-5, worst
    assert 0 < mass <= EPSILON * (1 + 1e-4), mass  # the new ids take some probability, and no more
    # scores per token too
    for a, b in zip(extended.score(lines[:10]), model.score(lines[:10]), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-3)


def test_text_with_new_pieces_is_read_in_fewer_ids(pair, tokenizer):
    _, model, extended, _, _ = pair
    short = sum(len(ids) for ids in extended.tokenizer.encode_batch(TECHNICAL))
    assert short < 0.8 * sum(len(ids) for ids in tokenizer.encode_batch(TECHNICAL))
    # each new id, where it is the target, starts at most EPSILON likely (it is learned by training)
    ids = extended.tokenizer.encode(TECHNICAL[0])
    scores = np.asarray(extended.score([ids])[0])
    new = np.array(ids[1:]) >= len(tokenizer)
    assert new.any() and np.all(np.isfinite(scores)) and np.all(scores[new] <= np.log(EPSILON) + 1e-4)


def test_the_extended_model_saves_and_loads(pair, tmp_path):
    import zoo

    _, _, extended, _, _ = pair
    loaded = zoo.load(extended.save_to_preset(str(tmp_path / "extended")))
    assert loaded.tokenizer == extended.tokenizer and loaded.tokenizer.added_pieces == ADDED
    ids = [extended.tokenizer.encode(TECHNICAL[0])]
    np.testing.assert_allclose(loaded.log_probs(ids), extended.log_probs(ids), atol=1e-6)


def test_refusals_are_one_sentence(tiny_model, tokenizer, word_tokenizer):
    cases = [
        (tiny_model("gcnn", tokenizer=word_tokenizer), "word tokenizer"),
        (tiny_model("gcnn"), "no tokenizer"),
    ]
    quantized = tiny_model("gcnn", tokenizer=tokenizer)
    quantized.quantize("int8")
    cases.append((quantized, "quantized"))
    cases.append((tiny_model("gcnn", tokenizer=tokenizer, cutoffs=[60, 200], blocks=[[[3, 16]]], head_bias=False), "no head bias"))
    extended = tiny_model("gcnn", tokenizer=tokenizer).extend_tokenizer(TECHNICAL, 3)
    cases.append((extended, "extended already"))
    for model, words in cases:
        with pytest.raises(ValueError) as e:
            model.extend_tokenizer(TECHNICAL, 3)
        one_sentence(str(e.value), words)


def test_a_text_with_nothing_new_returns_the_model_itself(tiny_model, tokenizer):
    model = tiny_model("gcnn", tokenizer=tokenizer)
    log = []
    assert model.extend_tokenizer(["the cat sat on a mat"] * 30, 5, log=log.append) is model
    assert log and "kept as it is" in log[0]
