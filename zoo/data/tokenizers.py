"""The tokenizer family: word, character and SentencePiece subword tokenizers, each a
`zoo.data.base_tokenizer.Tokenizer` (its interface and how to add one of your own are there).

`WordTokenizer` and `CharTokenizer` live in `zoo.data.vocab` (their former names, `Vocabulary` and
`CharacterVocabulary`, still work for one release and warn); `SubwordTokenizer` is below.

The subword tokenizer is a SentencePiece unigram model with byte fallback, so no text ever maps
to an unknown id: a character the model lacks is spelt as its UTF-8 bytes (256 byte pieces).
Its ids are 0 `<pad>`, 1 `<s>`, 2 `</s>`, then every SentencePiece piece in decreasing order of
how often it occurs when the training lines are encoded (ties by SentencePiece id; `<unk>`
last), so that an adaptive softmax's head holds the frequent pieces.
"""

from __future__ import annotations

import functools
import hashlib
import io
import itertools
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import tensorflow as tf

from zoo.data.base_tokenizer import (RESERVED, Tokenizer, load_registered, register_tokenizer, registered_files,
                                     texts_through)
from zoo.data.corpus import check_lines
from zoo.data.graph_tokenizers import SubwordGraphTokenizer, normalize_subword_in_graph
from zoo.data.vocab import BOS, EOS, PAD, CharTokenizer, WordTokenizer, load_word_or_char  # noqa: F401
from zoo.data.vocab import FILENAME as VOCABULARY_FILE
from zoo.deprecation import former_name
from zoo.errors import reason

MODEL_FILE = "tokenizer.model"   # the SentencePiece model (a serialised ModelProto)
CONFIG_FILE = "tokenizer.json"   # kind, sizes, id order, normalisation, format version
FORMAT_VERSION = 1
NORMALIZATION = "utf8-replace,nfc,u2581-as-space,collapse-whitespace"
BYTE_PIECES = 256
SPACE_MARK = "\u2581"  # SentencePiece's word-boundary mark
# Every id of an export is an int32 (the signatures' `token_ids`, `ids` and generated ids), so a
# tokenizer holds at most this many.
MAX_IDS = 2**31 - 1
UNKNOWN_PENALTY = 10.0  # SentencePiece's score of an unknown character: the lowest score minus this
EXTENSION_MARGIN = 1.0  # how much likelier an added piece is than its spelling, per old piece it saves


def normalize_subword(text: str | bytes) -> str:
    """The subword tokenizer's normalisation: `bytes` decoded as UTF-8 (invalid sequences as
    U+FFFD), Unicode NFC, U+2581 as a space (SentencePiece would give it back as one), then runs of
    whitespace (Python's `str.split()`, 29 code points) as one space, stripped. It runs the graph's
    ops (`zoo.data.graph_tokenizers.normalize_subword_in_graph`), as every subword tokenizer does.

    Returns the normalised text.

    >>> normalize_subword("  Cafe\u0301\u2581au\u3000lait ")
    'Café au lait'
    """
    return normalize_subword_batch([text])[0]


def normalize_subword_batch(lines: Iterable[str | bytes]) -> list[str]:
    """`[normalize_subword(line) for line in lines]`, run through the graph together."""
    return texts_through(_normalize_function(), lines)


@functools.cache
def _normalize_function():
    return tf.function(normalize_subword_in_graph, input_signature=[tf.TensorSpec([None], tf.string)],
                       autograph=False)


@register_tokenizer
class SubwordTokenizer(Tokenizer):
    """SentencePiece pieces, with the zoo's reserved ids first and the rest sorted by count.

    `model_proto`: the SentencePiece model's bytes; `order`: the SentencePiece id of each zoo id
    from 3 on (a permutation of the pieces); `counts`: each piece's count on the training lines,
    in `order` (kept for inspection). `sentencepiece_to_id` and `id_to_sentencepiece` (numpy
    int32; -1 for the reserved ids) map one way and the other.

    `token_texts` shows a piece with its boundary mark as a leading space ("▁the" → " the"), a
    byte piece as its character when it is printable ASCII and as a `\\xNN` escape otherwise
    ("<0xE2>" → "\\xe2"), and the reserved ids and `<unk>` by name.

    >>> lines = [f"the cat {i} sat on the mat" for i in range(200)]
    >>> tokenizer = SubwordTokenizer.train(lines, 300)
    >>> ids = tokenizer.encode("the cat sat é")
    >>> tokenizer.decode(ids), tokenizer.token_texts(ids)[1:5], tokenizer.word_index(ids)
    ('the cat sat é', [' ', 't', 'h', 'e'], [-1, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4])
    """

    training_summary = None  # set by `train`: the lines, words and sentences it learned from

    kind = "subword"
    files = (CONFIG_FILE, MODEL_FILE)
    pad_id, bos_id, eos_id = 0, 1, 2
    scores_per_word = True
    unit = "pieces"

    def __init__(self, model_proto: bytes, order: Iterable[int], counts: Iterable[int] | None = None,
                 added_pieces: int = 0):
        import sentencepiece as spm

        self.model_proto = bytes(model_proto)
        self._sp = spm.SentencePieceProcessor(model_proto=self.model_proto)
        n = self._sp.get_piece_size()
        order = np.asarray(order, dtype=np.int64)
        if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
            raise ValueError(f"The id order must hold each of the model's {n} SentencePiece ids once.")
        self.sentencepiece_to_id = np.empty(n, dtype=np.int32)
        self.sentencepiece_to_id[order] = np.arange(len(RESERVED), n + len(RESERVED), dtype=np.int32)
        self.id_to_sentencepiece = np.concatenate(
            [np.full(len(RESERVED), -1, np.int32), order.astype(np.int32)])
        self.counts = None if counts is None else np.asarray(counts, dtype=np.int64)
        self.added_pieces = int(added_pieces)  # how many of the last ids `extend` added
        self.unk_id = int(self.sentencepiece_to_id[self._sp.unk_id()])
        self.never_encoded = (self.unk_id,)  # byte fallback spells every character
        self.pieces = list(RESERVED) + [self._sp.id_to_piece(int(i)) for i in order]
        self._texts = list(RESERVED) + [self._readable(int(i)) for i in order]
        self._starts_word = np.array(
            [False] * len(RESERVED) + [p.startswith(SPACE_MARK) for p in self.pieces[len(RESERVED):]])
        # each id's byte (0-255) where it is a byte piece, else -1 (`whole_characters`)
        self.byte_values = np.array([-1] * len(RESERVED) + [int(piece[3:5], 16) if self._sp.is_byte(int(sp)) else -1
                                                            for piece, sp in zip(self.pieces[len(RESERVED):], order)],
                                    dtype=np.int32)

    def _readable(self, sp_id):
        piece = self._sp.id_to_piece(sp_id)
        if self._sp.is_byte(sp_id):
            byte = int(piece[3:5], 16)
            return chr(byte) if 0x21 <= byte <= 0x7E else f"\\x{byte:02x}"
        if self._sp.is_unknown(sp_id) or self._sp.is_control(sp_id):
            return piece
        return piece.replace(SPACE_MARK, " ")

    # -- training -------------------------------------------------------------------------------

    @classmethod
    def train(cls, lines: Sequence[str], vocabulary_size: int, character_coverage: float = 0.9995,
              input_sentence_size: int = 100_000, max_sentence_length: int = 16384, num_threads: int = 2,
              seed: int = 0) -> SubwordTokenizer:
        """A unigram SentencePiece model of `lines` (normalised first), with byte fallback.

        `vocabulary_size` counts every id, the 3 reserved ones included. Every line is used,
        whatever its length: SentencePiece skips a sentence of more than `max_sentence_length`
        bytes, so a longer line is cut at whitespace into pieces of at most
        `max_sentence_length // 4` characters for the trainer (`trainer_sentences`; a single
        word longer than that is cut where the limit falls). SentencePiece then learns from at
        most `input_sentence_size` of those sentences (a seeded random sample, drawn here, of
        more); the id order counts pieces over every line. `training_summary` of the result says
        how many lines, words and sentences it learned from."""
        import sentencepiece as spm

        check_lines(lines)
        normalized = [line for line in normalize_subword_batch(lines) if line]
        if not normalized:
            raise ValueError("Cannot train a subword tokenizer on an empty corpus: there is no line "
                             "with anything but whitespace in it.")
        vocabulary_size = int(vocabulary_size)
        reserved = len(RESERVED)
        sentences, long_lines = trainer_sentences(normalized, max(int(max_sentence_length) // 4, 1))
        if len(sentences) > input_sentence_size:
            keep = np.sort(np.random.default_rng(seed).choice(len(sentences), input_sentence_size, replace=False))
            sample = [sentences[i] for i in keep]
        else:
            sample = sentences
        model = io.BytesIO()
        spm.set_random_generator_seed(seed)
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(sample), model_writer=model,
                vocab_size=max(vocabulary_size - reserved, 1), model_type="unigram", byte_fallback=True,
                normalization_rule_name="identity", remove_extra_whitespaces=False,
                add_dummy_prefix=True, split_by_whitespace=True, character_coverage=character_coverage,
                unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1, input_sentence_size=0,
                shuffle_input_sentence=False, max_sentence_length=max_sentence_length,
                num_threads=num_threads, minloglevel=2)
        except RuntimeError as e:
            raise _training_error(str(e), vocabulary_size, len(normalized)) from None
        sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
        n = sp.get_piece_size()
        counts = np.zeros(n, dtype=np.int64)
        for start in range(0, len(normalized), 10_000):
            pieces = sp.encode(normalized[start:start + 10_000], num_threads=num_threads)
            flat = np.fromiter(itertools.chain.from_iterable(pieces), dtype=np.int64)
            counts += np.bincount(flat, minlength=n)
        is_unk = np.zeros(n, dtype=bool)
        is_unk[sp.unk_id()] = True
        order = np.lexsort((np.arange(n), -counts, is_unk))  # by count, then id; <unk> last
        tokenizer = cls(model.getvalue(), order, counts[order])
        tokenizer.training_summary = {
            "lines": len(normalized), "words": sum(len(line.split()) for line in normalized),
            "long_lines": long_lines, "sentences": len(sentences), "sampled_sentences": len(sample),
            "sampled_words": sum(len(sentence.split()) for sentence in sample)}
        return tokenizer

    # -- extension ------------------------------------------------------------------------------

    def _check_extension(self, lines, max_new_ids):
        """`lines` as a list, after `extend`'s refusals (see its docstring)."""
        check_lines(lines)
        if self.added_pieces:
            were = "ids were" if self.added_pieces != 1 else "id was"
            raise ValueError(f"This tokenizer was extended already (its last {self.added_pieces:,} {were} added); "
                             "extend the tokenizer as trained, once, with the number of ids you want.")
        if isinstance(max_new_ids, bool) or not isinstance(max_new_ids, (int, np.integer)) or max_new_ids < 1:
            raise ValueError(f"The number of ids to add must be a whole number of at least 1, got {max_new_ids!r}.")
        if len(self) + int(max_new_ids) > MAX_IDS:
            raise ValueError(f"Adding {int(max_new_ids):,} ids to this tokenizer's {len(self):,} would exceed the "
                             f"{MAX_IDS:,} ids an export's int32 ids can hold; add at most {MAX_IDS - len(self):,}.")
        lines = list(lines)
        if not any(normalize_subword_batch(lines)):
            raise ValueError(f"There is no text to learn new pieces from: the {len(lines):,} lines given hold nothing "
                             "but whitespace.")
        return lines

    def _worth(self, domain, proto):
        """The pieces of the tokenizer `domain` (learned from the new text) that this one (its
        `proto`) lacks, most pieces saved first: `(-saved, piece, its spelling in this tokenizer's
        pieces, its score, its count)` (see `extend`)."""
        normal = {p.piece: p.score for p in proto.pieces if p.type == proto.SentencePiece.NORMAL}
        unknown = min(normal.values(), default=0.0) - UNKNOWN_PENALTY
        worth = []
        for zoo_id in range(len(RESERVED), len(domain)):
            sp_id = int(domain.id_to_sentencepiece[zoo_id])
            piece = domain.pieces[zoo_id]
            if piece in normal or domain._sp.is_byte(sp_id) or domain._sp.is_unknown(sp_id):
                continue
            spelling, score = self._spelling(piece, normal, unknown)
            saved = int(domain.counts[zoo_id - len(RESERVED)]) * (len(spelling) - 1)
            if saved > 0:
                # a margin per old piece saved: of two splits, the one of fewer pieces wins
                score += EXTENSION_MARGIN * (len(spelling) - 1)
                worth.append((-saved, piece, spelling, score, int(domain.counts[zoo_id - len(RESERVED)])))
        return sorted(worth)

    def extend(self, lines: Sequence[str], max_new_ids: int, candidates: int | None = None, seed: int = 0,
               log: Callable[[str], None] | None = None) -> tuple[SubwordTokenizer, list[list[int]]]:
        """`(extended tokenizer, replaced)`: this tokenizer with up to `max_new_ids` pieces of
        `lines` that it lacks, as new ids after its own, which keep their ids and pieces.

        How pieces are chosen: a unigram model of `lines` alone (`train`, with `candidates` ids;
        default as many as this tokenizer has, else the most `lines` supply) proposes pieces;
        each that this tokenizer lacks is worth the pieces it would save on `lines`: how often the
        model of `lines` uses it, times one less than the number of this tokenizer's pieces that
        spell it. The `2 * max_new_ids` worth most are added together, each scored as the sum of
        the scores of the pieces that spell it plus `EXTENSION_MARGIN` per piece it saves (so that
        where it fits it wins over them, and of two splits the one of fewer pieces wins); `lines`
        are split again with all of them, and the `max_new_ids` that
        save the most pieces in that split are kept, ordered by it. Text whose split uses none of
        them is split exactly as before (the best path of a lattice with more pieces, when it
        uses only old ones, is the old best path).

        `replaced[i]`: the ids of this tokenizer that spelt added id `len(self) + i`, for a model
        to start the new rows from (`zoo.models.extend`). `log` receives one line of progress.

        A tokenizer that was extended already is refused (extend the tokenizer as trained once,
        with the number of ids wanted); so is a `max_new_ids` below 1 or beyond `MAX_IDS` ids in
        all. When `lines` yield no new piece, the result is this tokenizer and `replaced` is
        empty."""
        from sentencepiece import sentencepiece_model_pb2

        lines = self._check_extension(lines, max_new_ids)
        log = log or (lambda line: None)
        size = len(self) if candidates is None else int(candidates)
        try:
            domain = SubwordTokenizer.train(lines, size, seed=seed)
        except VocabularySizeError as e:
            domain = SubwordTokenizer.train(lines, e.largest, seed=seed)
        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(self.model_proto)
        worth = self._worth(domain, proto)
        # Twice as many as asked, added together, then kept by what they save when this
        # tokenizer's Viterbi actually uses them on `lines` (a piece the model of `lines` liked
        # may lose to this tokenizer's own pieces, or to another new one).
        proposed = worth[: 2 * int(max_new_ids)]
        if not proposed:
            log("The training text yields no piece that the tokenizer lacks: it is kept as it is.")
            return self, []
        trial = self._with_pieces(proto, [(c[1], c[3]) for c in proposed], [c[4] for c in proposed])
        used = np.zeros(len(trial), np.int64)
        for start in range(0, len(lines), 10_000):
            ids = trial.encode_batch(lines[start:start + 10_000], add_bos=False, add_eos=False)
            used += np.bincount(np.fromiter(itertools.chain.from_iterable(ids), np.int64), minlength=len(trial))
        saved = sorted((-int(used[len(self) + i]) * (len(c[2]) - 1), i) for i, c in enumerate(proposed))
        chosen = [proposed[i] + (int(used[len(self) + i]),) for s, i in saved if s < 0][: int(max_new_ids)]
        if not chosen:
            log("The training text yields no piece that the tokenizer lacks: it is kept as it is.")
            return self, []
        extended = self._with_pieces(proto, [(c[1], c[3]) for c in chosen], [c[5] for c in chosen])
        note = "" if len(chosen) == max_new_ids else f" (of the {int(max_new_ids):,} asked, all that save pieces on this text)"
        log(f"Added {len(chosen):,} piece{'' if len(chosen) == 1 else 's'}{note}, e.g. {', '.join(repr(c[1]) for c in chosen[:5])}.")
        return extended, [c[2] for c in chosen]

    def _with_pieces(self, proto, pieces, counts):
        """This tokenizer with `pieces` (`(piece, score)`) after its own ids."""
        from sentencepiece import sentencepiece_model_pb2

        extended = sentencepiece_model_pb2.ModelProto()
        extended.CopyFrom(proto)
        n = len(extended.pieces)
        for piece, score in pieces:
            added = extended.pieces.add()
            added.piece, added.score, added.type = piece, score, extended.SentencePiece.NORMAL
        extended.trainer_spec.vocab_size = len(extended.pieces)
        order = np.concatenate([self.id_to_sentencepiece[len(RESERVED):], np.arange(n, n + len(pieces))])
        counts = None if self.counts is None else np.concatenate([self.counts, counts])
        return SubwordTokenizer(extended.SerializeToString(), order, counts, added_pieces=len(pieces))

    def _spelling(self, piece, normal, unknown):
        """`(ids, score)`: the best-scoring way to spell `piece` with this tokenizer's pieces
        (SentencePiece's Viterbi on the piece alone; a character no piece covers spelt as its
        UTF-8 bytes, scored as SentencePiece scores an unknown character)."""
        best = [(0.0, None, None)] + [(-np.inf, None, None)] * len(piece)  # (score, start, known)
        longest = max(map(len, normal), default=1)
        for end in range(1, len(piece) + 1):
            for start in range(max(0, end - longest), end):
                score = normal.get(piece[start:end])
                if score is not None and best[start][0] + score > best[end][0]:
                    best[end] = (best[start][0] + score, start, True)
            if piece[end - 1] not in normal and best[end - 1][0] + unknown > best[end][0]:
                best[end] = (best[end - 1][0] + unknown, end - 1, False)  # a character without a piece
        ids, end = [], len(piece)
        while end > 0:
            _, start, known = best[end]
            if known:
                ids.append(int(self.sentencepiece_to_id[self._sp.piece_to_id(piece[start:end])]))
            else:
                ids.extend(int(self.sentencepiece_to_id[self._sp.piece_to_id(f"<0x{b:02X}>")])
                           for b in reversed(piece[start:end].encode("utf-8")))
            end = start
        return ids[::-1], float(best[len(piece)][0])

    # -- the interface --------------------------------------------------------------------------

    def __len__(self):
        return len(self.pieces)

    def __eq__(self, other):
        return (isinstance(other, SubwordTokenizer) and self.model_proto == other.model_proto
                and np.array_equal(self.id_to_sentencepiece, other.id_to_sentencepiece))

    __hash__ = None

    def __repr__(self):
        return f"SubwordTokenizer({len(self)} ids)"

    def build_graph(self) -> SubwordGraphTokenizer:
        """tensorflow-text's SentencePiece ops with the model's bytes embedded in the graph."""
        return SubwordGraphTokenizer(self.model_proto, self.sentencepiece_to_id, self.id_to_sentencepiece,
                                     self._texts, self.unk_id, self.byte_values)

    def check_extendable(self, what: str = "This model") -> None:
        """Refuses, in one sentence naming `what` holds it, a tokenizer that was extended already."""
        if self.added_pieces:
            were = "ids were" if self.added_pieces != 1 else "id was"
            raise ValueError(f"{what}'s tokenizer was extended already (its last {self.added_pieces:,} {were} "
                             "added); extend the model as trained, once, with the number of ids you want.")

    def export_notes(self) -> dict:
        """Its normalisation, that `serving_default` scores per word, and the ops a server needs."""
        return {"normalization": NORMALIZATION, "scores": "per word (serving_default)",
                "requires": "tensorflow-text ops"}

    def encode_batch(self, lines: Iterable[str | bytes], add_bos: bool = True, add_eos: bool = True,
                     num_threads: int | None = None) -> list[list[int]]:
        """`[encode(line, add_bos, add_eos) for line in lines]`, run through the graph together
        (`num_threads` is not used: the graph's op runs on one thread; giving it warns, and it goes
        in 0.2.0)."""
        if num_threads is not None:
            from zoo.deprecation import warn

            warn("SubwordTokenizer.encode_batch(num_threads=...)", "encode_batch without num_threads")
        return super().encode_batch(lines, add_bos, add_eos)

    def word_index(self, ids: Iterable[int]) -> list[int]:
        """A piece starting with the boundary mark (shown as a leading space) starts a word; the
        other pieces (and byte pieces) continue the word before. -1 for `<s>` / `<pad>`, the
        number of words for `</s>`."""
        out, words = [], 0
        for i in self.check_ids(ids).tolist():
            if i in (self.pad_id, self.bos_id):
                out.append(-1)
            elif i == self.eos_id:
                out.append(words)
            else:
                if self._starts_word[i] or words == 0:
                    words += 1
                out.append(words - 1)
        return out

    # -- files ----------------------------------------------------------------------------------

    def save(self, directory: str | os.PathLike) -> str:
        """Writes `tokenizer.model` and `tokenizer.json` into `directory`; returns the latter's
        path."""
        with open(os.path.join(directory, MODEL_FILE), "wb") as f:
            f.write(self.model_proto)
        config = {
            "format_version": FORMAT_VERSION,
            "kind": self.kind,
            "vocabulary_size": len(self),
            "reserved": list(RESERVED),
            "sentencepiece_size": len(self) - len(RESERVED),
            "normalization": NORMALIZATION,
            "model_sha256": hashlib.sha256(self.model_proto).hexdigest(),
            "order": self.id_to_sentencepiece[len(RESERVED):].tolist(),
            "counts": None if self.counts is None else self.counts.tolist(),
        }
        if self.added_pieces:  # only then, so that the files of tokenizers as trained stay as they were
            config["added_pieces"] = self.added_pieces
        path = os.path.join(directory, CONFIG_FILE)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f)
            f.write("\n")
        return path

    @classmethod
    def load(cls, directory: str | os.PathLike) -> SubwordTokenizer:
        """The subword tokenizer saved in `directory` (each bad or missing file named in one
        sentence)."""
        config_path = os.path.join(directory, CONFIG_FILE)
        model_path = os.path.join(directory, MODEL_FILE)
        config = cls._read_config(config_path)
        try:
            with open(model_path, "rb") as f:
                model_proto = f.read()
        except FileNotFoundError:
            raise ValueError(f"The tokenizer file {model_path} is missing (it goes with {config_path}).") from None
        except OSError as e:
            raise ValueError(f"The tokenizer file {model_path} is not readable ({reason(e)}).") from None
        if hashlib.sha256(model_proto).hexdigest() != config["model_sha256"]:
            raise ValueError(f"The tokenizer file {model_path} does not match {config_path} (its SHA-256 "
                             f"differs, so one was changed or they come from different tokenizers).")
        pieces = config["sentencepiece_size"]
        try:
            import sentencepiece as spm

            n = spm.SentencePieceProcessor(model_proto=model_proto).get_piece_size()
        except Exception as e:  # sentencepiece raises RuntimeError / OSError on a bad proto
            raise ValueError(f"The tokenizer file {model_path} is not a SentencePiece model "
                             f"({reason(e)}).") from None
        if n != pieces:
            raise ValueError(f"The tokenizer file {model_path} has {n} pieces but {config_path} "
                             f"says {pieces}.")
        return cls(model_proto, config["order"], config.get("counts"), config.get("added_pieces", 0))

    @classmethod
    def _read_config(cls, config_path):
        """The tokenizer's JSON config, each field checked (one sentence naming the file if not)."""
        try:
            with open(config_path, encoding="utf-8") as f:
                config = json.load(f)
        except FileNotFoundError:
            raise ValueError(f"The tokenizer file {config_path} is missing.") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"The tokenizer file {config_path} is not readable JSON ({reason(e)}).") from None

        def bad(what):
            return ValueError(f"The tokenizer file {config_path} is corrupt: {what}.")

        keys = ("format_version", "kind", "vocabulary_size", "reserved", "sentencepiece_size",
                "normalization", "model_sha256", "order")
        if not isinstance(config, dict) or any(k not in config for k in keys):
            raise bad(f"it must be a JSON object with the keys {', '.join(keys)}")
        if config["format_version"] != FORMAT_VERSION:
            raise bad(f"format_version {config['format_version']!r} is not the supported {FORMAT_VERSION}")
        if config["kind"] != cls.kind:
            raise bad(f"kind {config['kind']!r} is not {cls.kind!r}")
        if config["normalization"] != NORMALIZATION:
            raise bad(f"normalization {config['normalization']!r} is not the supported {NORMALIZATION!r}")
        if config["reserved"] != list(RESERVED):
            raise bad(f"reserved ids {config['reserved']!r} are not {list(RESERVED)!r}")
        order, counts = config["order"], config.get("counts")
        size, pieces = config["vocabulary_size"], config["sentencepiece_size"]
        if not (isinstance(order, list) and all(isinstance(i, int) for i in order)
                and sorted(order) == list(range(len(order)))):
            raise bad("order is not a permutation of the SentencePiece ids")
        if pieces != len(order) or size != pieces + len(RESERVED):
            raise bad(f"vocabulary_size {size}, sentencepiece_size {pieces} and the {len(order)} ids in "
                      f"order disagree")
        if counts is not None and (not isinstance(counts, list) or len(counts) != len(order)):
            raise bad("counts does not hold one count per piece")
        added = config.get("added_pieces", 0)
        if not isinstance(added, int) or not 0 <= added < len(order):
            raise bad(f"added_pieces {added!r} is not a count of pieces below {len(order)}")
        return config


def trainer_sentences(lines, max_chars):
    """`(sentences, long lines)`: each line of at most `max_chars` characters as it is, each longer
    one cut at whitespace into pieces of at most `max_chars` characters (words packed greedily,
    joined by single spaces; a word longer than `max_chars` cut into `max_chars`-character
    pieces), and how many lines were cut. No character but whitespace between pieces is lost."""
    out, cut = [], 0
    for line in lines:
        if len(line) <= max_chars:
            out.append(line)
            continue
        cut += 1
        current, size = [], 0
        for word in line.split():
            while len(word) > max_chars:  # a "word" longer than a sentence may be
                if current:
                    out.append(" ".join(current))
                    current, size = [], 0
                out.append(word[:max_chars])
                word = word[max_chars:]
            if current and size + 1 + len(word) > max_chars:
                out.append(" ".join(current))
                current, size = [], 0
            size += len(word) + (1 if current else 0)
            current.append(word)
        if current:
            out.append(" ".join(current))
    return out, cut


class VocabularySizeError(ValueError):
    """A requested subword vocabulary larger than the corpus can supply; `largest` is the most it
    can (so a default size can fall back to it)."""

    def __init__(self, largest, message):
        super().__init__(message)
        self.largest = largest


def _training_error(message, vocabulary_size, lines):
    reserved = len(RESERVED)
    small = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", message)
    if small:
        smallest = int(small.group(2)) + reserved
        return ValueError(
            f"vocabulary_size={vocabulary_size} is too small for this corpus: the smallest accepted is "
            f"{smallest} (the {reserved} reserved ids, SentencePiece's <unk>, the {BYTE_PIECES} byte "
            f"pieces and one piece per character of the corpus it must cover).")
    large = re.search(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)", message)
    if large:
        return VocabularySizeError(int(large.group(2)) + reserved,
            f"vocabulary_size={vocabulary_size} is more than this corpus can supply: the largest it "
            f"accepts is {int(large.group(2)) + reserved} ({int(large.group(2))} SentencePiece pieces "
            f"and the {reserved} reserved ids).")
    return ValueError(f"SentencePiece could not train with vocabulary_size={vocabulary_size} on {lines} "
                      f"lines ({reason(message)}).")


def load_tokenizer(directory: str | os.PathLike) -> Tokenizer:
    """The tokenizer saved in a preset `directory`, whichever its class: the registered one
    (`zoo.data.base_tokenizer.register_tokenizer`) whose first file is there: `tokenizer.json`
    (+ `tokenizer.model`) for subword, `vocabulary.txt` (+ `vocabulary_kind.txt`) for word or
    char, or a tokenizer of your own. A missing or corrupt file raises a `ValueError` naming it.

    Returns the tokenizer.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as directory:
    ...     _ = WordTokenizer(["<pad>", "<s>", "</s>", "<unk>", "hello"]).save(directory)
    ...     load_tokenizer(directory)
    WordTokenizer(5 ids)
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise ValueError(f"The tokenizer directory {directory} does not exist.")
    path = os.path.join(directory, VOCABULARY_FILE)
    try:
        tokenizer = load_registered(directory)
    except (ValueError, OSError, UnicodeDecodeError) as e:
        if os.path.exists(os.path.join(directory, CONFIG_FILE)) or not os.path.exists(path):
            raise  # the subword tokenizer's (and a tokenizer of your own's) sentences name their files
        raise ValueError(f"The tokenizer file {path} is not a vocabulary ({reason(e)}).") from None
    if tokenizer is None:
        others = " or ".join(f for f in registered_files(markers=True) if f != VOCABULARY_FILE)
        raise ValueError(f"The tokenizer file {path} is missing (and there is no {others} beside it).")
    return tokenizer


def __getattr__(name):  # former names (zoo.deprecation.FORMER_NAMES)
    return former_name(__name__, name)
