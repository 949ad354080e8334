"""`Inference`, what every family answers: `decode_step` one token at a time equals `log_probs`
for every family; an out-of-range or non-integer id is refused by every entry point; `score` of
text equals `log_probs` of its ids; sentence perplexity is `score`'s; stream perplexity is exact
for a GCNN whatever the window; bad modes and empty data are refused."""

import math

import numpy as np
import pytest

from tests.model_checks import vocab_model

DECODERS = {
    "gcnn-bottleneck": ("gcnn", {}),
    "gcnn-adaptive": ("gcnn", {"blocks": [[[3, 16]], [[1, 4], [3, 4], [1, 16]]], "cutoffs": [10, 30]}),
    "gcnn-tied": ("gcnn", {"blocks": [[[3, 8]], [[2, 8]]], "tie_embeddings": True, "embedding_dropout": 0.3,
                           "dropout": 0.2}),
    "lstm": ("lstm", {}),
    "lstmp": ("lstmp", {}),
    "rnn": ("rnn", {}),
    "moe": ("moe", {}),
}


@pytest.mark.parametrize("kind", sorted(DECODERS))
def test_decode_step_matches_log_probs(tiny_model, kind):
    family, overrides = DECODERS[kind]
    model = tiny_model(family, **overrides)
    ids = np.random.default_rng(1).integers(0, 50, size=(2, 40))
    full = model.log_probs(ids)
    state, steps = None, []
    for t in range(ids.shape[1]):
        log_probs, state = model.decode_step(ids[:, t], state)
        steps.append(np.asarray(log_probs))
    np.testing.assert_allclose(np.stack(steps, axis=1), full, rtol=0, atol=1e-5)


@pytest.mark.ci
@pytest.mark.parametrize("bad", [50, -1])
@pytest.mark.parametrize("kind", ["gcnn", "lstm"])
def test_out_of_range_ids_raise(tiny_model, kind, bad):
    model = tiny_model(kind)
    message = rf"Token id {bad} is outside the vocabulary.*\[0, 49\]"
    with pytest.raises(ValueError, match=message):
        model.log_probs([[4, 5, bad, 6]])
    with pytest.raises(ValueError, match=message):
        model.decode_step([bad])
    with pytest.raises(ValueError, match=message):
        model.score([[1, 5, bad, 2]])
    with pytest.raises(ValueError, match=message):
        model.generate([4, bad], max_new_tokens=2)
    with pytest.raises(ValueError, match="must be integers"):
        model.log_probs([[1.5, 2.0]])
    assert model.generate([], max_new_tokens=2, temperature=0)[0] == 1  # an empty prompt starts from <s>
    with pytest.raises(ValueError, match=r"\[batch, time\], got an array of shape \(1, 2, 2\)"):
        model.log_probs([[[4, 5], [6, 7]]])
    # the largest valid id is fine
    assert model.log_probs([[0, 49]]).shape == (1, 2, 50)


@pytest.mark.parametrize("kind", ["gcnn", "gcnn-adaptive", "lstm"])
def test_sentence_perplexity_matches_score(tiny_model, tiny_lines, kind):
    model, lines = vocab_model(tiny_model, tiny_lines, kind)
    scores = model.score(lines)
    assert [len(s) for s in scores] == [len(line.split()) + 1 for line in lines]
    expected = math.exp(-sum(float(s.sum()) for s in scores) / sum(len(s) for s in scores))
    got = model.perplexity(lines, mode="sentence", batch_size=3)
    assert got == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("kind", ["gcnn", "gcnn-adaptive"])
def test_score_of_text_equals_log_probs_of_ids(tiny_model, tiny_lines, kind):
    model, lines = vocab_model(tiny_model, tiny_lines, kind)
    ids = model.tokenizer.encode(lines[0])
    lp = model.log_probs(ids[:-1])[0]
    expected = lp[np.arange(len(ids) - 1), ids[1:]]
    np.testing.assert_allclose(model.score(lines[0])[0], expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(model.score([ids])[0], expected, rtol=1e-6, atol=1e-6)
    # one flat list (or 1-D array) of ids is one row, as generate reads it: before, each id was a
    # row of one token, refused as "needs at least two tokens"
    for flat in (ids, np.asarray(ids)):
        got = model.score(flat)
        assert len(got) == 1
        np.testing.assert_allclose(got[0], expected, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match=r"^Row 1 has 1 token; a sequence to score needs at least two"):
        model.score([ids, [1]])


def test_score_batches_group_similar_lengths_within_the_row_and_token_budgets():
    from zoo.models.inference import score_batches

    assert score_batches([5, 1, 3, 9, 2], rows=2, tokens=100) == [[1, 4], [2, 0], [3]]
    assert score_batches([4, 4, 4, 4], rows=10, tokens=8) == [[0, 1], [2, 3]]
    assert score_batches([50, 3], rows=10, tokens=8) == [[1], [0]]  # longer than the budget: alone
    assert score_batches([]) == []


@pytest.mark.parametrize("kind", sorted(DECODERS))
def test_score_of_many_rows_equals_each_row_scored_alone(tiny_model, kind, monkeypatch):
    """`score` runs rows of similar length together, padded on the right: a row's scores must not
    depend on the rows beside it or on the padding."""
    from zoo.models import inference

    family, overrides = DECODERS[kind]
    model = tiny_model(family, **overrides)
    rng = np.random.default_rng(3)
    rows = [list(rng.integers(2, 50, size=n)) for n in (2, 17, 5, 40, 5, 9)]
    alone = [model.score([row])[0] for row in rows]
    monkeypatch.setattr(inference, "SCORE_BATCH_TOKENS", 100)  # several batches, padding in each
    together = model.score(rows)
    assert [len(s) for s in together] == [len(row) - 1 for row in rows]
    for got, expected in zip(together, alone):
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


def test_stream_perplexity_is_exact_for_a_gcnn(tiny_model, tiny_lines):
    model, lines = vocab_model(tiny_model, tiny_lines)
    assert model.stream_context == 3
    ids = np.array([i for line in lines for i in model.tokenizer.encode(line)])
    lp = model.log_probs(ids[:-1])[0]
    target_lp = lp[np.arange(len(ids) - 1), ids[1:]]
    scored = ids[1:] != model.tokenizer.bos_id
    expected = math.exp(-target_lp[scored].sum() / scored.sum())
    for seq_len, batch_size in [(5, 3), (16, 2), (200, 1)]:
        got = model.perplexity(lines, mode="stream", batch_size=batch_size, seq_len=seq_len)
        assert got == pytest.approx(expected, rel=1e-5), (seq_len, batch_size)


def test_bits_per_byte_and_character_are_the_total_over_the_texts_utf8_bytes_and_characters(tiny_model, tiny_lines):
    from zoo.data import pipeline

    model, lines = vocab_model(tiny_model, tiny_lines)
    lines = lines[:3] + ["café naïve — ok"]  # 2-byte and 3-byte characters: bytes and characters differ
    total_bits = -sum(float(s.sum()) for s in model.score(lines)) / math.log(2)
    size, characters = sum(len(line.encode()) + 1 for line in lines), sum(len(line) + 1 for line in lines)
    assert size == characters + 4
    got = model.perplexity(lines, mode="sentence")
    assert got.bits_per_byte == pytest.approx(total_bits / size, rel=1e-5)
    assert got.bits_per_character == pytest.approx(total_bits / characters, rel=1e-5)
    assert f"bits_per_byte={got.bits_per_byte:.4f}, bits_per_character=" in repr(got)
    word = model.perplexity(lines, mode="sentence", per="word")  # the same total, another divisor
    assert word.per == "word" and word.bits_per_byte == pytest.approx(got.bits_per_byte, rel=1e-6)
    stream = model.perplexity(pipeline.stream_dataset(lines, model.tokenizer, 2, 8))  # no text: no bits
    assert stream.bits_per_byte is None and stream.bits_per_character is None


@pytest.mark.parametrize("kind", ["gcnn", "gcnn-adaptive", "lstm"])
def test_the_worst_words_share_is_the_costliest_percent_of_the_words_part_of_the_total(tiny_model, tiny_lines, kind):
    from zoo.models.inference import worst_words_share

    model, lines = vocab_model(tiny_model, tiny_lines, kind)
    lines = lines * 30  # over 100 words: the costliest 1% is more than one word
    costs = np.sort(-np.concatenate(model.score(lines)))[::-1]  # per word and per </s>, each line alone
    top = math.ceil(0.01 * len(costs))
    assert top > 1
    got = model.perplexity(lines, mode="sentence", batch_size=4)
    assert got.worst_words_share == pytest.approx(costs[:top].sum() / costs.sum(), rel=1e-5)
    # by hand: two lines, "a b </s>" and "c </s>", words a, b, </s>, c, </s> costing 1, 5, 2, 9, 3
    t = model.tokenizer
    a, b, c = (t.encode(w, add_bos=False, add_eos=False)[0] for w in ("w0", "w1", "w2"))
    targets, token_costs = [a, b, t.eos_id, c, t.eos_id], [1.0, 5.0, 2.0, 9.0, 3.0]
    assert worst_words_share(targets, token_costs, t) == pytest.approx(9 / 20)
    assert worst_words_share(targets, token_costs, t, fraction=0.3) == pytest.approx(14 / 20)


def test_the_worst_words_share_of_a_stream_groups_the_whole_streams_costs_by_line_and_word(tiny_model, tiny_lines):
    model, lines = vocab_model(tiny_model, tiny_lines)
    ids = np.array([i for line in lines for i in model.tokenizer.encode(line)])
    lp = model.log_probs(ids[:-1])[0]
    target_lp = lp[np.arange(len(ids) - 1), ids[1:]]
    per_word, line_words = [], []
    for i, cost in zip(ids[1:], -target_lp):
        if i == model.tokenizer.bos_id:
            continue
        line_words.append(cost)  # a word tokenizer: a token is a word, </s> ends the line
        if i == model.tokenizer.eos_id:
            per_word += line_words
            line_words = []
    per_word = np.sort(per_word)[::-1]
    expected = per_word[:max(1, math.ceil(0.01 * len(per_word)))].sum() / per_word.sum()
    got = model.perplexity(lines, mode="stream", batch_size=2, seq_len=5)
    assert got.worst_words_share == pytest.approx(expected, rel=1e-5)


def test_perplexity_rejects_unknown_mode_and_empty_data(tiny_model, tiny_lines):
    model, lines = vocab_model(tiny_model, tiny_lines)
    with pytest.raises(ValueError, match="Unknown mode 'token'"):
        model.perplexity(lines, mode="token")
    with pytest.raises(ValueError, match="empty"):
        model.perplexity([])


@pytest.mark.parametrize("bad, message", [
    (None, r"^score takes a string, a list of strings, a list of ids or a list of id lists, got NoneType\.$"),
    (3, r"^score takes a string, .* got int\.$"),
    (["the cat", [1, 2]], r"^score was given strings mixed with ids: give a list of strings or a list of id lists\.$"),
])
def test_what_score_cannot_read_is_one_sentence(tiny_model, tiny_lines, bad, message):
    model, _ = vocab_model(tiny_model, tiny_lines)
    with pytest.raises(ValueError, match=message):
        model.score(bad)
    assert len(model.score(iter([[1, 4, 5]]))) == 1  # any iterable of rows


def test_score_batches_hold_fewer_tokens_where_the_logits_per_token_are_many(tiny_model, monkeypatch):
    """A full softmax's logits are rows × tokens × vocabulary floats: the token budget shrinks so
    that they stay within SCORE_BATCH_LOGITS (a review measured gcnn-ptb's peak memory double)."""
    from zoo.models import inference

    model = tiny_model("gcnn")  # a full softmax over 50 ids
    seen = []
    real = inference.score_batches
    monkeypatch.setattr(inference, "score_batches", lambda lengths, rows=None, tokens=None:
                        seen.append(tokens) or real(lengths, rows, tokens))
    monkeypatch.setattr(inference, "SCORE_BATCH_LOGITS", 50 * 30)
    rows = [[1, 5, 6, 7, 8, 9]] * 12
    scores = model.score(rows)
    assert seen == [30] and len(scores) == 12


def test_a_perplexity_past_the_largest_float_is_infinite_not_an_overflow_error():
    from zoo.models.inference import _exp_or_inf

    assert _exp_or_inf(math.log(150.0)) == pytest.approx(150.0)
    assert _exp_or_inf(15_000.0) == math.inf  # a 5,000-character "word" at about 3 nats a piece
