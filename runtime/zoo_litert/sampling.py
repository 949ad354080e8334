"""How `LiteRTModel.generate` chooses each new token, with `lm.generate`'s samplers and meanings:

- "greedy": the most likely id (the lowest of equals, as `tf.argmax`), computed here;
- "random" (temperature), "top_k" (k, temperature) and "top_p" (p, temperature, k): a draw
  among the library's candidates, made inside the flatbuffer by its `sample` signature (the
  rule of `zoo.models.samplers.candidates`, exported with the model, so it exists once). This
  module only makes the draw's noise: one uniform number in (0, 1) per id and step, from
  numpy's PCG64 seeded with the request's seed and the prompt's index, the same on every call
  and every machine.

A sampler is given as `generate` takes it: a name, a `zoo.samplers` object (Greedy, Random,
TopK, TopP, read by their fields: the runtime does not import the zoo), or None (then, as
`lm.generate`: `temperature=0` greedy, `top_p` top-p, `top_k` top-k, else a draw from the whole
distribution at `temperature`, 1.0 by default). Beam search and samplers of one's own are not in
the file and are refused in one sentence.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

import numpy as np

NAMES = ("greedy", "random", "top_k", "top_p")
TAKES = {"greedy": (), "random": ("temperature",), "top_k": ("top_k", "temperature"),
         "top_p": ("top_p", "temperature", "top_k")}
# zoo.samplers' classes the file carries, and the fields each has under generate's keywords
ZOO_SAMPLERS = {"Greedy": ("greedy", {}), "Random": ("random", {"temperature": "temperature"}),
                "TopK": ("top_k", {"top_k": "k", "temperature": "temperature"}),
                "TopP": ("top_p", {"top_p": "p", "temperature": "temperature", "top_k": "k"})}
NOISE_BITS = 23  # noise values (m + 0.5) / 2**23: exact in float32, never 0 or 1


@dataclasses.dataclass(frozen=True)
class Sampling:
    """A sampler the file carries: `name` one of `NAMES`, with `temperature`, `top_k` (None: no
    top-k) and `top_p` (None: no top-p), checked as `lm.generate` checks them.

    Example:

    >>> Sampling("top_k", top_k=40, temperature=0.8)
    Sampling(name='top_k', temperature=0.8, top_k=40, top_p=None)
    >>> Sampling("random", temperature=0)
    Traceback (most recent call last):
    ...
    ValueError: temperature=0 is greedy decoding, which draws nothing: use sampler='greedy' (or no sampler), or a temperature > 0 to sample.
    """

    name: str
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self):
        if self.name == "greedy":
            return
        _check_temperature(self.temperature)
        if self.top_k is not None:
            _check_k(self.top_k)
        p = self.top_p
        if p is not None and (isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 < p <= 1):
            raise ValueError(f"top_p must be a number in (0, 1], got {p!r}.")

    def inputs(self, vocabulary_size: int) -> dict[str, np.ndarray]:
        """The `sample` signature's settings: `top_k` the vocabulary size and `top_p` 1 where off.

        Returns:
            `{"temperature", "top_k", "top_p"}` as the signature's `[1]` arrays.

        Example:

        >>> Sampling("top_p", top_p=0.9).inputs(100)["top_k"]
        array([100], dtype=int32)
        """
        return {"temperature": np.array([self.temperature], np.float32),
                "top_k": np.array([min(self.top_k or vocabulary_size, vocabulary_size)], np.int32),
                "top_p": np.array([1.0 if self.top_p is None else self.top_p], np.float32)}


def _check_temperature(temperature):
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0 (0 is greedy), got {temperature!r}.")
    if temperature == 0:
        raise ValueError("temperature=0 is greedy decoding, which draws nothing: use sampler='greedy' (or no "
                         "sampler), or a temperature > 0 to sample.")


def _check_k(k, vocabulary_size=None):
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1 or \
            vocabulary_size is not None and k > vocabulary_size:
        accepted = f"in [1, {vocabulary_size}] (the vocabulary size)" if vocabulary_size else "an integer >= 1"
        raise ValueError(f"top_k must be {accepted}, got {k!r}.")


def _cannot_carry(what: str) -> ValueError:
    return ValueError(f"{what} cannot run from a LiteRT export, whose file carries greedy "
                      f"decoding and the random, top-k and top-p draws only: give sampler= one of {list(NAMES)} "
                      "(or zoo.samplers.Greedy, Random, TopK or TopP).")


def _from_object(sampler: Any, given: dict) -> Sampling:
    """A `zoo.samplers` object the file carries, read by its fields."""
    cls = type(sampler)
    if cls.__module__ != "zoo.models.samplers" or cls.__name__ not in ZOO_SAMPLERS:
        raise _cannot_carry(f"The sampler {sampler!r}")
    if given:
        raise ValueError(f"Give the sampler's parameters to the sampler object {sampler!r}, not also as "
                         f"{', '.join(sorted(given))}.")
    name, fields = ZOO_SAMPLERS[cls.__name__]
    return Sampling(name, **{keyword: getattr(sampler, field) for keyword, field in fields.items()})


def _implied(given: dict) -> str:
    """The sampler's name when none is given, as `lm.generate` implies it."""
    if "num_beams" in given:
        return "beam"
    return "top_p" if "top_p" in given else "top_k" if "top_k" in given else "random"


def resolve(sampler: Any = None, temperature: float | None = None, top_k: int | None = None,
            top_p: float | None = None, num_beams: int | None = None, vocabulary_size: int | None = None) -> Sampling:
    """The sampler `generate` uses, from its arguments, as `zoo.models.samplers.resolve` makes it:
    `sampler` a name of `NAMES`, a `zoo.samplers` object, or None (implied by the others); a
    keyword the sampler does not take, a value out of range, beam search (`sampler="beam"`,
    `num_beams` > 1) and a sampler of one's own are refused in one sentence.

    Returns:
        The `Sampling`.

    Example:

    >>> resolve(temperature=0), resolve("top_k", top_k=40, temperature=0.8).top_k
    (Sampling(name='greedy', temperature=1.0, top_k=None, top_p=None), 40)
    >>> resolve("greedy", top_k=3)
    Traceback (most recent call last):
    ...
    ValueError: The greedy sampler does not take top_k; it takes no parameter.
    """
    given = {k: v for k, v in dict(temperature=temperature, top_k=top_k, top_p=top_p, num_beams=num_beams).items()
             if v is not None}
    if isinstance(num_beams, numbers.Integral) and not isinstance(num_beams, bool) and num_beams == 1:
        given.pop("num_beams")  # one beam: no beam search, as lm.generate reads it
    zero = isinstance(temperature, numbers.Real) and not isinstance(temperature, bool) and temperature == 0
    if temperature is not None and not zero:
        _check_temperature(temperature)
    if "top_k" in given:
        _check_k(top_k, vocabulary_size)
    if sampler is not None and not isinstance(sampler, str):
        return _from_object(sampler, given)
    if sampler is None and zero and "num_beams" not in given:
        return Sampling("greedy")  # as lm.generate: temperature=0 is greedy, whatever top_k says
    name = _implied(given) if sampler is None else sampler
    if name == "beam" or "num_beams" in given:
        raise _cannot_carry(f"Beam search ({'sampler=' + repr(name) if sampler else f'num_beams={num_beams!r}'})")
    if name not in NAMES:
        raise ValueError(f"Unknown sampler {name!r}; expected one of {list(NAMES)} or a zoo.samplers object "
                         "(Greedy, Random, TopK, TopP).")
    if name == "greedy" and given.get("temperature") == 0:
        given.pop("temperature")
    extra = sorted(set(given) - set(TAKES[name]))
    if extra:
        raise ValueError(f"The {name} sampler does not take {', '.join(extra)}; it takes "
                         f"{', '.join(TAKES[name]) or 'no parameter'}.")
    if name == "top_k" and "top_k" not in given:
        given["top_k"] = 40  # TopK's default k
    if name == "top_p" and "top_p" not in given:
        given["top_p"] = 0.9  # TopP's default p
    return Sampling(name, **given)


def noise_generator(seed: int, row: int) -> np.random.Generator:
    """The noise's generator of one prompt of a request: PCG64 seeded with `(seed, row)`.

    Returns:
        A numpy `Generator`.

    Example:

    >>> uniform_noise(noise_generator(0, 0), 3).tolist() == uniform_noise(noise_generator(0, 0), 3).tolist()
    True
    """
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed) % 2**64, int(row)])))


def uniform_noise(rng: np.random.Generator, vocabulary_size: int) -> np.ndarray:
    """One uniform number per id in (0, 1), never 0 or 1: `(m + 0.5) / 2**23` with `m` the top
    23 bits of `rng.random()` (exact in float32, so the file reads what was drawn).

    Returns:
        float32 `[1, vocabulary_size]`.

    Example:

    >>> noise = uniform_noise(noise_generator(7, 0), 5)
    >>> noise.shape, noise.dtype, bool(((0 < noise) & (noise < 1)).all())
    ((1, 5), dtype('float32'), True)
    """
    m = np.floor(rng.random(vocabulary_size) * 2**NOISE_BITS)
    return ((m + 0.5) / 2**NOISE_BITS).astype(np.float32)[None, :]


def greedy(scores: np.ndarray) -> int:
    """The most likely id, the lowest of equals (as `tf.argmax`).

    Returns:
        The id.

    Example:

    >>> greedy(np.array([0.1, 0.7, 0.7]))
    1
    """
    return int(np.argmax(scores))


__all__ = ["Sampling", "resolve", "noise_generator", "uniform_noise", "greedy", "NAMES"]
