"""fairseq's convolutional language models (`fconv_lm`) as GCNN presets, exactly.

`convert(checkpoint, dictionary, out)` reads the checkpoint with `zoo.convert.torch_pickle` (no
torch, nothing in the file runs), takes the architecture from the checkpoint's own saved
arguments, maps its state dict onto `GCNNLanguageModel` (with the family's fairseq options) and
writes a preset directory with the word tokenizer of `dict.txt`.

The mapping, layer by layer of fairseq's `FConvDecoder`:

- `embed_tokens` → the embedding; `fc1` → `input_projection`;
- the convolutions with their residual counts (fairseq's `(width, kernel_size, residual)`)
  → residual blocks: a layer whose residual reaches r layers back closes a block of those r
  layers (the r - 1 before it must have residual 0); a layer of residual 0 that no later layer
  closes is a block without a skip path; fairseq's `projections` are the blocks' skip
  projections, and every sum is scaled by √0.5 as fairseq's is;
- weight normalisation as fairseq stores it: a convolution's `weight_v` is the kernel
  (time, input, 2·width) and `weight_g` its gains; a linear layer's `weight_v` transposed;
- `adaptive_softmax` → a bias-free adaptive softmax head; a state dict without
  `adaptive_softmax.version` is fairseq's 2018 format (`adaptive_softmax_2018`); without an
  adaptive softmax (criterion cross_entropy), `fc2` → `output_projection` and `fc3` (weight
  normalised) → a full softmax whose kernel is `g · v / ‖v‖`.

`zoo.load(PRESET, weights=CHECKPOINT)` converts in memory (`load_as_preset`) when the
checkpoint's shapes are the preset's, and names the first that differs otherwise.

Ids: fairseq's are `<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3, then dict.txt in order, padded with
`madeupwordNNNN` to the embedding's rows. The zoo's word tokenizer keeps `<pad>` at 0 and `<s>`
at 1, so the converter swaps the rows (and the head columns) of ids 0 and 1: every word of
dict.txt, `</s>` and `<unk>` keep fairseq's id.
"""

import ast
import logging
import math
import os
import shutil
import tempfile

import numpy as np

from zoo import preset_directory
from zoo.data.corpus import read_utf8_lines
from zoo.convert import torch_pickle
from zoo.data import WordTokenizer
from zoo.models.gcnn import GCNNLanguageModel

# fairseq/models/fconv_lm.py's named architectures: their defaults where the saved args lack them.
ARCHITECTURES = {
    "fconv_lm": {"decoder_embed_dim": 128, "decoder_layers": "[(1268, 4)] * 13"},
    "fconv_lm_dauphin_wikitext103": {
        "decoder_embed_dim": 280, "adaptive_softmax_cutoff": "10000,20000,200000",
        "decoder_layers": "[(850, 6)] * 3 + [(850, 1)] * 1 + [(850, 5)] * 4 + [(850, 1)] * 1 + [(850, 4)] * 3"
                          " + [(1024, 4)] * 1 + [(2048, 4)] * 1"},
    "fconv_lm_dauphin_gbw": {
        "decoder_embed_dim": 128, "adaptive_softmax_cutoff": "10000,50000,200000",
        "decoder_layers": "[(512, 5)] + [(128, 1, 0), (128, 5, 0), (512, 1, 3)] * 3"
                          " + [(512, 1, 0), (512, 5, 0), (1024, 1, 3)] * 3"
                          " + [(1024, 1, 0), (1024, 5, 0), (2048, 1, 3)] * 6"
                          " + [(1024, 1, 0), (1024, 5, 0), (4096, 1, 3)]"},
}
RESIDUAL_SCALE = math.sqrt(0.5)  # fairseq's FConvDecoder: (x + residual) * sqrt(0.5)
SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")  # the zoo's ids 0-3; fairseq's 0 and 1 swapped
PREFIX = "decoder."
# the GCNN family's options that express fairseq's network (a converted model sets them)
FAIRSEQ_OPTIONS = ("input_projection", "output_projection", "residual", "residual_scale", "head_bias",
                   "adaptive_softmax_2018")


def parse_layers(expression):
    """fairseq's `decoder_layers`, a Python expression of lists of tuples joined by `+` and
    repeated by `* n`, evaluated without `eval`: `[(width, kernel_size, residual), ...]`."""

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple)):
            return [value(e) for e in node.elts]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return value(node.left) + value(node.right)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            left, right = value(node.left), value(node.right)
            return left * right
        raise ValueError

    try:
        layers = value(ast.parse(str(expression), mode="eval").body)
        spec = []
        for layer in layers:
            if len(layer) not in (2, 3) or not all(isinstance(v, int) for v in layer):
                raise ValueError
            spec.append((layer[0], layer[1], layer[2] if len(layer) == 3 else 1))
    except (ValueError, TypeError, SyntaxError):
        raise ValueError(f"decoder_layers {expression!r} is not a list of (width, kernel_size[, residual]) "
                         "tuples joined by + and repeated by * n.") from None
    return spec


def group_blocks(layers):
    """fairseq's layers as residual blocks: `(blocks, residual, closing)`, `blocks` the zoo's
    block specs, `residual` whether each has a skip path, `closing` the fairseq index of each
    block's last layer (where fairseq keeps its skip projection)."""
    blocks, residual, closing, pending = [], [], [], []  # pending: residual-0 layers not yet closed

    def skipless(indices):
        for i in indices:
            blocks.append([[layers[i][1], layers[i][0]]])
            residual.append(False)
            closing.append(i)

    for i, (width, kernel_size, reach) in enumerate(layers):
        if reach == 0:
            pending.append(i)
            continue
        if reach - 1 > len(pending):
            raise ValueError(f"Layer {i} of decoder_layers reaches {reach} layers back across another residual "
                             "connection; the zoo's residual blocks do not overlap.")
        if reach > 5:
            raise ValueError(f"Layer {i} of decoder_layers closes a residual block of {reach} layers; a block has "
                             "at most 5.")
        group = pending[len(pending) - (reach - 1):] + [i]
        skipless(pending[: len(pending) - (reach - 1)])
        blocks.append([[layers[j][1], layers[j][0]] for j in group])
        residual.append(True)
        closing.append(i)
        pending = []
    skipless(pending)
    return blocks, residual, closing


def read_dictionary(path, rows):
    """The zoo's word tokenizer for fairseq's dict.txt (`word count` lines) and an embedding
    of `rows` rows."""
    words = []
    lines = read_utf8_lines(path, "The dictionary")
    for n, line in enumerate(lines[:-1] if lines[-1] == "" else lines, start=1):
        fields = line.rsplit(" ", 2)
        if fields and fields[-1] == "#fairseq:overwrite":
            fields = fields[:-1]
        if len(fields) < 2 or not fields[-1].isdigit():
            raise ValueError(f"Line {n} of {path} is {line.strip()!r}; dict.txt lines are 'word count'.")
        words.append(" ".join(fields[:-1]))
    size = len(SPECIALS) + len(words)
    padded = size + (-size) % 8  # fairseq pads a dictionary to a multiple of 8 with madeupwords
    if rows not in (size, padded):
        raise ValueError(f"{path} gives {size} ids ({len(words)} words and 4 specials, {padded} padded to a "
                         f"multiple of 8) but the checkpoint's embedding has {rows} rows.")
    words += [f"madeupword{i:04d}" for i in range(rows - size)]
    return WordTokenizer(list(SPECIALS) + words, line_start="</s>")  # fairseq: each line after a </s>


def model_args(checkpoint):
    """The checkpoint's saved model arguments as a dict (fairseq < 0.10: `args`, a Namespace;
    later: `cfg["model"]`), with the named architecture's defaults filled in."""
    args = checkpoint.get("args") if isinstance(checkpoint, dict) else None
    if args is not None:
        args = dict(vars(args))
    elif isinstance(checkpoint, dict) and isinstance(checkpoint.get("cfg"), dict):
        args = dict(checkpoint["cfg"].get("model") or {})
        args.setdefault("criterion", (checkpoint["cfg"].get("criterion") or {}).get("_name"))
    else:
        raise ValueError("The checkpoint has neither `args` nor `cfg`: it is not a fairseq checkpoint.")
    arch = args.get("arch") or args.get("_name")
    if arch not in ARCHITECTURES:
        raise ValueError(f"The checkpoint is a fairseq {arch!r} model; only fconv_lm language models convert "
                         f"({', '.join(ARCHITECTURES)}).")
    for key, default in ARCHITECTURES[arch].items():
        if args.get(key) is None:
            args[key] = default
    return arch, args


class _StateDict:
    """The checkpoint's state dict, each key taken once, each shape checked."""

    def __init__(self, state):
        self.state, self.taken = state, set()

    def take(self, key, shape=None):
        if PREFIX + key not in self.state:
            raise ValueError(f"The checkpoint has no {PREFIX + key}, which the architecture from its args needs.")
        value = np.asarray(self.state[PREFIX + key], np.float32)
        if shape is not None and tuple(value.shape) != tuple(shape):
            raise ValueError(f"{PREFIX + key} has shape {list(value.shape)}, but the architecture from the "
                             f"checkpoint's args needs {list(shape)}.")
        self.taken.add(PREFIX + key)
        return value

    def left(self):
        return [k for k in self.state if k not in self.taken and not k.endswith("version")]


def _swap_01(array, axis):
    """fairseq's ids 0 (`<s>`) and 1 (`<pad>`) are the zoo's 1 and 0."""
    order = np.arange(array.shape[axis])
    order[[0, 1]] = [1, 0]
    return np.take(array, order, axis=axis)


def _linear(conv, state, key):
    """A weight-normalised nn.Linear (weight_g [out, 1], weight_v [out, in], bias) as a width-1
    GatedConv1D (kernel [1, in, out], g [out], bias)."""
    _, n_in, n_out = conv.kernel.shape
    conv.kernel.assign(state.take(f"{key}.weight_v", (n_out, n_in)).T[None])
    conv.g.assign(state.take(f"{key}.weight_g", (n_out, 1))[:, 0])
    conv.bias.assign(state.take(f"{key}.bias", (n_out,)))


def build_model(checkpoint):
    """The `GCNNLanguageModel` holding the checkpoint's weights."""
    arch, args = model_args(checkpoint)
    state = checkpoint.get("model")
    if not isinstance(state, dict) or PREFIX + "embed_tokens.weight" not in state:
        raise ValueError("The checkpoint's `model` holds no decoder.embed_tokens.weight: it is not a fairseq "
                         "language model's state dict.")
    if np.asarray(state.get(PREFIX + "version", [2])).reshape(-1)[0] < 2:
        raise ValueError("The checkpoint's decoder.version is below 2 (weight normalisation over the kernel's "
                         "first axis, before fairseq 0.1); it does not convert yet.")
    if str(args.get("decoder_attention", "False")) != "False":
        raise ValueError(f"The checkpoint's decoder_attention is {args['decoder_attention']!r}; a language model "
                         "has none ('False').")
    layers = parse_layers(args["decoder_layers"])
    blocks, residual, closing = group_blocks(layers)
    rows, embedding_dim = np.asarray(state[PREFIX + "embed_tokens.weight"]).shape
    if embedding_dim != int(args["decoder_embed_dim"]):
        raise ValueError(f"decoder.embed_tokens.weight has shape {[rows, embedding_dim]}, but the checkpoint's "
                         f"args give decoder_embed_dim {args['decoder_embed_dim']}.")
    dropout = float(args.get("dropout", 0.1) or 0.0)
    common = dict(vocabulary_size=int(rows), embedding_dim=int(embedding_dim), blocks=blocks, dropout=dropout,
                  embedding_dropout=dropout, input_projection=True, residual=residual, residual_scale=RESIDUAL_SCALE)
    adaptive = args.get("criterion") == "adaptive_loss" and args.get("adaptive_softmax_cutoff")
    if adaptive:
        cutoffs = [int(c) for c in str(args["adaptive_softmax_cutoff"]).split(",")]
        cutoffs = [c for c in cutoffs if c < rows]  # fairseq drops a cutoff equal to the vocabulary size
        model = GCNNLanguageModel(**common, cutoffs=cutoffs, head_bias=False,
                                  adaptive_softmax_2018=PREFIX + "adaptive_softmax.version" not in state)
    else:  # fairseq's fc2 (to decoder_embed_dim), then fc3 (a full softmax)
        model = GCNNLanguageModel(**common, output_projection=int(embedding_dim))
    sd = _StateDict(state)
    _assign_trunk(model, sd, closing)
    _assign_head(model, sd, adaptive, rows)
    if sd.left():
        raise ValueError(f"The checkpoint holds {sd.left()[0]}, which the architecture from its args "
                         f"({arch}: {len(layers)} layers) has no place for.")
    return model


def _assign_trunk(model, sd, closing):
    """The embedding, fc1 and the convolutions (with their blocks' projections) from `sd`."""
    model.embedding.embeddings.assign(_swap_01(sd.take("embed_tokens.weight"), 0))
    _linear(model.input_projection_layer, sd, "fc1")
    i = 0
    for block, last in zip(model.blocks, closing):
        for conv in block.convs:
            shape = tuple(conv.kernel.shape)
            conv.kernel.assign(sd.take(f"convolutions.{i}.weight_v", shape))
            conv.g.assign(sd.take(f"convolutions.{i}.weight_g", (1, 1, shape[2]))[0, 0])
            conv.bias.assign(sd.take(f"convolutions.{i}.bias", (shape[2],)))
            i += 1
        if block.projection is not None:
            _linear(block.projection, sd, f"projections.{last}")


def _assign_head(model, sd, adaptive, rows):
    """The output layer from `sd`: the adaptive softmax's head and tails, or fc2 and fc3."""
    head = model.head
    if adaptive:
        head.head_kernel.assign(_swap_01(sd.take("adaptive_softmax.head.weight", head.head_kernel.shape[::-1]).T, 1))
        for t, (projection, kernel) in enumerate(zip(head.tail_projections, head.tail_kernels)):
            projection.assign(sd.take(f"adaptive_softmax.tail.{t}.0.weight", projection.shape[::-1]).T)
            kernel.assign(sd.take(f"adaptive_softmax.tail.{t}.2.weight", kernel.shape[::-1]).T)
        return
    _linear(model.output_projection_layer, sd, "fc2")
    # fc3, weight-normalised: its weight g · v / ‖v‖ (row-wise) is the softmax's kernel
    n_in = head.kernel.shape[0]
    v = sd.take("fc3.weight_v", (rows, n_in)).astype(np.float64)
    g = sd.take("fc3.weight_g", (rows, 1)).astype(np.float64)
    head.kernel.assign(_swap_01((g * v / np.linalg.norm(v, axis=1, keepdims=True)).T.astype(np.float32), 1))
    head.bias.assign(_swap_01(sd.take("fc3.bias", (rows,)), 0))


def read_checkpoint(checkpoint):
    """The checkpoint file as Python objects (`torch_pickle.load`), its refusals as ValueError."""
    if not os.path.isfile(str(checkpoint)):
        raise ValueError(f"The checkpoint {str(checkpoint)!r} is not a file; give fairseq's .pt checkpoint and its "
                         "dict.txt.")
    try:
        return torch_pickle.load(checkpoint)
    except torch_pickle.CheckpointError as e:
        raise ValueError(str(e)) from None


def _conv_shapes(model):
    return [tuple(conv.kernel.shape) for block in model.blocks for conv in block.convs]


def first_difference(model, reference, label):
    """The first of the converted `model`'s shapes that `reference` (a preset's model) does not
    have, in fairseq's names, or None when the architectures agree (the vocabulary's size is
    dict.txt's, whatever the preset's)."""
    dims = model.embedding.embeddings.shape[1], reference.embedding.embeddings.shape[1]
    if dims[0] != dims[1]:
        return (f"decoder.embed_tokens.weight has shape {[model.vocabulary_size, dims[0]]}, where {label} has "
                f"{[model.vocabulary_size, dims[1]]}")
    ours, theirs = _conv_shapes(model), _conv_shapes(reference)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return f"decoder.convolutions.{i}.weight_v has shape {list(a)}, where {label} has {list(b)}"
    if len(ours) != len(theirs):
        return (f"the checkpoint has {len(ours)} convolutions, where {label} has {len(theirs)}"
                + (f" (its convolution {len(ours)} has shape {list(theirs[len(ours)])})" if len(theirs) > len(ours)
                   else f" (the checkpoint's decoder.convolutions.{len(theirs)} has no place)"))
    cutoffs = list(getattr(model.head, "cutoffs", [])), list(getattr(reference.head, "cutoffs", []))
    if cutoffs[0] != cutoffs[1]:
        return f"decoder.adaptive_softmax has cutoffs {cutoffs[0]}, where {label} has {cutoffs[1]}"
    return None


def load_as_preset(checkpoint, cls, config, label):
    """`zoo.load(PRESET, weights=CHECKPOINT)`: the fairseq checkpoint converted (its own GCNN with
    fairseq's options, the tokenizer of the `dict.txt` beside it, if any) when its architecture
    is the preset's (`cls(**config)`: the same embedding, convolutions and cutoffs); otherwise
    one sentence naming the first shape that differs."""
    import tensorflow as tf

    if not issubclass(cls, GCNNLanguageModel):
        raise ValueError(f"{checkpoint} is a torch checkpoint, which converts to a GCNN preset (zoo.convert.fairseq); "
                         f"{label} is a {cls.__name__}.")
    model = build_model(read_checkpoint(checkpoint))
    # the preset's shapes with fairseq's options (fc1, its residual pattern ...): nothing allocated
    fairseq_options = {k: v for k, v in model.get_config().items() if k in FAIRSEQ_OPTIONS}
    with tf.Graph().as_default():
        try:
            reference = cls(**{**config, **fairseq_options})
        except ValueError:  # the options do not fit the preset (an adaptive softmax's, say): its shapes as they are
            reference = cls(**config)
            fairseq_options = None
        if not reference.built:
            reference.build()
        difference = first_difference(model, reference, label)
    if not difference and fairseq_options is None:
        options = ", ".join(f"{k}={v!r}" for k, v in sorted(model.get_config().items()) if k in FAIRSEQ_OPTIONS)
        difference = f"its options ({options}) do not fit {label}'s config"
    if difference:
        raise ValueError(f"{checkpoint} is not {label}'s architecture: {difference}. Convert it to a preset "
                         "directory of its own with `zoo convert fairseq` and load that.")
    dictionary = os.path.join(os.path.dirname(os.path.abspath(str(checkpoint))), "dict.txt")
    if os.path.isfile(dictionary):
        model.tokenizer = read_dictionary(dictionary, model.vocabulary_size)
    else:  # the model still scores and generates ids; text needs the dictionary
        logging.getLogger(__name__).warning(
            f"{checkpoint}: no dict.txt beside it, so the model has no tokenizer (it reads and writes ids); put "
            "fairseq's dict.txt beside the checkpoint to read text.")
    return model


def convert(checkpoint, dictionary, out):
    """Converts fairseq's fconv_lm `checkpoint` (a .pt file, either torch format) with its
    `dictionary` (dict.txt) into a preset directory `out`; returns the model. Nothing
    half-written is left in `out`, and an `out` that already holds a preset is refused."""
    out = os.path.abspath(str(out))
    if os.path.exists(os.path.join(out, "config.json")):  # every preset directory has one
        raise ValueError(f"{out} already holds a preset; give an --out that does not exist or is empty.")
    blocking = preset_directory.file_in_the_way(out)
    if blocking is not None:
        raise ValueError(f"{blocking} is a file; give an --out that does not exist or is an empty directory.")
    if os.path.isdir(out) and os.listdir(out):
        raise ValueError(f"{out} is not empty; give an --out that does not exist or is empty.")
    for what, path in (("checkpoint", checkpoint), ("dictionary", dictionary)):
        if not os.path.isfile(str(path)):
            raise ValueError(f"The {what} {str(path)!r} is not a file; give fairseq's .pt checkpoint and its dict.txt.")
    model = build_model(read_checkpoint(checkpoint))
    tokenizer = read_dictionary(dictionary, model.vocabulary_size)
    model.tokenizer = tokenizer
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".convert-", dir=parent)
    try:
        model.save_to_preset(os.path.join(staging, "preset"))
        if os.path.isdir(out):
            os.rmdir(out)  # empty, checked above
        os.rename(os.path.join(staging, "preset"), out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return model


preset_directory.register_checkpoint_reader(torch_pickle.is_checkpoint, load_as_preset)
