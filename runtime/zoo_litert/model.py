"""`LiteRTModel`: a LiteRT export of the zoo (`zoo.export.export_litert`'s directory), run with
`ai_edge_litert`'s interpreter and numpy alone: `score` and `generate` as a zoo `LanguageModel`
answers them, `tokenize` / `detokenize` from the export's tokenizer files, and the file's
signatures one call at a time (`prefill`, `decode`).

Several requests at once: each thread that calls the model gets an interpreter of its own (a
`threading.local`), made on its first call; the interpreters share nothing but the file, so
calls from a thread pool run side by side and give what the same calls give one after another.
The signatures are batch 1: a list of prompts or texts is run one row at a time.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

try:
    from ai_edge_litert.interpreter import Interpreter
except ImportError as e:  # the library's plain install has no LiteRT runtime
    raise ImportError("zoo_litert runs an export with LiteRT's runtime, ai-edge-litert, which is not installed: "
                      "pip install ai-edge-litert (or the library with its extra, pip install -e '.[litert]', or "
                      "pip install ./runtime from a checkout).") from e

from zoo_litert import generation, sampling
from zoo_litert.tokenizers import Tokenizer, load_tokenizer

MODEL_FILE = "model.tflite"
METADATA_FILE = "zoo_litert.json"
SIGNATURES = ("prefill", "decode", "sample")  # and `greedy` where the export has it


def read_metadata(path: str) -> dict:
    """The export's `zoo_litert.json`, refusing in one sentence a directory that is not a LiteRT
    export of the zoo, or one made before the `sample` signature.

    Returns:
        The JSON as a dict.

    Example:

    >>> import zoo_litert
    >>> read_metadata(zoo_litert.EXAMPLE)["format"]
    'litert'
    """
    metadata = os.path.join(path, METADATA_FILE)
    try:
        with open(metadata, encoding="utf-8") as f:
            about = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path} is not a LiteRT export of the zoo: its {METADATA_FILE} is missing or not JSON "
                         f"({e}).") from None
    if not isinstance(about, dict) or about.get("format") != "litert" or not os.path.isfile(
            os.path.join(path, MODEL_FILE)):
        raise ValueError(f"{path} is not a LiteRT export of the zoo: it needs {MODEL_FILE} and a {METADATA_FILE} "
                         "whose format is 'litert'.")
    missing = [name for name in SIGNATURES if name not in about.get("signatures", {})]
    if missing:
        raise ValueError(f"{path} was exported without the signature {', '.join(missing)} that this runtime calls: "
                         "export the model again with this zoo (zoo export --format litert).")
    return about


class LiteRTModel:
    """A LiteRT export of the zoo, run without TensorFlow (the module docstring).

    Args:
        path: the export's directory (`model.tflite`, `zoo_litert.json`, the tokenizer's files).
        num_threads: the threads each interpreter's kernels use (None: LiteRT's default).

    Example:

    >>> import zoo_litert
    >>> model = zoo_litert.LiteRTModel(zoo_litert.EXAMPLE)
    >>> model.vocabulary_size, model.tokenizer.kind
    (19, 'word')
    >>> model.generate("the cat", max_new_tokens=4, sampler="greedy")
    'the cat sat on the mat'
    """

    def __init__(self, path: str | os.PathLike, num_threads: int | None = None):
        self.path = os.path.abspath(os.fspath(path))
        self.about = read_metadata(self.path)
        self.tokenizer: Tokenizer = load_tokenizer(self.path, self.about.get("tokenizer"))
        self.vocabulary_size = int(self.about["vocabulary_size"])
        self.state_size = int(self.about["state"]["size"])
        # the most ids a `greedy` call takes and writes; 0 where the file has no such loop (then a
        # token a call), as a tied int8 file, or an export whose loop took a distribution instead
        greedy = self.about["signatures"].get("greedy", {}).get("inputs", {})
        self.greedy_steps = int(greedy["token_ids"]["shape"][1]) if "count" in greedy else 0
        self.num_threads = num_threads
        self.never = np.zeros(self.vocabulary_size, np.float32)  # added to every step's scores
        self.never[self.about["never_emitted"]] = -np.inf
        self._local = threading.local()
        self._runners()  # this thread's interpreter: a file LiteRT cannot read fails here

    def __repr__(self) -> str:
        return f"LiteRTModel({self.path!r}, {self.about.get('family')}, {self.vocabulary_size} ids)"

    def _runners(self) -> dict:
        """This thread's signature runners, its interpreter made on its first call."""
        runners = getattr(self._local, "runners", None)
        if runners is None:
            interpreter = Interpreter(model_path=os.path.join(self.path, MODEL_FILE), num_threads=self.num_threads)
            runners = {name: interpreter.get_signature_runner(name) for name in interpreter.get_signature_list()}
            self._local.interpreter, self._local.runners = interpreter, runners
        return runners

    # -- the signatures, one call each ---------------------------------------------------------

    def check_ids(self, token_ids: Iterable[int]) -> list[int]:
        """`token_ids` (one row) as ints, refusing in one sentence an id outside the vocabulary.

        Returns:
            The ids.

        Example:

        >>> import zoo_litert
        >>> zoo_litert.load(zoo_litert.EXAMPLE).check_ids([1, 19])
        Traceback (most recent call last):
        ...
        ValueError: Token id 19 is outside the vocabulary: ids must be in [0, 18].
        """
        return self.tokenizer.check_ids(token_ids)

    def prefill(self, token_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The `prefill` signature on one prompt's ids (`<s>` first, at least one id).

        Returns:
            `(token_log_probs [time - 1], log_probs [vocabulary], state [1, state size])`: each
            id's log-probability after what precedes it, the next id's, and the decoding state.

        Example:

        >>> import zoo_litert
        >>> model = zoo_litert.load(zoo_litert.EXAMPLE)
        >>> [part.shape for part in model.prefill([1, 4, 6])]
        [(2,), (19,), (1, 64)]
        """
        ids = self.check_ids(token_ids)
        if not ids:
            raise ValueError("prefill was given no id: give a prompt's ids, <s> (id 1) first.")
        out = self._runners()["prefill"](token_ids=np.array([ids], np.int32))
        return out["token_log_probs"][0], out["log_probs"][0], out["state"]

    def decode(self, token_id: int, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The `decode` signature: one id after the state `prefill` or `decode` returned (zeros
        before the first id); a state of another shape is refused in one sentence.

        Returns:
            `(log_probs [vocabulary], state [1, state size])`: the next id's, and the new state.

        Example:

        >>> import numpy as np, zoo_litert
        >>> model = zoo_litert.load(zoo_litert.EXAMPLE)
        >>> log_probs, state = model.decode(4, np.zeros([1, model.state_size], np.float32))
        >>> log_probs.shape, state.shape
        ((19,), (1, 64))
        """
        (token,) = self.check_ids([token_id])
        state = np.asarray(state)
        if state.shape not in ((1, self.state_size), (self.state_size,)) or not np.issubdtype(state.dtype,
                                                                                             np.floating):
            raise ValueError(f"The state has shape {state.shape} and dtype {state.dtype}; decode takes the float32 "
                             f"state of shape (1, {self.state_size}) that prefill or decode returned.")
        return self._decode(token, state.reshape(1, -1).astype(np.float32, copy=False))

    def _decode(self, token: int, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = self._runners()["decode"](token_ids=np.array([token], np.int32), state=state)
        return out["log_probs"][0], out["state"]

    def draw(self, scores: np.ndarray, noise: np.ndarray, settings: sampling.Sampling) -> int:
        """The `sample` signature: a draw among the library's candidates of `scores` (a step's
        log-probabilities) with `settings`, Gumbel-max on `noise` (`sampling.uniform_noise`).

        Returns:
            The id drawn.

        Example:

        >>> import numpy as np, zoo_litert
        >>> from zoo_litert import sampling
        >>> model = zoo_litert.load(zoo_litert.EXAMPLE)
        >>> scores = np.log(np.full(19, 1 / 19, np.float32))
        >>> noise = sampling.uniform_noise(sampling.noise_generator(0, 0), 19)
        >>> model.draw(scores, noise, sampling.Sampling("top_k", top_k=1)) == 0  # k = 1: the first of equals
        True
        """
        out = self._runners()["sample"](log_probs=np.asarray(scores, np.float32).reshape(1, -1), noise=noise,
                                        **settings.inputs(self.vocabulary_size))
        return int(out["token_ids"][0])

    # -- text --------------------------------------------------------------------------------------

    def tokenize(self, text: str | bytes, add_bos: bool = True, add_eos: bool = True) -> list[int]:
        """The ids of one line, as the model's tokenizer gives them (`<s> … </s>` unless told otherwise).

        Returns:
            The ids.

        Example:

        >>> import zoo_litert
        >>> zoo_litert.load(zoo_litert.EXAMPLE).tokenize("the cat")
        [1, 4, 6, 2]
        """
        return self.tokenizer.encode(text, add_bos, add_eos)

    def detokenize(self, token_ids: Iterable[int]) -> str:
        """The text of ids, `<pad>`, `<s>` and `</s>` dropped (ids outside the vocabulary refused).

        Returns:
            The text.

        Example:

        >>> import zoo_litert
        >>> zoo_litert.load(zoo_litert.EXAMPLE).detokenize([1, 4, 6, 2])
        'the cat'
        """
        return self.tokenizer.decode(token_ids)

    def score(self, texts_or_ids: str | Sequence[str] | Sequence[Sequence[int]]) -> list[np.ndarray]:
        """The log-probability of each actual next word (or token), as `lm.score` gives it.

        Args:
            texts_or_ids: a string or a list of strings (each read as `<s> … </s>`), or ids: a list
                of id lists, or one flat list of ids (one row).

        Returns:
            One float32 array per text or row. For a text: one log-probability per whitespace
            word and one for `</s>` (a subword model's pieces summed per word); for ids, those of
            ids 1 … n − 1 given what precedes each.

        Example:

        >>> import zoo_litert
        >>> [scores.shape for scores in zoo_litert.load(zoo_litert.EXAMPLE).score(["the cat sat", "a dog"])]
        [(4,), (3,)]
        """
        rows, as_text = self._score_rows(texts_or_ids)
        out = [self._prefill_scores(row) for row in rows]
        if as_text and self.tokenizer.scores_per_word:
            for i, row in enumerate(rows):
                words = np.asarray(self.tokenizer.word_index(row)[1:])  # the word of each target
                out[i] = np.bincount(words, weights=out[i], minlength=words.max() + 1).astype("float32")
        return out

    def _prefill_scores(self, row):
        return self._runners()["prefill"](token_ids=np.array([row], np.int32))["token_log_probs"][0]

    def _score_rows(self, texts_or_ids):
        """`(rows of ids, whether they came as text)` of `score`'s argument, as `lm.score` reads it."""
        items = [texts_or_ids] if isinstance(texts_or_ids, str) else texts_or_ids
        if not isinstance(items, (list, tuple, np.ndarray)):
            raise ValueError(f"score takes a string, a list of strings, a list of ids or a list of id lists, got "
                             f"{type(texts_or_ids).__name__}.")
        items = list(items)
        as_text = bool(items) and all(isinstance(i, str) for i in items)
        if any(isinstance(i, str) for i in items) and not as_text:
            raise ValueError("score was given strings mixed with ids: give a list of strings or a list of id lists.")
        if items and all(generation.is_int(i) for i in items):
            items = [items]  # one flat list of ids: one row
        rows = self.tokenizer.encode_batch(items) if as_text else [self.check_ids(i) for i in items]
        for index, row in enumerate(rows):
            if len(row) < 2:
                raise ValueError(f"Row {index} has {len(row)} token{'' if len(row) == 1 else 's'}; a sequence to "
                                 "score needs at least two (a context and a target).")
        return rows, as_text

    # -- generation ------------------------------------------------------------------------------

    def generate(self, prompts: str | Sequence[str] | Sequence[int] | Sequence[Sequence[int]],
                 max_new_tokens: int | None = None, temperature: float | None = None, top_k: int | None = None,
                 seed: int | None = None, *, sampler: Any = None, top_p: float | None = None,
                 num_beams: int | None = None, stop: Any = "auto") -> str | list[str] | list[int] | list[list[int]]:
        """Continue each prompt by up to `max_new_tokens` new tokens (default 20), as `lm.generate`.

        Args:
            prompts: a string, a list of strings, one id list or a list of id lists.
            max_new_tokens: new tokens per prompt, in [1, 2**20] (default 20).
            temperature, top_k, top_p: the sampler's parameters; `num_beams` only 1 (no beam search).
            seed: the draws' seed (None: a random one); the same seed gives the same tokens.
            sampler: "greedy", "random", "top_k", "top_p", a `zoo.samplers` object of those, or
                None: implied as `lm.generate` implies it (`temperature=0` greedy, `top_p`,
                `top_k`, else a draw at `temperature`, 1.0).
            stop: "auto" (`</s>`), a string, an id, a list of them, or None (no stop at all).

        Returns:
            Like `prompts`: a string (the prompt and its continuation, detokenised), a list of
            strings, an id list or a list of id lists (the prompt's ids, then the new ones).

        Example:

        >>> import zoo_litert
        >>> model = zoo_litert.load(zoo_litert.EXAMPLE)
        >>> model.generate(["the cat", "a dog"], 4, sampler="greedy", stop="mat")
        ['the cat sat on the', 'a dog sat on the']
        >>> model.generate("the", 6, sampler="top_k", top_k=3, seed=1) == model.generate("the", 6, top_k=3, seed=1)
        True
        """
        max_new_tokens = 20 if max_new_tokens is None else max_new_tokens
        generation.check_options(max_new_tokens, seed)
        settings = sampling.resolve(sampler, temperature, top_k, top_p, num_beams, self.vocabulary_size)
        rows, as_text, single = generation.prompt_rows(self.tokenizer, prompts)
        eos, sequences, stop_texts = generation.stop_rules(self.tokenizer, stop, as_text)
        greedy = settings.name == "greedy"  # which draws nothing
        if seed is None and not greedy:
            seed = int(np.random.default_rng().integers(2**62))
        out = []
        for index, row in enumerate(rows):
            # several tokens a call from the loop in the file, where the export has it (not a tied int8 one)
            if greedy and self.greedy_steps:
                ids = generation.continue_row_greedily(self._greedy_begin, self._greedy, row, max_new_tokens, eos,
                                                       sequences)
            else:
                choose = self._chooser(settings, None if greedy else sampling.noise_generator(seed, index))
                ids = generation.continue_row(self._prefill_next, self._decode, choose, row, max_new_tokens, eos,
                                              sequences)
            out.append(generation.output_text(self.tokenizer, ids, len(row), stop_texts) if as_text else ids)
        return out[0] if single else out

    def _prefill_next(self, ids):
        out = self._runners()["prefill"](token_ids=np.array([ids], np.int32))
        return out["log_probs"][0], out["state"]

    def _greedy_begin(self, ids):
        """What the `greedy` loop feeds first, and the state before it: a prompt that fits a call
        whole, after the zero state; a longer one's last id, after `prefill` of the others."""
        if len(ids) <= self.greedy_steps:
            return ids, np.zeros([1, self.state_size], np.float32)
        return ids[-1:], self._runners()["prefill"](token_ids=np.array([ids[:-1]], np.int32))["state"]

    def _greedy(self, fed, state, steps):
        """The `greedy` signature: feeds `fed` after `state`, then the next `steps` greedy ids (at
        most a call's), and the state after all but the last of them."""
        steps, token_ids = min(steps, self.greedy_steps), np.zeros([1, self.greedy_steps], np.int32)
        token_ids[0, :len(fed)] = fed
        out = self._runners()["greedy"](token_ids=token_ids, count=np.array([len(fed)], np.int32), state=state,
                                        steps=np.array([steps], np.int32))
        return out["token_ids"][0, :steps].tolist(), out["state"]

    def _chooser(self, settings, rng):
        """`choose(log_probs) -> id` of one prompt: the ids never written at −inf, then greedy or
        a draw through the `sample` signature on `rng`'s noise."""
        if settings.name == "greedy":
            return lambda log_probs: sampling.greedy(log_probs + self.never)
        return lambda log_probs: self.draw(log_probs + self.never, sampling.uniform_noise(rng, self.vocabulary_size),
                                           settings)


def load(path: str | os.PathLike, num_threads: int | None = None) -> LiteRTModel:
    """The LiteRT export in the directory `path` (`zoo export --format litert`'s), ready to run.

    Args:
        path: the export's directory.
        num_threads: the threads each interpreter's kernels use (None: LiteRT's default).

    Returns:
        A `LiteRTModel`.

    Example:

    >>> import zoo_litert
    >>> model = zoo_litert.load(zoo_litert.EXAMPLE)
    >>> round(float(model.score(["the cat sat on the mat"])[0].sum()), 1) < 0
    True
    """
    return LiteRTModel(path, num_threads)


__all__ = ["LiteRTModel", "load", "read_metadata", "MODEL_FILE", "METADATA_FILE", "SIGNATURES"]
