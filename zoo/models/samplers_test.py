"""Each sampler's own choice, exact on hand-made log-probabilities; `resolve`; and a sampler
defined outside the package, run through `lm.generate` and an export."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo import samplers
from zoo.data.vocab import SPECIALS, WordTokenizer
from zoo.models import GCNNLanguageModel

LOG_PROBS = np.log(np.array([[0.05, 0.5, 0.05, 0.4], [0.6, 0.1, 0.2, 0.1]], np.float32))


def drawn(sampler, log_probs=LOG_PROBS, seeds=range(60)):
    """Per row, the set of ids `sampler` picks over many seeds."""
    picks = np.stack([sampler.next(tf.constant(log_probs), seed, 0).numpy() for seed in seeds])
    return [sorted(set(picks[:, row].tolist())) for row in range(len(log_probs))]


def test_greedy_takes_the_most_likely_id_of_each_row():
    assert samplers.Greedy().next(tf.constant(LOG_PROBS), 0, 0).numpy().tolist() == [1, 0]


def test_top_k_draws_only_among_the_k_most_likely():
    assert drawn(samplers.TopK(k=2)) == [[1, 3], [0, 2]]
    assert drawn(samplers.TopK(k=1)) == [[1], [0]]


def test_top_p_draws_among_the_smallest_set_reaching_p():
    # row 0: 0.5 then 0.4 reach 0.75; row 1: 0.6 then 0.2 do; at 0.85 row 1 needs a third
    assert drawn(samplers.TopP(p=0.75)) == [[1, 3], [0, 2]]
    assert drawn(samplers.TopP(p=0.85)) == [[1, 3], [0, 1, 2]]
    assert drawn(samplers.TopP(p=0.5)) == [[1], [0]]


def test_random_reaches_every_id_with_mass_and_is_a_function_of_seed_and_step():
    assert drawn(samplers.Random(), seeds=range(400)) == [[0, 1, 2, 3], [0, 1, 2, 3]]
    sampler, log_probs = samplers.Random(temperature=0.5), tf.constant(LOG_PROBS)
    assert sampler.next(log_probs, 7, 3).numpy().tolist() == sampler.next(log_probs, 7, 3).numpy().tolist()


def test_beam_keeps_the_best_extensions_and_ranks_by_length_penalty():
    scores, kept = samplers.Beam(num_beams=2).select(tf.constant([[-1.0, -0.5, -3.0, -0.7]]))
    assert kept.numpy().tolist() == [[1, 3]]
    np.testing.assert_allclose(scores.numpy(), [[-0.5, -0.7]])
    ranked = samplers.Beam(length_penalty=1.0).rank(tf.constant([-4.0, -6.0]), tf.constant([2.0, 4.0]))
    np.testing.assert_allclose(ranked.numpy(), [-2.0, -1.5])  # the longer one wins once normalised
    unranked = samplers.Beam(length_penalty=0.0).rank(tf.constant([-4.0, -6.0]), tf.constant([2.0, 4.0]))
    np.testing.assert_allclose(unranked.numpy(), [-4.0, -6.0])


def test_served_chooses_with_the_built_in_samplers():
    log_probs = tf.constant(LOG_PROBS)
    served = lambda t, k, p: samplers.Served(tf.constant(t), tf.constant(k), tf.constant(p))
    assert served(0.0, 0, 1.0).next(log_probs, 0, 0).numpy().tolist() == [1, 0]
    for seed in range(20):
        assert served(0.8, 2, 1.0).next(log_probs, seed, 1).numpy().tolist() == \
            samplers.TopP(p=1.0, temperature=0.8, k=2).next(log_probs, seed, 1).numpy().tolist()


def test_resolve_looks_the_name_up_and_its_keywords_on_the_class():
    assert samplers.resolve("top_k", top_k=5, temperature=0.5) == samplers.TopK(5, 0.5)
    assert samplers.resolve(None, top_p=0.8) == samplers.TopP(0.8)
    assert samplers.resolve(None, temperature=0) == samplers.Greedy()
    assert samplers.resolve(None, num_beams=3) == samplers.Beam(3)
    # one beam is no beam search, as the exported signature's default num_beams=1 reads it
    assert samplers.resolve(None, num_beams=1) == samplers.Random()
    assert samplers.resolve(None, num_beams=1, top_k=5) == samplers.TopK(5)
    assert samplers.resolve("top_p", num_beams=1, top_p=0.5) == samplers.TopP(0.5)
    assert samplers.resolve(None, num_beams=1, temperature=0) == samplers.Greedy()
    assert samplers.resolve("beam", num_beams=1) == samplers.Beam(1)
    assert samplers.resolve(samplers.TopK(3), num_beams=1) == samplers.TopK(3)
    assert samplers.resolve(None, num_beams=1, length_penalty=0.6) == samplers.Beam(1, 0.6)
    for not_one in (True, 1.0):  # only the whole number 1 is one beam
        with pytest.raises(ValueError, match="The top_k sampler does not take num_beams"):
            samplers.resolve("top_k", top_k=3, num_beams=not_one)
    with pytest.raises(ValueError, match="The top_k sampler does not take num_beams; it takes top_k, temperature"):
        samplers.resolve("top_k", num_beams=2)
    with pytest.raises(ValueError, match="Unknown sampler 'nucleus'"):
        samplers.resolve("nucleus")


def test_a_compiled_loop_is_specialised_to_static_parameters_only():
    assert samplers.TopP(0.5, 0.7).static_key() == samplers.TopP(0.9, 1.3).static_key()
    assert samplers.TopK(5).static_key() != samplers.TopK(6).static_key()


# ---- a sampler from outside the package ------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class MinP(samplers.Sampler):
    """min-p sampling: a draw among the tokens at least `ratio` times as likely as the likeliest."""

    ratio: float = 0.1

    def next(self, log_probs, seed, step):
        floor = tf.reduce_max(log_probs, axis=-1, keepdims=True) + tf.math.log(tf.cast(self.ratio, tf.float32))
        kept = tf.where(log_probs >= floor, log_probs, -np.inf)
        return samplers.draw(kept, tf.broadcast_to(tf.range(tf.shape(log_probs)[-1]), tf.shape(log_probs)), seed, step)


def test_an_outside_sampler_chooses_as_it_says():
    assert drawn(MinP(0.5)) == [[1, 3], [0]]


WORDS = "the a cat dog sat on mat big small red ran to house is was and of in it he".split()


@pytest.fixture(scope="module")
def tiny_lm():
    keras.utils.set_random_seed(0)
    model = GCNNLanguageModel(vocabulary_size=len(SPECIALS) + len(WORDS), embedding_dim=8,
                              blocks=[[[3, 16]], [[1, 4], [3, 4], [1, 16]]])
    model.tokenizer = WordTokenizer(list(SPECIALS) + WORDS)
    return model


@pytest.mark.ci
def test_an_outside_sampler_runs_through_generate_and_an_export_alike(tiny_lm, tmp_path):
    from zoo.export import export_saved_model

    sampler = MinP(0.3)
    prompts = ["the cat", "a dog sat"]
    ours = tiny_lm.generate(prompts, 12, sampler=sampler, seed=5, stop=None, jit_compile=False)
    # the same draws through XLA are not promised (see generate); the graph loop is what is served
    assert ours == tiny_lm.generate(prompts, 12, sampler=sampler, seed=5, stop=None, jit_compile=False)
    assert ours != tiny_lm.generate(prompts, 12, sampler="greedy", stop=None)
    path = export_saved_model(tiny_lm, str(tmp_path), name="tiny", sampler=sampler)
    served = tf.saved_model.load(path).signatures["generate"](
        text=tf.constant(prompts), max_new_tokens=tf.constant(12), seed=tf.constant(5),
        temperature=tf.constant(0.0), top_k=tf.constant(0), top_p=tf.constant(1.0), num_beams=tf.constant(1))
    assert [t.decode() for t in served["text"].numpy()] == ours


def test_an_export_refuses_a_non_sampler_in_one_sentence(tiny_lm, tmp_path):
    from zoo.export import export_saved_model

    with pytest.raises(ValueError, match=r"^sampler must be None .* got 'greedy'\.$"):
        export_saved_model(tiny_lm, str(tmp_path), name="tiny", sampler="greedy")
    assert not (tmp_path / "tiny").exists()


# ---- a sampler's own parameters reach every loop ---------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TensorMinP(MinP):
    """MinP whose `ratio` the compiled loop takes as a tensor and an export from each request."""

    dynamic = ("ratio",)
    request = ("ratio",)


@pytest.mark.parametrize("cls", [pytest.param(MinP, marks=pytest.mark.ci), TensorMinP])  # MinP's: 8 s
def test_an_outside_sampler_s_own_parameter_reaches_the_compiled_loop(tiny_lm, cls):
    """A ratio of 1 keeps the likeliest token alone (greedy's text); a small one draws among
    many. A compiled loop is specialised to a static ratio and takes a dynamic one as a tensor:
    either way each call decodes with its own ratio (a dynamic one that never reached the loop
    would repeat the first call's draws)."""
    prompts = [[1, 5, 6], [1, 7]]
    greedy = tiny_lm.generate(prompts, 10, sampler="greedy", stop=None, jit_compile=False)
    for jit in (True, False):
        tiny_lm.__dict__.pop("_generation_functions", None)
        wide = tiny_lm.generate(prompts, 10, sampler=cls(0.01), seed=3, stop=None, jit_compile=jit)
        assert tiny_lm.generate(prompts, 10, sampler=cls(1.0), seed=3, stop=None, jit_compile=jit) == greedy
        assert wide != greedy
        assert len(tiny_lm._generation_functions) == (1 if cls is TensorMinP else 2)


def test_an_export_s_sampler_parameters_are_checked_in_one_sentence(tiny_lm, tmp_path):
    from zoo.export import export_saved_model

    @dataclasses.dataclass(frozen=True)
    class Unknown(MinP):
        request = ("floor",)

    @dataclasses.dataclass(frozen=True)
    class Clash(MinP):
        seed: int = 0
        request = ("seed",)

    with pytest.raises(ValueError, match=r"lists 'floor' in request, which is not one of its parameters \(ratio\)"):
        export_saved_model(tiny_lm, str(tmp_path), name="tiny", sampler=Unknown())
    with pytest.raises(ValueError, match=r"lists 'seed' in request, which would be generate's own input 'seed'"):
        export_saved_model(tiny_lm, str(tmp_path), name="tiny", sampler=Clash())
    assert not (tmp_path / "tiny").exists()


def _zoo_export(path):
    import json
    import os

    with open(os.path.join(path, "assets.extra", "zoo_export.json")) as f:
        return json.load(f)


@pytest.mark.ci
def test_an_exported_sampler_s_parameters_are_fixed_and_recorded_unless_requested(tiny_lm, tmp_path):
    """MinP's ratio is fixed at export and recorded; TensorMinP's is an input of `generate`
    (its default the exported value): a request's ratio of 1 writes greedy's text."""
    from zoo.export import export_saved_model

    prompts = ["the cat", "a dog sat"]
    ours = tiny_lm.generate(prompts, 12, sampler=MinP(0.3), seed=5, jit_compile=False)
    greedy = tiny_lm.generate(prompts, 12, sampler="greedy", jit_compile=False)
    fixed, requested = (export_saved_model(tiny_lm, str(tmp_path), name=name, sampler=cls(0.3))
                        for name, cls in (("fixed", MinP), ("requested", TensorMinP)))
    meta = _zoo_export(fixed)
    assert meta["sampler_parameters"] == {"fixed": {"ratio": 0.3}, "request": {}}
    assert "ratio" not in meta["signatures"]["generate"]["inputs"] and "l2_cache_bytes" not in meta
    meta = _zoo_export(requested)
    assert meta["sampler_parameters"] == {"fixed": {}, "request": {"ratio": "ratio"}}
    assert meta["signatures"]["generate"]["inputs"]["ratio"] == {"dtype": "float32", "shape": []}
    assert meta["signatures"]["generate"]["defaults"]["ratio"] == 0.3
    texts = lambda out: [t.decode() for t in out["text"].numpy()]  # noqa: E731
    request = dict(text=tf.constant(prompts), max_new_tokens=tf.constant(12), seed=tf.constant(5),
                   temperature=tf.constant(1.0), top_k=tf.constant(0), top_p=tf.constant(1.0), num_beams=tf.constant(1))
    assert texts(tf.saved_model.load(fixed).signatures["generate"](**request)) == ours
    generate = tf.saved_model.load(requested).signatures["generate"]
    assert texts(generate(**request, ratio=tf.constant(0.3))) == ours
    assert texts(generate(**request, ratio=tf.constant(1.0))) == greedy


@pytest.mark.ci
def test_beam_search_is_exported_like_any_sampler(tiny_lm, tmp_path):
    """An export with `Beam(3, 0.5)` runs beam search's own loop, its parameters fixed and
    recorded: the text `lm.generate` writes with it, whatever the request's sampling inputs."""
    from zoo.export import export_saved_model

    prompts = ["the cat", "a dog sat", "he"]
    ours = tiny_lm.generate(prompts, 8, sampler=samplers.Beam(3, 0.5))
    path = export_saved_model(tiny_lm, str(tmp_path), name="beam", sampler=samplers.Beam(3, 0.5))
    assert _zoo_export(path)["sampler_parameters"] == {"fixed": {"num_beams": 3, "length_penalty": 0.5},
                                                       "request": {}}
    generate = tf.saved_model.load(path).signatures["generate"]
    served = generate(text=tf.constant(prompts), max_new_tokens=tf.constant(8), seed=tf.constant(0),
                      temperature=tf.constant(1.0), top_k=tf.constant(2), top_p=tf.constant(1.0),
                      num_beams=tf.constant(1))
    assert [t.decode() for t in served["text"].numpy()] == ours


def test_beam_search_returns_every_beam_with_its_log_probability_and_score(tiny_lm):
    prompt = [1, 5, 6]
    beams = tiny_lm.generate(prompt, 4, sampler="beam", num_beams=3, length_penalty=0.5, stop=None,
                             return_all_beams=True)
    assert len(beams) == 3 and len({tuple(b["output"]) for b in beams}) == 3
    assert [b["score"] for b in beams] == sorted((b["score"] for b in beams), reverse=True)
    for beam in beams:  # the log-probability of its new tokens, recomputed; the score its ranking
        ids = np.array(beam["output"])
        assert ids[:3].tolist() == prompt and len(ids) == 7
        log_probs = tiny_lm.log_probs(ids[None, :-1])[0]
        expected = sum(log_probs[t - 1, ids[t]] for t in range(3, 7))
        np.testing.assert_allclose(beam["log_prob"], expected, rtol=1e-4)
        np.testing.assert_allclose(beam["score"], beam["log_prob"] / 4 ** 0.5, rtol=1e-6)
    best = tiny_lm.generate(prompt, 4, sampler="beam", num_beams=3, length_penalty=0.5, stop=None)
    greedy = tiny_lm.generate(prompt, 4, sampler="greedy", stop=None)
    assert best in (beams[0]["output"], greedy)  # generate's answer: the best beam, or greedy when it ranks higher
    texts = tiny_lm.generate(["w1 w2", "w3"], 2, sampler="beam", num_beams=2, stop=None, return_all_beams=True)
    assert [len(t) for t in texts] == [2, 2] and all(isinstance(b["output"], str) for t in texts for b in t)
    with pytest.raises(ValueError, match=r"^return_all_beams=True returns beam search's beams; the sampler is "
                                         r"'greedy': give sampler=\"beam\" \(or num_beams=k\)\.$"):
        tiny_lm.generate(prompt, 4, sampler="greedy", return_all_beams=True)


def test_a_request_s_tensors_pass_the_constructor_and_python_values_are_still_checked():
    """The exported signature builds its samplers with their own constructors (no __new__ or
    object.__setattr__): a tensor parameter is left to the signature's assertions."""
    import dataclasses

    import pytest
    import tensorflow as tf

    from zoo.models.samplers import Beam, Served, TopK, TopP

    k, p, t = tf.constant(3), tf.constant(0.5), tf.constant(0.7)
    assert TopP(p=p, temperature=t, k=k).p is p and Beam(tf.constant(2)).length_penalty == 1.0
    bound = TopK(k=5).bound(k=k, temperature=t)
    assert dataclasses.is_dataclass(bound) and bound.k is k and bound.temperature is t
    with pytest.raises(ValueError, match=r"top_k must be an integer >= 1, got 0\."):
        TopK(k=5).bound(k=0)
    with pytest.raises(ValueError, match=r"num_beams must be an integer >= 1"):
        Beam(0)
    log_probs = tf.math.log([[0.1, 0.7, 0.2]])
    served = Served(temperature=tf.constant(1.0), top_k=tf.constant(1), top_p=tf.constant(1.0))
    assert served.next(log_probs, seed=tf.constant(0, tf.int64), step=tf.constant(0)).numpy().tolist() == [1]
