"""`LanguageModel.generate`: the prompt in one parallel pass, the compiled loop, the samplers.

Exactness where it can be: the parallel prompt pass gives the state and next-token distribution
of feeding the prompt token by token; greedy batched (mixed prompt lengths) = greedy one prompt
at a time = a decode_step loop by hand, for every family; a seeded draw is reproducible and a
row's draws never depend on the other rows; top-p keeps the smallest set whose mass reaches p;
one beam is greedy and the best of four is at least as likely; stop texts and ids end a row where
they appear; the no-repeat rule leaves no repeated n-gram.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo
from zoo.data.vocab import SPECIALS, WordTokenizer
from zoo.layers import AdaptiveSoftmax, FullSoftmax
from zoo.models import GCNNLanguageModel, generation, samplers

from tests.model_checks import vocab_model

PROMPTS = [[1, 7, 12, 30, 4, 9], [1], [1, 22, 5], [1, 3, 3, 3, 40, 41, 42, 43, 44, 45, 46, 47, 48]]
WORDS = ("the a cat dog sat on mat big small red ran to house is was and of in it he she saw bird tree "
         "green blue old new man woman child ate fish bread with under over by at home park car").split()


# The families, from conftest.py's `tiny_model` factory (its seeded construction): conftest's "lstm"
# as it is; the others with the overrides the tests below need (a GCNN whose receptive field the
# long-prompt test counts on, a GCNN with an MoE branch, a feed-forward branch and an adaptive
# softmax, one RNN layer, an LSTM–MoE–FFN–LSTM stack whose gates route tokens apart).
def gcnn(tiny_model):
    return tiny_model("gcnn", blocks=[[[3, 8]], [[1, 4], [3, 4], [1, 12]], [[2, 12]]])


def gcnn_moe_adaptive(tiny_model):
    model = tiny_model("gcnn", blocks=[[[3, 16]], [[4, 16]]], cutoffs=[10, 30],
                       moe={"num_experts": 4, "k": 2, "hidden_units": 8, "after_blocks": [0]},
                       feed_forward={"after_blocks": [1], "hidden_units": 8})  # both kinds of branch
    _random_gates(model.moe_layers[0])
    return model


def lstm(tiny_model):
    return tiny_model("lstm")


def rnn(tiny_model):
    return tiny_model("rnn", layers=[{"type": "rnn", "units": 8}])


def moe_stack(tiny_model):
    layers = [{"type": "lstm", "units": 24, "projection": 16},
              {"type": "moe", "num_experts": 8, "k": 2, "hidden_units": 8, "groups": 2},
              {"type": "ffn", "hidden_units": [12]},
              {"type": "lstm", "units": 16}]
    model = tiny_model("moe", embedding_dim=16, layers=layers)
    _random_gates(model.stack[1])
    return model


def _random_gates(moe):
    """The gates start at zero (every token to the same experts): random ones route tokens apart."""
    rng = np.random.default_rng(0)
    for name in ("gate_kernel", "secondary_gate_kernel"):
        if hasattr(moe, name):
            variable = getattr(moe, name)
            variable.assign(rng.standard_normal(variable.shape).astype("float32"))


FAMILIES = {"gcnn": gcnn, "gcnn-moe-adaptive": gcnn_moe_adaptive, "lstm": lstm, "rnn": rnn, "moe-stack": moe_stack}


def padded(prompts):
    width = max(len(p) for p in prompts)
    ids = np.zeros((len(prompts), width), np.int32)
    for i, p in enumerate(prompts):
        ids[i, :len(p)] = p
    return tf.constant(ids), tf.constant([len(p) for p in prompts], tf.int32)


def greedy_by_hand(model, prompt, n, eos=None):
    """Greedy decoding through `decode_step`, one token at a time, in Python."""
    state = None
    for token in prompt:
        log_probs, state = model.decode_step([token], state)
    out = []
    for _ in range(n):
        lp = np.asarray(log_probs)[0].astype("float64")
        lp[:2] = -np.inf
        token = int(np.argmax(lp))
        out.append(token)
        if token == eos:
            break
        log_probs, state = model.decode_step([token], state)
    return list(prompt) + out


def sequence_log_prob(model, row, start):
    """The log-probability of `row[start:]` given what precedes it."""
    lp = model.target_log_probs([row[:-1]], [row[1:]])[0]
    return float(np.sum(lp[start - 1:], dtype=np.float64))


# ---- 2: the prompt in one parallel pass -------------------------------------------------------
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_parallel_prompt_pass_equals_feeding_the_prompt_token_by_token(tiny_model, family):
    model = FAMILIES[family](tiny_model)
    assert generation.reads_prompt_in_parallel(model)
    ids, lengths = padded(PROMPTS)
    hidden, state = model.prefill(ids, lengths)
    step_hidden, step_state = generation.stepwise_prefill(model, ids, lengths)
    np.testing.assert_allclose(model.head.log_prob(hidden), model.head.log_prob(step_hidden), atol=1e-5)
    tf.nest.map_structure(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), state, step_state)
    for row, prompt in enumerate(PROMPTS):  # and what decode_step gives, one prompt at a time
        log_probs, by_hand = None, None
        for token in prompt:
            log_probs, by_hand = model.decode_step([token], by_hand)
        np.testing.assert_allclose(model.head.log_prob(hidden)[row], log_probs[0], atol=1e-5)
        tf.nest.map_structure(lambda a, b: np.testing.assert_allclose(a[row], b[0], atol=1e-5), state, by_hand)


def test_a_subclass_changing_step_alone_reads_its_prompt_through_its_step():
    class Shifted(GCNNLanguageModel):
        def step(self, token_ids, state):
            hidden, state = super().step(token_ids, state)
            return hidden + 0.5, state

    keras.utils.set_random_seed(0)
    model = Shifted(vocabulary_size=50, embedding_dim=8, blocks=[[[3, 8]]])
    assert not generation.reads_prompt_in_parallel(model)
    for prompt in PROMPTS:
        assert model.generate(prompt, max_new_tokens=6, temperature=0) == greedy_by_hand(model, prompt, 6)


# ---- 3: exact where it can be -------------------------------------------------------------------
@pytest.mark.ci
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_greedy_batched_equals_one_prompt_at_a_time_and_by_hand(tiny_model, family):
    model = FAMILIES[family](tiny_model)
    batched = model.generate(PROMPTS, max_new_tokens=10, temperature=0)
    assert batched == [model.generate(p, max_new_tokens=10, temperature=0) for p in PROMPTS]
    assert batched == [greedy_by_hand(model, p, 10) for p in PROMPTS]
    # a batch of GROUP_FROM rows or more decodes as groups of rows side by side: the same tokens
    assert len(PROMPTS) * 3 >= generation.GROUP_FROM
    assert model.generate(PROMPTS * 3, max_new_tokens=10, temperature=0) == batched * 3
    assert model.generate(PROMPTS, max_new_tokens=10, sampler="greedy") == batched
    assert model.generate(PROMPTS, max_new_tokens=10, sampler=zoo.samplers.Greedy()) == batched


@pytest.mark.ci
@pytest.mark.parametrize("family", ["gcnn", "lstm"])
def test_xla_compiled_greedy_equals_the_graph_loop(tiny_model, family):
    model = FAMILIES[family](tiny_model)
    assert model.generate(PROMPTS, max_new_tokens=8, temperature=0, jit_compile=True) == \
        model.generate(PROMPTS, max_new_tokens=8, temperature=0, jit_compile=False)
    # at GROUP_FROM rows or more, groups of rows each in their own XLA loop, side by side
    assert model.generate(PROMPTS * 3, max_new_tokens=8, temperature=0, jit_compile=True) == \
        model.generate(PROMPTS * 3, max_new_tokens=8, temperature=0, jit_compile=False)


@pytest.mark.ci
def test_xla_samples_top_p_on_a_vocabulary_larger_than_a_block():
    keras.utils.set_random_seed(0)
    model = GCNNLanguageModel(vocabulary_size=300, embedding_dim=8, blocks=[[[3, 8]]])
    for settings in ({"top_p": 0.9}, {"top_p": 0.5, "top_k": 200}, {"top_k": 40}):
        rows = model.generate(PROMPTS, max_new_tokens=6, seed=1, jit_compile=True, **settings)
        assert rows == model.generate(PROMPTS, max_new_tokens=6, seed=1, jit_compile=True, **settings)
        assert all(len(r) == len(p) + 6 and min(r[len(p):]) >= 2 for r, p in zip(rows, PROMPTS))


@pytest.mark.ci
def test_auto_uses_xla_where_it_can_in_shape_buckets_and_the_graph_loop_elsewhere(tiny_model):
    model = gcnn(tiny_model)
    sampled = model.generate(PROMPTS, max_new_tokens=10, top_k=5, seed=2)  # default: jit_compile="auto"
    assert sampled == model.generate(PROMPTS, max_new_tokens=10, top_k=5, seed=2, jit_compile=True)
    model.generate(PROMPTS[:2], max_new_tokens=12, top_k=5, seed=2)  # another width and length, the same buckets
    model.generate(PROMPTS[:2], max_new_tokens=12, top_k=5, seed=2, temperature=0.7)  # a new temperature: a tensor
    assert [key[-3:-1] for key in model._generation_functions] == [(True, 16)]  # (jit_compile, room)
    stack = moe_stack(tiny_model)  # MoE layers: the graph loop
    assert stack.generate(PROMPTS, max_new_tokens=6, top_k=5, seed=2) == \
        stack.generate(PROMPTS, max_new_tokens=6, top_k=5, seed=2, jit_compile=False)
    with pytest.raises(ValueError, match="jit_compile must be True, False or 'auto', got 'yes'"):
        model.generate(PROMPTS, jit_compile="yes")


SAMPLERS = [{"temperature": 1.5}, {"top_k": 5}, {"top_p": 0.8, "temperature": 1.2},
            {"sampler": "top_p", "top_p": 0.9, "top_k": 7}]


@pytest.mark.ci
@pytest.mark.parametrize("settings", SAMPLERS)
def test_seeded_sampling_is_reproducible_batched_or_not(tiny_model, settings):
    model = gcnn(tiny_model)
    a = model.generate(PROMPTS, max_new_tokens=12, seed=3, **settings)
    assert a == model.generate(PROMPTS, max_new_tokens=12, seed=3, **settings)
    # a row's draws depend on the seed, its index and its own text, never on the other rows
    assert model.generate(PROMPTS[0], max_new_tokens=12, seed=3, **settings) == a[0]
    others = model.generate([PROMPTS[0], [1, 44, 45], [1]], max_new_tokens=12, seed=3, **settings)
    assert others[0] == a[0]
    assert any(model.generate(PROMPTS, max_new_tokens=12, seed=s, **settings) != a for s in (4, 5, 6))
    assert all(t not in (0, 1) for row in a for t in row[1:])  # never <pad> or <s>
    # a batch decoded in groups of rows: the same, the second group drawing with its own seed
    many = PROMPTS * 3
    b = model.generate(many, max_new_tokens=12, seed=3, **settings)
    assert b == model.generate(many, max_new_tokens=12, seed=3, **settings) and b[0] == a[0]
    changed = model.generate([many[0], [1, 44, 45]] + many[2:], max_new_tokens=12, seed=3, **settings)
    assert [r for i, r in enumerate(changed) if i != 1] == [r for i, r in enumerate(b) if i != 1]
    assert b[len(many) // 2:] != b[:len(many) // 2]  # the two groups draw differently


@pytest.mark.ci
def test_top_p_keeps_the_smallest_set_whose_mass_reaches_p():
    probabilities = np.array([[0.5, 0.25, 0.125, 0.0625, 0.0625]])
    log_probs = tf.constant(np.log(probabilities), tf.float32)
    for p, kept in [(0.5, {0}), (0.75, {0, 1}), (0.76, {0, 1, 2}), (0.9, {0, 1, 2, 3}), (1.0, {0, 1, 2, 3, 4})]:
        logits, ids = generation.candidates(log_probs, top_p=p)
        assert set(ids.numpy()[np.isfinite(logits.numpy())].tolist()) == kept, p
        drawn = {int(generation.sample_tokens(log_probs, seed, 0, top_p=p)[0]) for seed in range(200)}
        assert drawn == kept, p
    # after temperature: at 2, probabilities ∝ sqrt(p) = .41, .29, .21, .15, .15 (normalised)
    flat = np.sqrt(probabilities[0]) / np.sqrt(probabilities[0]).sum()
    before = np.concatenate([[0], np.cumsum(flat)[:-1]])
    logits, ids = generation.candidates(log_probs, temperature=2.0, top_p=0.75)
    assert set(ids.numpy()[np.isfinite(logits.numpy())].tolist()) == set(np.flatnonzero(before < 0.75).tolist())
    # within the top k, renormalised: top 2 are .667 and .333, so p = 0.9 keeps both
    logits, ids = generation.candidates(log_probs, top_k=2, top_p=0.9)
    assert set(ids.numpy()[np.isfinite(logits.numpy())].tolist()) == {0, 1}


def test_candidates_on_a_large_vocabulary_equal_a_numpy_reference():
    rng = np.random.default_rng(2)
    log_probs = tf.nn.log_softmax(tf.constant(rng.standard_normal((3, 1000)) * 3, tf.float32)).numpy()
    for top_k, top_p in [(None, 0.9), (40, None), (40, 0.5), (500, 0.99)]:
        for as_tensor in (False, True):
            k = None if top_k is None else (tf.constant(top_k) if as_tensor else top_k)
            p = None if top_p is None else (tf.constant(top_p) if as_tensor else top_p)
            logits, ids = generation.candidates(tf.constant(log_probs), 0.8, k, p)
            kept = ids.numpy()[np.isfinite(logits.numpy())].reshape(-1)
            for row in range(3):
                order = np.argsort(-log_probs[row], kind="stable")[:top_k or 1000]
                probs = np.exp(log_probs[row, order] / 0.8)
                probs /= probs.sum()
                before = np.concatenate([[0], np.cumsum(probs)[:-1]])
                want = set(order[before < (top_p or 2)].tolist())
                got = set(ids.numpy()[row][np.isfinite(logits.numpy()[row])].tolist())
                assert got == want, (top_k, top_p, as_tensor, row)
            assert kept.size


def test_top_k_of_equals_tf_top_k():
    rng = np.random.default_rng(0)
    for vocabulary in (50, 1000, 10000, 10002, 10007):  # plain, blocks of 25, 25, 32 padded, 32 padded
        logits = rng.standard_normal((5, vocabulary)).astype("float32")
        logits[:, :2] = -np.inf
        logits[0, -9:] = logits[0, 3:12]  # ties: the lower id first, as tf.math.top_k
        for k in (1, 7, 40):
            want = tf.math.top_k(logits, k)
            for given in (k, tf.constant(k)):
                values, ids = generation.top_k_of(tf.constant(logits), given)
                np.testing.assert_array_equal(values, want.values)
                np.testing.assert_array_equal(ids, want.indices)


def test_top_k_blocks_divide_the_vocabulary_where_they_can():
    assert samplers.block_size(10_000) == 25 and samplers.block_size(267_744) == 32
    assert samplers.block_size(1000) == 25 and samplers.block_size(16_000) == 32
    assert samplers.block_size(10_007) == samplers.BLOCK  # a prime: the last block padded


@pytest.mark.ci
@pytest.mark.parametrize("family", ["gcnn", "lstm", "moe-stack"])
def test_one_beam_is_greedy_and_the_best_of_four_is_at_least_as_likely(tiny_model, family):
    model = FAMILIES[family](tiny_model)
    greedy = model.generate(PROMPTS, max_new_tokens=8, temperature=0)
    assert model.generate(PROMPTS, max_new_tokens=8, sampler="beam", num_beams=1) == greedy
    beams = model.generate(PROMPTS, max_new_tokens=8, sampler="beam", num_beams=4, length_penalty=0.0)
    for prompt, g, b in zip(PROMPTS, greedy, beams):
        assert len(b) == len(g) and b[:len(prompt)] == prompt
        assert sequence_log_prob(model, b, len(prompt)) >= sequence_log_prob(model, g, len(prompt)) - 1e-4


@pytest.mark.ci
@pytest.mark.parametrize("name", ["gcnn-ptb", "lstmp-ptb"])
def test_on_the_trained_presets_beam_search_finds_likelier_text_than_greedy(name):
    model = zoo.load(name, weights="trained")
    prompts = ["the company said", "in new york stock exchange composite trading", "mr. smith", "",
               "the dollar fell against the yen", "analysts expected"]
    ids = [model.tokenizer.encode(p, add_eos=False) for p in prompts]
    greedy = model.generate(ids, max_new_tokens=10, temperature=0, stop=None)
    beams = model.generate(ids, max_new_tokens=10, sampler="beam", num_beams=4, length_penalty=0.0, stop=None)
    gains = [sequence_log_prob(model, b, len(p)) - sequence_log_prob(model, g, len(p))
             for p, g, b in zip(ids, greedy, beams)]
    assert min(gains) >= -1e-4 and max(gains) > 0.1, gains


@pytest.mark.ci
def test_beam_search_ranks_finished_beams_by_length_penalty():
    model, vocab = vocabulary_model()
    bias = model.head.bias.numpy()
    bias[2] += 3.0  # </s> likely enough that some beams end early
    model.head.bias.assign(bias)
    for penalty in (0.0, 1.0, 3.0):
        out = model.generate(["the cat", "a dog"], max_new_tokens=10, sampler="beam", num_beams=3, length_penalty=penalty)
        assert all(isinstance(t, str) and t for t in out)
    short = model.generate([vocab.encode("the cat", add_eos=False)], max_new_tokens=10, sampler="beam", num_beams=3,
                           length_penalty=0.0)[0]
    long = model.generate([vocab.encode("the cat", add_eos=False)], max_new_tokens=10, sampler="beam", num_beams=3,
                          length_penalty=3.0)[0]
    assert len(long) >= len(short)  # a larger penalty favours longer outputs


def vocabulary_model():
    vocab = WordTokenizer(list(SPECIALS) + WORDS)
    keras.utils.set_random_seed(0)
    model = GCNNLanguageModel(vocabulary_size=len(vocab), embedding_dim=8, blocks=[[[3, 16]], [[3, 16]]])
    model.tokenizer = vocab
    bias = model.head.bias.numpy()
    bias[2] -= 6.0  # </s> unlikely: greedy rows run their whole length
    model.head.bias.assign(bias)
    return model, vocab


@pytest.mark.ci
def test_stop_ends_each_row_where_its_stop_text_appears():
    model, vocab = vocabulary_model()
    prompts = ["the cat", "a dog ran to the", ""]
    free = model.generate(prompts, max_new_tokens=15, temperature=0)
    starts = [len(vocab.decode(vocab.encode(p, add_eos=False))) for p in prompts]
    word = free[0][starts[0]:].split()[2]  # a word the first row writes
    for stop in (word, [word, "zzz"]):
        got = model.generate(prompts, max_new_tokens=15, temperature=0, stop=stop)
        for text, start, g in zip(free, starts, got):
            cut = text.find(word, start)
            assert g == (text[:cut].rstrip() if cut >= 0 else text)
    assert word not in model.generate(prompts[0], max_new_tokens=15, temperature=0, stop=word)[starts[0]:]
    # ids: the row ends with the stop id (as with </s>); a sequence of ids stops where it appears
    ids = [vocab.encode(p, add_eos=False) for p in prompts]
    free_ids = model.generate(ids, max_new_tokens=15, temperature=0)
    token = free_ids[0][len(ids[0]) + 2]
    got = model.generate(ids, max_new_tokens=15, temperature=0, stop=token)
    for prompt, f, g in zip(ids, free_ids, got):
        new = f[len(prompt):]
        assert g == (prompt + new[:new.index(token) + 1] if token in new else f)
    pair = free_ids[1][len(ids[1]) + 3:len(ids[1]) + 5]
    got = model.generate(ids[1], max_new_tokens=15, temperature=0, stop=[pair])
    new, free_new = got[len(ids[1]):], free_ids[1][len(ids[1]):]
    first = next(i for i in range(len(free_new) - 1) if free_new[i:i + 2] == pair)
    assert new == free_new[:first + 2]  # it stopped where the pair first appears
    assert model.generate(ids, max_new_tokens=15, temperature=0, stop=None) == free_ids  # </s> unlikely anyway


@pytest.mark.ci
def test_stop_none_runs_every_row_to_max_length_past_end_of_sentence():
    model, vocab = vocabulary_model()
    bias = model.head.bias.numpy()
    bias[2] += 20.0  # </s> the most likely token
    model.head.bias.assign(bias)
    ids = [vocab.encode("the cat", add_eos=False)]
    assert model.generate(ids, max_new_tokens=6, temperature=0)[0][-1] == 2
    assert len(model.generate(ids, max_new_tokens=6, temperature=0)[0]) == len(ids[0]) + 1
    assert len(model.generate(ids, max_new_tokens=6, temperature=0, stop=None)[0]) == len(ids[0]) + 6


def _ngrams(row, n):
    return [tuple(row[i:i + n]) for i in range(len(row) - n + 1)]


@pytest.mark.ci
@pytest.mark.parametrize("n", [1, 2, 3])
def test_no_repeat_ngram_leaves_no_repeated_ngram(tiny_model, n):
    model = gcnn(tiny_model)
    greedy = model.generate(PROMPTS, max_new_tokens=12, temperature=0)
    assert any(len(set(_ngrams(r, 2))) < len(_ngrams(r, 2)) for r in greedy)  # greedy repeats itself
    for settings in ({"temperature": 0}, {"top_k": 5, "seed": 1}, {"sampler": "beam", "num_beams": 3}):
        rows = model.generate(PROMPTS, max_new_tokens=12 if n > 1 else 8, no_repeat_ngram_size=n, **settings)
        for row, prompt in zip(rows, PROMPTS):
            grams = _ngrams(row, n)
            new = grams[max(len(prompt) - n + 1, 0):]  # the n-grams that end in a new token
            assert all(grams.count(g) == 1 or g not in new for g in grams), (settings, row)


def test_repeated_ngrams_matches_a_python_reference():
    rng = np.random.default_rng(1)
    buffer = rng.integers(2, 6, size=(4, 20)).astype("int32")
    ends = np.array([20, 7, 3, 12], np.int32)
    for n in (1, 2, 3, 4):
        got = generation.repeated_ngrams(tf.constant(buffer), tf.constant(ends), n, 8).numpy()
        for b in range(4):
            row = buffer[b, :ends[b]].tolist()
            prefix = tuple(row[len(row) - n + 1:]) if n > 1 else ()
            banned = {row[j + n - 1] for j in range(len(row) - n + 1) if tuple(row[j:j + n - 1]) == prefix}
            assert set(np.flatnonzero(got[b]).tolist()) == banned, (n, b)


@pytest.mark.ci
def test_the_gcnn_reads_a_prompt_longer_than_its_receptive_field_and_only_the_last_tokens_matter(tiny_model):
    model = gcnn(tiny_model)
    field = model.receptive_field
    rng = np.random.default_rng(0)
    tail = rng.integers(3, 50, size=field).tolist()
    a = [1] + rng.integers(3, 50, size=200).tolist() + tail
    b = [1] + rng.integers(3, 50, size=150).tolist() + tail
    ga, gb = model.generate([a, b], max_new_tokens=10, temperature=0)
    assert ga[len(a):] == gb[len(b):] and ga == greedy_by_hand(model, a, 10)


# ---- bad input -----------------------------------------------------------------------------------
def test_an_empty_prompt_starts_from_the_start_of_sentence():
    model, _ = vocabulary_model()
    assert model.generate("", max_new_tokens=5, temperature=0) == model.tokenizer.decode(
        greedy_by_hand(model, [1], 5, eos=2))
    assert model.generate([[], [1, 4]], max_new_tokens=3, temperature=0)[0] == greedy_by_hand(model, [1], 3, eos=2)


BAD = [
    ({"max_new_tokens": 0}, r"max_new_tokens must be an integer in \[1, 1048576\], got 0"),
    ({"max_new_tokens": 2.5}, r"max_new_tokens .* got 2.5"),
    ({"max_new_tokens": 2**40}, r"max_new_tokens .* in \[1, 1048576\], got 1099511627776"),
    ({"sampler": "top_k", "temperature": 0}, r"temperature=0 is greedy decoding, which draws nothing"),
    ({"sampler": "beam", "jit_compile": True}, r"beam search runs as a graph loop only"),
    ({"stop": 0.5}, r"stop must be .auto., None, a string, an id, .*got 0.5"),
    ({"stop": ["a", 0.5]}, r"A stop text \(.a.\) needs text prompts"),
    ({"stop": [[1, 0.5]]}, r"A stop is a string, an id, a list of ids .*got \[1, 0.5\]"),
    ({"stop": {"a": 1}}, r"stop must be 'auto', None, a string"),
    ({"sampler": "nucleus"}, r"Unknown sampler 'nucleus'; expected one of \['greedy', 'random', 'top_k'"),
    ({"top_k": 51}, r"top_k must be in \[1, 50\] \(the vocabulary size\), got 51"),
    ({"top_k": 0}, r"top_k must be in \[1, 50\]"),
    ({"top_p": 1.5}, r"top_p must be a number in \(0, 1\], got 1.5"),
    ({"top_p": 0}, r"top_p must be a number in \(0, 1\], got 0"),
    ({"temperature": -1}, r"temperature must be a finite number >= 0 \(0 is greedy\), got -1"),
    ({"num_beams": 0}, r"num_beams must be an integer >= 1, got 0"),
    ({"num_beams": 51}, r"^num_beams must be in \[1, 50\] \(the vocabulary size\), got 51\.$"),
    ({"sampler": zoo.samplers.Beam(num_beams=20000)}, r"^num_beams must be in \[1, 50\] \(the vocabulary size\)"),
    ({"sampler": "greedy", "top_k": 5}, r"The greedy sampler does not take top_k; it takes no parameter"),
    ({"sampler": zoo.samplers.TopK(5), "top_k": 3}, r"not also as top_k"),
    ({"no_repeat_ngram_size": -1}, r"no_repeat_ngram_size must be an integer in \[0, 16\] \(0: off\), got -1"),
    ({"seed": "x"}, r"seed must be an integer or None, got 'x'"),
    ({"stop": "the"}, r"A stop text \('the'\) needs text prompts"),
    ({"stop": [[]]}, r"A stop is a string, an id, a list of ids .*got \[\]"),
]


@pytest.mark.parametrize("kwargs, message", BAD)
def test_bad_arguments_are_refused_in_one_sentence(tiny_model, kwargs, message):
    model = gcnn(tiny_model)
    with pytest.raises(ValueError, match=message):
        model.generate([[1, 4, 5]], **{"max_new_tokens": 3, **kwargs})


def test_xla_refuses_a_model_with_moe_layers_in_one_sentence(tiny_model):
    with pytest.raises(ValueError, match=r"jit_compile=True cannot compile this model's layers moe_1 \(a sparse MoE"):
        moe_stack(tiny_model).generate([[1, 4]], max_new_tokens=2, jit_compile=True)


@pytest.mark.ci
def test_numpy_scalars_are_taken_as_the_numbers_they_hold(tiny_model):
    model = gcnn(tiny_model)
    want = model.generate(PROMPTS, max_new_tokens=5, temperature=0.8, top_k=5, top_p=0.9, seed=3, no_repeat_ngram_size=2)
    assert model.generate(PROMPTS, max_new_tokens=np.int64(5), temperature=np.float32(0.8), top_k=np.int32(5),
                          top_p=np.float64(0.9), seed=np.int64(3), no_repeat_ngram_size=np.int8(2)) == want
    stopped = model.generate([PROMPTS[0]], max_new_tokens=8, temperature=0, stop=[np.int64(want[0][-1])])
    assert stopped[0][-1] == want[0][-1] or len(stopped[0]) == len(PROMPTS[0]) + 8


@pytest.mark.ci
def test_one_beam_without_the_greedy_fallback_is_greedy(tiny_model):
    model = gcnn(tiny_model)
    ids, lengths = padded(PROMPTS)
    run = tf.function(lambda i, l: generation.beam_search(model, i, l, 8, 1, 1.0, generation.NO_STOP,
                                                          against_greedy=False))
    got, ends, _ = run(ids, lengths)
    assert [got.numpy()[r, :ends.numpy()[r]].tolist() for r in range(len(PROMPTS))] == \
        model.generate(PROMPTS, max_new_tokens=8, temperature=0)


def test_max_length_is_the_deprecated_name_of_max_new_tokens(tiny_model):
    model = gcnn(tiny_model)
    want = model.generate(PROMPTS, max_new_tokens=5, temperature=0)
    assert model.generate(PROMPTS, 5, temperature=0) == want  # positional, as before
    with pytest.warns(DeprecationWarning, match=r"use max_new_tokens="):
        assert model.generate(PROMPTS, max_length=5, temperature=0) == want
    with pytest.raises(ValueError, match=r"Give the number of new tokens once, as max_new_tokens .* not both"):
        model.generate(PROMPTS, max_new_tokens=5, max_length=5)


def test_bad_prompts_are_refused_in_one_sentence(tiny_model):
    model = gcnn(tiny_model)
    with pytest.raises(ValueError, match=r"Token id 50 is outside the vocabulary: ids must be in \[0, 49\]"):
        model.generate([[1, 50]])
    with pytest.raises(ValueError, match="must be integers"):
        model.generate([[1, 2.5]])
    with pytest.raises(ValueError, match=r"A prompt of ids must be a flat list of integers, got one of shape \(1, 2\)"):
        model.generate([[[1, 4]]])
    with pytest.raises(ValueError, match="prompts must be a string, a list of strings"):
        model.generate(5)
    with pytest.raises(ValueError, match="no tokenizer"):
        model.generate("the cat")
    with pytest.raises(ValueError, match="mixes strings with ids"):
        vocabulary_model()[0].generate([[1, 4], "the cat"])
    with pytest.raises(ValueError, match="mixes strings with ids"):
        vocabulary_model()[0].generate(["the cat", 5])



# ---- greedy equals decode_step by hand, sampling is seeded, text stops at </s> --------------------
@pytest.mark.ci
@pytest.mark.parametrize("kind", ["gcnn", "lstm"])
def test_greedy_generation(tiny_model, kind):
    model = tiny_model(kind)
    prompt = [1, 7, 12, 30]
    greedy = model.generate(prompt, max_new_tokens=12, temperature=0)
    assert len(greedy) == len(prompt) + 12
    assert greedy == greedy_by_hand(model, prompt, 12)
    assert model.generate(prompt, max_new_tokens=12, temperature=0, seed=5) == greedy
    for seed in (0, 1):
        assert model.generate(prompt, max_new_tokens=12, temperature=1.0, top_k=1, seed=seed) == greedy


@pytest.mark.ci
def test_sampling_is_seeded(tiny_model):
    model = tiny_model("gcnn")
    a = model.generate([1, 5], max_new_tokens=15, temperature=1.5, seed=3)
    assert a == model.generate([1, 5], max_new_tokens=15, temperature=1.5, seed=3)
    others = [model.generate([1, 5], max_new_tokens=15, temperature=1.5, seed=s) for s in range(4, 8)]
    assert any(o != a for o in others)
    assert all(t not in (0, 1) for t in a[2:])


def test_text_generation_stops_at_end_of_sentence(tiny_model, tiny_lines):
    model, _ = vocab_model(tiny_model, tiny_lines)
    vocab = model.tokenizer
    text = model.generate("a b", max_new_tokens=25, temperature=0)
    ids = greedy_by_hand(model, vocab.encode("a b", add_eos=False), 25)
    if vocab.eos_id in ids[3:]:
        ids = ids[: ids.index(vocab.eos_id, 3) + 1]
    assert text == vocab.decode(ids)
    assert text.startswith("a b")


def test_generate_rejects_bad_arguments(tiny_model):
    model = tiny_model("gcnn")
    with pytest.raises(ValueError, match="temperature must be a finite number >= 0"):
        model.generate([1], temperature=-1)
    with pytest.raises(ValueError, match=r"top_k must be in \[1, 50\]"):
        model.generate([1], top_k=0)


def test_the_level_2_cache_is_read_from_linux_cpu_description(tmp_path):
    """`l2_cache_bytes` reads sysfs's cache indexes (level 1 data and instruction, level 2
    unified, level 3); None for a folder that does not describe one."""
    for index, (level, kind, size) in enumerate([("1", "Data", "48K"), ("1", "Instruction", "32K"),
                                                 ("2", "Unified", "1024K"), ("3", "Unified", "32768K")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (folder / name).write_text(value + "\n")
    assert generation.l2_cache_bytes(str(tmp_path)) == 1 << 20
    (tmp_path / "index2" / "size").write_text("2M\n")
    assert generation.l2_cache_bytes(str(tmp_path)) == 2 << 20
    assert generation.l2_cache_bytes(str(tmp_path / "missing")) is None
    (tmp_path / "index2" / "level").write_text("4\n")
    assert generation.l2_cache_bytes(str(tmp_path)) is None


@pytest.mark.parametrize("cache, given, blocks", [
    (1 << 20, None, 1),       # 64 × 4 bytes per id, 1000 ids: 256,000 bytes fit 0.9 of the cache
    (100_000, None, 3),       # 90,000 bytes fit 351 ids: 3 blocks
    (40_000, None, 8),        # 36,000 bytes fit 140 ids: 8 blocks
    (8_000, None, 1),         # 37 blocks would be needed, more than MAX_AUTO_HEAD_BLOCKS: one product
    (None, None, 1),          # an unknown cache: one product
    (40_000, 5, 5),           # an explicit number is kept,
    (40_000, 1500, 1000),     # at most one block per id
])
def test_the_output_layer_is_cut_into_blocks_that_fit_the_cache(monkeypatch, cache, given, blocks):
    head = FullSoftmax(1000)
    head.build((None, None, 64))
    monkeypatch.setattr(generation, "l2_cache_bytes", lambda: cache)
    assert generation.head_blocks(_Model(head), given) == blocks


def test_an_export_s_default_blocks_do_not_depend_on_the_exporting_machine(monkeypatch):
    """A model server runs no Python to read its cache: an export's default is one product
    whatever this machine's cache, while in-process generation fits this machine's; an explicit
    number is kept."""
    head = FullSoftmax(10002)
    head.build((None, None, 128))  # 512 bytes per id: 0.9 of 1 MiB holds 1843 ids, 6 blocks
    for cache in (None, 1 << 20, 32 << 20):
        monkeypatch.setattr(generation, "l2_cache_bytes", lambda: cache)
        assert generation.export_head_blocks(_Model(head)) == 1 and generation.export_head_blocks(_Model(head), 2) == 2
    assert generation.head_blocks(_Model(head)) == 1  # 32 MiB: one product
    monkeypatch.setattr(generation, "l2_cache_bytes", lambda: 1 << 20)
    assert generation.head_blocks(_Model(head)) == 6 and generation.head_blocks(_Model(head), cache_bytes=2 << 20) == 3


def test_an_adaptive_output_layer_is_never_cut():
    model = _Model(AdaptiveSoftmax(1000, cutoffs=[100]))
    assert generation.head_blocks(model) == 1 and generation.head_blocks(model, 4) == 1


class _Model:
    """What `head_blocks` reads of a model: its output layer."""

    def __init__(self, head):
        self.head = head


def test_generated_text_leaves_out_a_character_that_the_last_tokens_only_begin(tiny_model):
    """A subword model with byte fallback writes a character it never saw as its UTF-8 bytes, one
    piece each: when `max_new_tokens` ends the text inside such a character, `generate` leaves
    the cut bytes out (before: a U+FFFD at the end of the text); its ids keep them."""
    from zoo.data.tokenizers import SubwordTokenizer
    from zoo.data.tokenizers_test import corpus

    tokenizer = SubwordTokenizer.train(corpus(), 400)
    model = tiny_model("gcnn", tokenizer=tokenizer, blocks=[[[3, 16]]])
    lead = int(np.flatnonzero(tokenizer.byte_values == 0xE3)[0])  # the first of あ's 3 bytes
    bias = np.full(model.vocabulary_size, -50.0, np.float32)
    bias[lead] = 50.0  # greedy decoding writes it at every step
    model.head.bias.assign(bias)
    prompt = tokenizer.encode("the cat", add_eos=False)
    ids = model.generate([prompt], max_new_tokens=1, sampler="greedy")[0]
    assert ids[len(prompt):] == [lead]
    assert model.generate("the cat", max_new_tokens=1, sampler="greedy") == "the cat"
    # two leads: the first begins no character (the second is not its continuation): U+FFFD; the second is cut
    assert model.generate("the cat", max_new_tokens=2, sampler="greedy") == "the cat\ufffd"


def test_a_subword_model_never_writes_its_unknown_piece(tiny_model):
    """Byte fallback spells every character, so no text encodes to SentencePiece's `<unk>`; a
    lightly trained model could still pick it, and its text showed " ⁇ ". A word model's `<unk>`
    is a word of its text and stays."""
    from zoo.data.tokenizers import SubwordTokenizer
    from zoo.data.tokenizers_test import corpus

    tokenizer = SubwordTokenizer.train(corpus(), 400)
    model = tiny_model("gcnn", tokenizer=tokenizer, blocks=[[[3, 16]]])
    bias = np.zeros(model.vocabulary_size, np.float32)
    bias[tokenizer.unk_id] = 50.0  # the likeliest by far
    model.head.bias.assign(bias)
    assert generation.never_emitted(model) == [0, 1, tokenizer.unk_id]
    for sampler in ("greedy", zoo.samplers.Beam(num_beams=3), zoo.samplers.TopK(5)):
        ids = model.generate([tokenizer.encode("the cat", add_eos=False)], max_new_tokens=4, sampler=sampler, seed=1)
        assert tokenizer.unk_id not in ids[0], sampler
    words = gcnn(tiny_model)
    assert generation.never_emitted(words) == [0, 1]
