"""How `LanguageModel.generate` chooses each new token (keras-hub's samplers, by name or object).

    lm.generate(prompts, sampler="greedy")
    lm.generate(prompts, sampler="top_k", top_k=40, temperature=0.8)
    lm.generate(prompts, sampler=zoo.samplers.TopP(0.9))
    lm.generate(prompts, sampler="beam", num_beams=4, length_penalty=1.0)

- `Greedy()`: the most likely token.
- `Random(temperature)`: a draw from the whole distribution (`softmax(log p / temperature)`).
- `TopK(k, temperature)`: a draw among the k most likely tokens.
- `TopP(p, temperature, k=None)`: nucleus sampling: a draw among the smallest set of most likely
  tokens whose probability (after temperature) reaches p, within the k most likely if k is given.
- `Beam(num_beams, length_penalty)`: beam search; the finished beams are ranked by their
  log-probability divided by `new tokens ** length_penalty` (fairseq's `--lenpen`; 0 ranks by
  log-probability alone, larger values favour longer outputs).

Every sampler never emits `<pad>` or `<s>`.
"""

import dataclasses
import math
import numbers

NAMES = ("greedy", "random", "top_k", "top_p", "beam")


def _check_temperature(temperature):
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a number >= 0 (0 is greedy), got {temperature!r}.")
    if temperature == 0:
        raise ValueError("temperature=0 is greedy decoding, which draws nothing: use sampler='greedy' (or no "
                         "sampler), or a temperature > 0 to sample.")
    return float(temperature)


def _check_k(k, vocabulary_size=None):
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1 or \
            vocabulary_size is not None and k > vocabulary_size:
        accepted = f"in [1, {vocabulary_size}] (the vocabulary size)" if vocabulary_size else "an integer >= 1"
        raise ValueError(f"top_k must be {accepted}, got {k!r}.")
    return int(k)


@dataclasses.dataclass(frozen=True)
class Greedy:
    name = "greedy"


@dataclasses.dataclass(frozen=True)
class Random:
    temperature: float = 1.0
    name = "random"

    def __post_init__(self):
        _check_temperature(self.temperature)


@dataclasses.dataclass(frozen=True)
class TopK:
    k: int = 40
    temperature: float = 1.0
    name = "top_k"

    def __post_init__(self):
        _check_k(self.k)
        _check_temperature(self.temperature)


@dataclasses.dataclass(frozen=True)
class TopP:
    p: float = 0.9
    temperature: float = 1.0
    k: int = None
    name = "top_p"

    def __post_init__(self):
        if isinstance(self.p, bool) or not isinstance(self.p, numbers.Real) or not 0 < self.p <= 1:
            raise ValueError(f"top_p must be a number in (0, 1], got {self.p!r}.")
        _check_temperature(self.temperature)
        if self.k is not None:
            _check_k(self.k)


@dataclasses.dataclass(frozen=True)
class Beam:
    num_beams: int = 4
    length_penalty: float = 1.0
    name = "beam"

    def __post_init__(self):
        if isinstance(self.num_beams, bool) or not isinstance(self.num_beams, numbers.Integral) or self.num_beams < 1:
            raise ValueError(f"num_beams must be an integer >= 1, got {self.num_beams!r}.")
        if isinstance(self.length_penalty, bool) or not isinstance(self.length_penalty, numbers.Real) \
                or not math.isfinite(self.length_penalty):
            raise ValueError(f"length_penalty must be a finite number, got {self.length_penalty!r}.")


SAMPLERS = (Greedy, Random, TopK, TopP, Beam)


def resolve(sampler=None, temperature=None, top_k=None, top_p=None, num_beams=None, length_penalty=None,
            vocabulary_size=None):
    """The sampler `generate` uses, from its arguments.

    `sampler` is a sampler object, a name of `NAMES` (its parameters from the keyword arguments),
    or None: then, as `generate` always did, `temperature=0` is greedy, `num_beams` > 1 beam
    search, `top_p` nucleus sampling, `top_k` top-k sampling, and otherwise a draw from the whole
    distribution at `temperature` (1.0 by default). A keyword argument the sampler does not take
    is refused, naming it; so is a `top_k` above `vocabulary_size`.
    """
    zero = isinstance(temperature, numbers.Real) and not isinstance(temperature, bool) and temperature == 0
    if temperature is not None and not zero:  # 0 is greedy, or refused by a sampler that draws
        _check_temperature(temperature)
    if top_k is not None:
        _check_k(top_k, vocabulary_size)
    given = {k: v for k, v in dict(temperature=temperature, top_k=top_k, top_p=top_p, num_beams=num_beams,
                                   length_penalty=length_penalty).items() if v is not None}
    if isinstance(sampler, SAMPLERS):
        if given:
            raise ValueError(f"Give the sampler's parameters to the sampler object {sampler!r}, not also as "
                             f"{', '.join(sorted(given))}.")
        if getattr(sampler, "k", None) is not None:
            _check_k(sampler.k, vocabulary_size)
        return sampler
    if sampler is None:
        if temperature is not None and temperature == 0 and num_beams in (None, 1):
            return Greedy()  # as generate always did: temperature=0 is greedy, whatever top_k says
        if num_beams is not None and num_beams != 1 or length_penalty is not None:
            sampler = "beam"
        elif top_p is not None:
            sampler = "top_p"
        elif top_k is not None:
            sampler = "top_k"
        elif num_beams == 1:
            sampler = "greedy"
        else:
            sampler = "random"
    if not isinstance(sampler, str) or sampler not in NAMES:
        raise ValueError(f"Unknown sampler {sampler!r}; expected one of {list(NAMES)} or a zoo.samplers "
                         "object (Greedy, Random, TopK, TopP, Beam).")
    takes = {"greedy": (), "random": ("temperature",), "top_k": ("top_k", "temperature"),
             "top_p": ("top_p", "temperature", "top_k"), "beam": ("num_beams", "length_penalty")}[sampler]
    if sampler == "greedy" and given.get("temperature") == 0:
        given.pop("temperature")
    extra = sorted(set(given) - set(takes))
    if extra:
        raise ValueError(f"The {sampler} sampler does not take {', '.join(extra)}; it takes "
                         f"{', '.join(takes) or 'no parameter'}.")
    if sampler == "greedy":
        return Greedy()
    if sampler == "random":
        return Random(given.get("temperature", 1.0))
    if sampler == "top_k":
        return TopK(given.get("top_k", 40), given.get("temperature", 1.0))
    if sampler == "top_p":
        return TopP(given.get("top_p", 0.9), given.get("temperature", 1.0), given.get("top_k"))
    return Beam(given.get("num_beams", 4), given.get("length_penalty", 1.0))


__all__ = ["Greedy", "Random", "TopK", "TopP", "Beam", "resolve", "NAMES"]
