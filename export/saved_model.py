"""`export_saved_model`: a model of the zoo as a versioned SavedModel for TensorFlow Serving.

TF Serving watches `base/<name>/` and serves the highest numbered version directory it finds.
A version is written into a hidden temporary directory beside it (`.<version>.tmp-…`, a name TF
Serving ignores) and renamed into place once complete, so a half-written version is never
loaded; an existing version is never written to; a failed export removes what it wrote.

The SavedModel holds the signatures of `zoo.export.signatures`, the model's tokenizer in the graph
(its `graph`: the same ops its Python API runs, `zoo.data.graph_tokenizers`) and, in
`assets.extra/zoo_export.json` (a file TF Serving ignores), a description for clients: the
signatures' inputs and outputs, the decoding state's tensor names and shapes, `max_tokens`, the
tokenizer's kind (and, for subword, its normalisation) and the model's config.

- Word / character vocabularies: core-op lookup tables whose keys and values are constants of the
  graph; loading the SavedModel needs TensorFlow only.
- Subword (SentencePiece) tokenizers: the SentencePiece model is embedded in the graph and run by
  tensorflow-text's ops, so the loading process needs them: `import tensorflow_text` before
  `tf.saved_model.load` in Python, a model server with tensorflow-text's ops linked in (stock
  TF Serving has them). `serving_default` then scores per word, cutting over-long lines at a
  word boundary (see `zoo.export.signatures`).
"""

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence

import tensorflow as tf

from zoo.errors import reason
from zoo.export import warmup
from zoo.export.signatures import Signatures, request_inputs
from zoo.layers.gated_conv import weight_norm_folded
from zoo.layers.validation import check_int
from zoo.models import generation
from zoo.models.samplers import Sampler

DEFAULT_MAX_TOKENS = 1024
DEFAULT_MAX_NEW_TOKENS = 256
METADATA_FILE = os.path.join("assets.extra", "zoo_export.json")


class ExportError(ValueError):
    """An export that could not be written; the message is one sentence saying why.

    Example: a base directory that is a file:

    >>> import tempfile, zoo
    >>> from zoo.export import ExportError, export_saved_model
    >>> lm = zoo.load("gcnn-ptb", weights="trained")
    >>> with tempfile.NamedTemporaryFile() as f:
    ...     export_saved_model(lm, f.name, name="gcnn-ptb")
    Traceback (most recent call last):
    ...
    zoo.export.saved_model.ExportError: Cannot create the model directory ...; nothing was written.
    >>> issubclass(ExportError, ValueError)
    True
    """


def check_tokenizer(model: "zoo.LanguageModel") -> None:
    """Refuses, with an ExportError (a ValueError) of one sentence, a model without a tokenizer or
    whose tokenizer's size is not the model's vocabulary size: an export reads and writes text."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise ExportError("The model has no tokenizer to read text with: load it from a preset directory that "
                          "has one, or set model.tokenizer, before exporting.")
    if len(tokenizer) != model.vocabulary_size:
        raise ExportError(f"The model's tokenizer has {len(tokenizer)} tokens but the model predicts "
                          f"{model.vocabulary_size} ids; they must agree to export.")


def existing_versions(model_dir: "str | os.PathLike") -> list[int]:
    """The version numbers TF Serving would see under `model_dir` (names that are integers).

    Returns:
        The versions, in increasing order (`[]` where `model_dir` is no directory): the names of
        its subdirectories that are integers, not its files, nor a version being written (a
        hidden `.<version>.tmp-…` directory).

    Example:

    >>> import os, tempfile
    >>> from zoo.export import existing_versions
    >>> model_dir = tempfile.mkdtemp()
    >>> for name in ["1", "12", "3", ".4.tmp-abc", "notes"]:
    ...     os.makedirs(os.path.join(model_dir, name))
    >>> open(os.path.join(model_dir, "7"), "w").close()  # a file, not a version
    >>> existing_versions(model_dir)
    [1, 3, 12]
    >>> existing_versions(os.path.join(model_dir, "absent"))
    []
    """
    if not os.path.isdir(model_dir):
        return []
    return sorted(int(n) for n in os.listdir(model_dir)
                  if n.isdigit() and os.path.isdir(os.path.join(model_dir, n)))


def _check_arguments(model, name, version, max_tokens, max_new_tokens=DEFAULT_MAX_NEW_TOKENS, sampler=None,
                     head_blocks=None):
    if not isinstance(name, str) or not name or name in (".", "..") or name.startswith(".") \
            or "/" in name or os.sep in name:
        raise ValueError(f"The model name must be a non-empty directory name not starting with '.', got {name!r}.")
    if version is not None:
        check_int("The version", version, minimum=1)
    check_int("max_tokens", max_tokens, minimum=1)
    check_int("max_new_tokens", max_new_tokens, minimum=1)
    if head_blocks is not None:
        check_int("head_blocks", head_blocks, minimum=1, maximum=generation.MAX_HEAD_BLOCKS)
    if sampler is not None and not isinstance(sampler, Sampler):
        raise ValueError(f"sampler must be None (the request chooses: temperature, top_k, top_p, num_beams) or a "
                         f"zoo.samplers.Sampler, got {sampler!r}.")
    request_inputs(sampler)  # a sampler's request parameters must be its own, and not generate's inputs
    check_tokenizer(model)


def export_saved_model(model: "zoo.LanguageModel", base_dir: "str | os.PathLike", name: str,
                       version: "int | None" = None, max_tokens: int = DEFAULT_MAX_TOKENS,
                       max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, sampler: "Sampler | None" = None,
                       batch_sizes: Sequence[int] = warmup.BATCH_SIZES, head_blocks: "int | None" = None) -> str:
    """Write `model` to `base_dir/name/<version>/` and return that path.

    The SavedModel's signatures (`zoo.export.signatures`): `serving_default(text <string>[batch])`
    → per-token and per-line scores; `score_ids(token_ids <int32>[batch, time], lengths
    <int32>[batch])`; `next_token(text, k)`; `decode_step(token_ids <int32>[batch], state…)`;
    `generate(text <string>[batch], max_new_tokens, temperature, top_k, top_p, seed)` → `text`,
    `completion` (`<string>[batch]`), `ids` (`<int32>[batch, new]`) and `lengths` (`<int32>[batch]`).

    Args:
        model: a `LanguageModel` with a tokenizer.
        base_dir: the directory TF Serving watches (`--model_base_path`'s parent).
        name: the model's name, a directory under `base_dir`.
        version: the version to write; by default one above the highest present (1 for a new
            model). An existing version is never overwritten.
        max_tokens: lines of more than this many tokens are cut (their last `max_tokens` kept).
        max_new_tokens: the most new tokens `generate` writes a request.
        sampler: None (the request's `temperature`, `top_k`, `top_p` and `num_beams` choose, as
            `zoo.samplers.Served` does), or a `zoo.samplers.Sampler` (beam search included) that
            `generate` then always runs, its loop in the signature: how a sampler defined outside
            the zoo is served. Its parameters are fixed at export and recorded in
            `assets.extra/zoo_export.json`, except those it lists in `request`, which are inputs
            of `generate` (the request's other sampling inputs are then ignored).
        batch_sizes: the batch sizes of the warmup records
            (`assets.extra/tf_serving_warmup_requests`, one request per signature and size,
            which TF Serving replays before serving a version) and the `allowed_batch_sizes` of
            the example batching file `assets.extra/batching_parameters.txt` (`zoo.export.warmup`).
        head_blocks: `generate` at fewer than 8 rows computes a full or tied output layer as this
            many products over blocks of ids, side by side on the cores (1: one product). None
            (the default): one product, whatever the exporting machine's cache
            (`zoo.models.generation.export_head_blocks`: the choice that holds up best across
            level-2 caches); the number is written to `assets.extra/zoo_export.json`
            (docs/serving.md).

    Returns:
        The path of the written version, `base_dir/name/<version>`.

    Raises:
        ExportError: (a `ValueError`) in one sentence when the version exists or cannot be
            written, leaving no partial version behind.

    Example:

    >>> import os, tempfile, zoo
    >>> from zoo.export import export_saved_model
    >>> lm = zoo.load("gcnn-ptb", weights="trained")
    >>> path = export_saved_model(lm, tempfile.mkdtemp(), name="gcnn-ptb")
    >>> os.path.basename(path), sorted(os.listdir(path))[:2]
    ('1', ['assets', 'assets.extra'])
    """
    _check_arguments(model, name, version, max_tokens, max_new_tokens, sampler, head_blocks)
    batch_sizes = warmup.check_batch_sizes(batch_sizes)
    model_dir = os.path.abspath(os.path.join(base_dir, name))
    created = not os.path.isdir(model_dir)
    try:
        os.makedirs(model_dir, exist_ok=True)
    except OSError as e:
        raise ExportError(f"Cannot create the model directory {model_dir}: {reason(e)}; nothing was written.") from e
    versions = existing_versions(model_dir)
    if version is None:
        version = (versions[-1] if versions else 0) + 1
    final = os.path.join(model_dir, str(version))
    if os.path.exists(final):
        raise ExportError(f"Version {version} of {name!r} already exists at {final} and is never overwritten: "
                          "leave the version unset to write the next one.")
    tmp = None
    try:
        tmp = tempfile.mkdtemp(prefix=f".{version}.tmp-", dir=model_dir)
        _write(model, tmp, name, version, max_tokens, max_new_tokens, sampler, batch_sizes, head_blocks)
        if os.path.exists(final):  # another export took this version meanwhile
            raise ExportError(f"Version {version} of {name!r} appeared at {final} during the export and was "
                              "left untouched; nothing was written.")
        os.rename(tmp, final)
    except BaseException as e:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if created and os.path.isdir(model_dir) and not os.listdir(model_dir):
            os.rmdir(model_dir)
        if isinstance(e, (OSError, tf.errors.OpError)):
            raise ExportError(f"Could not write version {version} of {name!r} under {model_dir}: {reason(e)}; "
                              "the partial export was removed.") from e
        raise
    return final


def _write(model, path, name, version, max_tokens, max_new_tokens=DEFAULT_MAX_NEW_TOKENS, sampler=None,
           batch_sizes=warmup.BATCH_SIZES, head_blocks=None):
    """The SavedModel itself, written to the (empty, temporary) directory `path`.

    `keras.export.ExportArchive` would do, but it traces every endpoint once to find the
    variables it uses and the save traces it again; here the save traces each signature once,
    the object graph holding the model's variables and the vocabulary's lookup tables."""
    # the tokenizer in the graph: the very ops its Python API runs, its data as constants
    tokenizer = model.tokenizer.graph
    signatures = Signatures(model, tokenizer, max_tokens, max_new_tokens, sampler, head_blocks)
    root = tf.Module()
    # The model's variables, which the traced functions capture, as the plain tf.Variables
    # behind the Keras ones, so that the SavedModel loads without Keras. Tracking the Keras
    # variables themselves would save each twice (a copy under a new name beside the handle
    # the functions read), which TF2's loader maps but the TF1 loader of `saved_model_cli
    # run` does not ("Could not find variable …"). A weight-normalised conv layer's `v` and
    # `g` are saved as the one kernel they make (`weight_norm_folded`): a request no longer
    # computes g · v / ‖v‖ (docs/serving.md).
    with saved_variables(model) as root.model_variables:
        root.tables = list(tokenizer.resources)  # lookup tables, or the SentencePiece model
        functions = {}
        for endpoint, (fn, input_signature) in signatures.all().items():
            functions[endpoint] = tf.function(fn, input_signature=input_signature, autograph=False)
            setattr(root, endpoint, functions[endpoint])
        write_archive(root, path, functions)
    metadata = describe(model, name, version, max_tokens, tokenizer, signatures)
    metadata["warmup"] = {"file": warmup.WARMUP_FILE, "batch_sizes": list(batch_sizes),
                          "records": warmup.write_warmup(path, metadata, batch_sizes),
                          "batching_file": warmup.write_batching_file(path, batch_sizes)}
    with open(os.path.join(path, METADATA_FILE), "w") as f:
        json.dump(metadata, f, indent=1)


@contextlib.contextmanager
def saved_variables(model):
    """While an export of `model` is traced and saved: the `tf.Variable`s it saves, each
    weight-normalised conv layer's `v` and `g` replaced by the one kernel they make
    (`weight_norm_folded`)."""
    with weight_norm_folded(model) as (replaced, folded):
        replaced = {id(w) for w in replaced}
        yield [_tf_variable(w) for w in model.weights if id(w) not in replaced] + folded


def _tf_variable(weight):
    value = weight.value  # outside an autocast scope: the tf.Variable itself
    if not isinstance(value, tf.Variable):
        raise TypeError(f"The weight {weight.path} is not backed by a tf.Variable ({type(value).__name__}); "
                        "the export needs Keras' TensorFlow backend.")
    return value


def write_archive(root, path, signatures):
    tf.saved_model.save(root, path, signatures=signatures)


def describe(model, name, version, max_tokens, tokenizer, signatures):
    """What a client needs to know, as written to `assets.extra/zoo_export.json`."""
    endpoints = {}
    for endpoint, (_, input_signature) in signatures.all().items():
        endpoints[endpoint] = {
            "inputs": {spec.name: {"dtype": spec.dtype.name,
                                   "shape": None if spec.shape.rank is None else
                                   [-1 if d is None else d for d in spec.shape.as_list()]}
                       for spec in input_signature},
            **({"defaults": signatures.generate_defaults()} if endpoint == "generate" else {}),
            "outputs": signatures.outputs(endpoint),
        }
    subword = model.tokenizer.export_notes()
    return {
        "name": name,
        "version": version,
        "model_class": type(model).__name__,
        "config": model.get_config(),
        "vocabulary_size": int(model.vocabulary_size),
        "tokenizer": model.tokenizer.kind,
        **subword,
        "special_ids": {"<pad>": tokenizer.pad_id, "<s>": tokenizer.bos_id, "</s>": tokenizer.eos_id,
                        "<unk>": tokenizer.unk_id},
        "max_tokens": max_tokens,
        "max_new_tokens": signatures.max_new_tokens,
        "head_blocks": signatures.head_blocks,
        **signatures.sampler_description(),
        "decode_state": {n: list(shape) for n, shape in signatures.state.specs.items()},
        "signatures": endpoints,
    }
