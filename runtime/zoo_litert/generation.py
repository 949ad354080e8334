"""`LiteRTModel.generate`'s pieces, with `lm.generate`'s rules: the prompts as rows of ids, the
stops (`</s>`, stop texts and stop ids), the loops that continue one row (prefill once, then one
decode per new token, or the export's `greedy` signature, several tokens a call) and the text it
returns."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from zoo_litert.tokenizers import Tokenizer

MAX_NEW_TOKENS = 1 << 20  # as lm.generate
STOP_ACCEPTED = "a string, an id, a list of ids (one sequence), or a list of those"


def is_int(value: Any) -> bool:
    """Whether `value` is a whole number (an int or numpy integer, not a bool)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _empty(index: int, prompt: Any) -> ValueError:
    return ValueError(f"Prompt {index} ({prompt!r}) is empty: give a text with at least one token, or a non-empty "
                      "list of ids (starting with <s>).")


def prompt_rows(tokenizer: Tokenizer, prompts: Any) -> tuple[list[list[int]], bool, bool]:
    """`(rows of ids, whether they came as text, whether one prompt was given)`, as `lm.generate`
    reads `prompts` (a text is `<s>` and its ids); an empty prompt, ids outside the vocabulary and
    anything but text or ids are refused in one sentence.

    Returns:
        The tuple above.

    Example:

    >>> from zoo_litert.tokenizers import WordTokenizer
    >>> prompt_rows(WordTokenizer(["<pad>", "<s>", "</s>", "<unk>", "hi"]), "hi")
    ([[1, 4]], True, True)
    """
    if isinstance(prompts, np.ndarray):
        prompts = prompts.tolist()
    if isinstance(prompts, (str, bytes)):
        prompts, single, as_text = [prompts], True, True
    elif isinstance(prompts, (list, tuple)) and prompts:
        texts = [isinstance(p, (str, bytes)) for p in prompts]
        if any(texts) and not all(texts):
            raise ValueError("prompts mixes strings with ids: give a list of strings or a list of id lists.")
        as_text = all(texts)
        single = not as_text and not any(isinstance(p, (list, tuple, np.ndarray)) for p in prompts)
        prompts = [prompts] if single else prompts
    else:
        raise ValueError(f"prompts must be a string, a list of strings, a list of ids or a list of id lists, got "
                         f"{prompts!r}.")
    rows = []
    for index, prompt in enumerate(prompts):
        row = tokenizer.encode(prompt, add_eos=False) if as_text else tokenizer.check_ids(prompt)
        if len(row) <= as_text:  # a text with no token but <s>, or no id at all
            raise _empty(index, prompt)
        rows.append(row)
    return rows, as_text, single


def stop_rules(tokenizer: Tokenizer, stop: Any, as_text: bool) -> tuple[int | None, list[tuple[int, ...]], list[str]]:
    """`(the id that ends a row or None, stop id sequences, stop texts)` of `generate`'s `stop`:
    "auto" (`</s>`), None (nothing: every row runs to `max_new_tokens`), or a string, an id, a list
    of ids, or a list of those, besides `</s>`; as `lm.generate` reads it.

    Returns:
        The tuple above.

    Example:

    >>> from zoo_litert.tokenizers import WordTokenizer
    >>> stop_rules(WordTokenizer(["<pad>", "<s>", "</s>", "<unk>", "hi"]), ["hi", [4, 4]], as_text=True)
    (2, [(4,), (4, 4)], ['hi'])
    """
    if stop is None or isinstance(stop, str) and stop == "auto":
        return (None if stop is None else tokenizer.eos_id), [], []
    items = [stop] if isinstance(stop, (str, bytes, numbers.Integral)) else stop
    if not isinstance(items, (list, tuple)) or not items:
        raise ValueError(f"stop must be 'auto', None, {STOP_ACCEPTED}; got {stop!r}.")
    sequences, texts = [], []
    for item in items:
        item = item.decode("utf-8", "replace") if isinstance(item, bytes) else item
        if isinstance(item, str):
            if not item.strip():
                raise ValueError(f"A stop text must hold more than whitespace, got {item!r}.")
            if not as_text:
                raise ValueError(f"A stop text ({item!r}) needs text prompts; with id prompts give stop ids.")
            texts.append(item)
            ids = tokenizer.encode(item, add_bos=False, add_eos=False)
            if ids and tokenizer.unk_id not in ids:  # the loop stops early on it; the text is cut anyway
                sequences.append(tuple(ids))
            continue
        sequence = [item] if is_int(item) else item
        if not isinstance(sequence, (list, tuple, np.ndarray)) or len(sequence) == 0 or \
                not all(is_int(i) for i in sequence):
            raise ValueError(f"A stop is {STOP_ACCEPTED}; got {item!r}.")
        sequences.append(tuple(tokenizer.check_ids(sequence)))
    return tokenizer.eos_id, sequences, texts


def continue_row(prefill: Callable, decode: Callable, choose: Callable[[np.ndarray], int], row: Sequence[int],
                 max_new_tokens: int, eos: int | None, sequences: Sequence[tuple[int, ...]]) -> list[int]:
    """`row` and up to `max_new_tokens` new ids, each chosen by `choose(log_probs)`; the row ends
    after `eos` or once its new ids end with one of `sequences`. `prefill(ids)` gives the
    prompt's `(log_probs, state)`, `decode(id, state)` the next.

    Returns:
        The prompt's ids and the new ones.

    Example:

    >>> prefill = lambda ids: (np.log([0.1, 0.2, 0.7]), None)
    >>> decode = lambda token, state: (np.log([0.1, 0.8, 0.1]), None)
    >>> continue_row(prefill, decode, lambda scores: int(scores.argmax()), [1], 5, eos=None, sequences=[(2, 1)])
    [1, 2, 1]
    """
    ids, start = list(row), len(row)
    log_probs, state = prefill(ids)
    for step in range(max_new_tokens):
        ids.append(choose(log_probs))
        if _ends(ids, start, eos, sequences):
            break
        if step + 1 < max_new_tokens:
            log_probs, state = decode(ids[-1], state)
    return ids


def _ends(ids: Sequence[int], start: int, eos: int | None, sequences: Sequence[tuple[int, ...]]) -> bool:
    """Whether a row whose new ids begin at `start` ends with its last id: `eos`, or new ids
    ending with one of `sequences`."""
    return ids[-1] == eos or any(len(ids) - len(s) >= start and tuple(ids[-len(s):]) == s for s in sequences)


def continue_row_greedily(begin: Callable, greedy: Callable, row: Sequence[int], max_new_tokens: int,
                          eos: int | None, sequences: Sequence[tuple[int, ...]]) -> list[int]:
    """`continue_row` for greedy decoding, several tokens a call: `begin(row)` gives the ids to
    feed first and the state before them, `greedy(fed, state, steps)` (the export's `greedy`
    signature) feeds them, then gives the next `steps` greedy ids (asked for the tokens still
    wanted) and the state before the last of them, which the next call feeds; the row's ids stop
    where `continue_row`'s would.

    Returns:
        The prompt's ids and the new ones.

    Example:

    >>> begin = lambda row: (row, None)
    >>> greedy = lambda fed, state, steps: ([5, 6, 2, 7][:steps], None)
    >>> continue_row_greedily(begin, greedy, [1], 10, eos=2, sequences=[])
    [1, 5, 6, 2]
    >>> continue_row_greedily(begin, greedy, [1], 1, eos=2, sequences=[])
    [1, 5]
    """
    ids, start = list(row), len(row)
    fed, state = begin(ids)
    while True:
        tokens, state = greedy(fed, state, max_new_tokens - (len(ids) - start))
        fed = tokens[-1:]
        if not sequences:  # only `eos` ends the row early: one search of the call's tokens
            if eos in tokens:
                return ids + tokens[:tokens.index(eos) + 1]
            ids += tokens
            if len(ids) - start == max_new_tokens:
                return ids
            continue
        for token in tokens:
            ids.append(token)
            if len(ids) - start == max_new_tokens or _ends(ids, start, eos, sequences):
                return ids


def output_text(tokenizer: Tokenizer, ids: Sequence[int], prompt_length: int, stop_texts: Sequence[str]) -> str:
    """The text `generate` returns for a row: its ids decoded whole characters only, cut just
    before the first stop text that appears after the prompt (and the spaces before it).

    Returns:
        The text.

    Example:

    >>> from zoo_litert.tokenizers import WordTokenizer
    >>> tokenizer = WordTokenizer(["<pad>", "<s>", "</s>", "<unk>", "a", "b"])
    >>> output_text(tokenizer, [1, 4, 5, 4, 5], 2, ["b a"])
    'a'
    """
    text = tokenizer.decode(ids, whole_characters=True)
    if stop_texts:
        start = len(tokenizer.decode(ids[:prompt_length]))
        cuts = [i for i in (text.find(s, start) for s in stop_texts) if i >= 0]
        if cuts:
            text = text[:min(cuts)].rstrip()
    return text


def check_options(max_new_tokens: Any, seed: Any) -> None:
    """Refuses, in one sentence, a `max_new_tokens` outside [1, 2**20] and a seed that is not an
    integer (or None).

    Returns:
        None.

    Example:

    >>> check_options(20, None)
    """
    if not is_int(max_new_tokens) or not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise ValueError(f"max_new_tokens must be an integer in [1, {MAX_NEW_TOKENS}], got {max_new_tokens!r}.")
    if seed is not None and not is_int(seed):
        raise ValueError(f"seed must be an integer or None, got {seed!r}.")


__all__ = ["prompt_rows", "stop_rules", "continue_row", "continue_row_greedily", "output_text", "check_options"]
