"""Writes the converter's test data with fairseq's own code: small fconv_lm checkpoints in both
torch formats, their dict.txt, and fairseq's log-probabilities and greedy continuations.

Standalone on purpose: it imports torch, numpy and fairseq's modules, never the zoo, and runs in
a virtual environment of its own, outside the repository (torch and fairseq are no dependency of
the zoo, and nothing of fairseq is committed). Its oracle is fairseq's own `FConvDecoder`,
`LinearizedConvolution`, `ConvTBC` and `AdaptiveSoftmax`, loaded from fairseq's sources with small
stand-ins for the rest of the package (registries, the dictionary class, a few utils):

    python -m venv /work/fairseq-venv && /work/fairseq-venv/bin/pip install torch numpy
    # fairseq's sources at v0.12.2 and the 2018 adaptive softmax (e89329d6, 2018-06-12, the code
    # the released fconv_lm checkpoints were trained with), e.g. from a clone of fairseq:
    mkdir -p SRC/v0.12.2 SRC/2018/fairseq/modules
    for f in models/fconv.py models/fconv_lm.py models/fairseq_decoder.py \\
             models/fairseq_incremental_decoder.py incremental_decoding_utils.py \\
             modules/linearized_convolution.py modules/conv_tbc.py modules/adaptive_softmax.py \\
             modules/fairseq_dropout.py modules/quant_noise.py modules/grad_multiply.py \\
             modules/beamable_mm.py modules/learned_positional_embedding.py \\
             data/lm_context_window_dataset.py sequence_scorer.py; do
        mkdir -p SRC/v0.12.2/fairseq/$(dirname $f)
        git -C FAIRSEQ show v0.12.2:fairseq/$f > SRC/v0.12.2/fairseq/$f; done
    git -C FAIRSEQ show e89329d6:fairseq/modules/adaptive_softmax.py > SRC/2018/fairseq/modules/adaptive_softmax.py
    /work/fairseq-venv/bin/python tools/convert/make_fairseq_goldens.py --fairseq SRC --out zoo/convert/testdata

For each case (the two published architectures, `fconv_lm_dauphin_wikitext103` and
`fconv_lm_dauphin_gbw`, at reduced width and depth but with their residual patterns; each with
today's adaptive softmax and with 2018's) it writes `<case>.pt` (zip format), `<case>.legacy.pt`
(the legacy format), and `<case>.npz` holding `tokens` (fairseq ids; each row starts with `</s>`,
fairseq's line start), `log_probs` (fairseq's log-probability of every next token: `[rows, time]`
for targets `tokens[:, 1:]`), `prompt` and `greedy` (fairseq's incremental decoding's greedy
continuation of the prompt), and what fairseq's `eval_lm` reports on `eval.txt`: for each
`(--tokens-per-sample T, --context-window C)` of `EVAL_SETTINGS`, `eval_T_C` (the log-probability
of every token of the file's stream, in order) and `eval_T_C_perplexity`, and with
`--sample-break-mode eos` `eval_eos` (each line alone) and `eval_eos_perplexity`. Also
`dict.txt` and `eval.txt` (shared by all cases) and `tensors_*.pt` + `tensors.npz` for the
checkpoint reader's own tests.

`eval_lm`'s data path is fairseq's where it is plain Python: its `LMContextWindowDataset`
(the context window) and `SequenceScorer` (the scores) run as they are. The two Cython-backed
steps before them are restated from fairseq 0.12.2's code: `TokenBlockDataset` with
`break_mode="none"` (blocks of `T - C` consecutive tokens of the stream of lines, each line's
ids followed by `</s>`, a blank line just `</s>`; a block's source is its targets shifted right
by one, `</s>` before the first) and `MonolingualDataset`'s collater (right-padded with `<pad>`).

With `--full-size` it also writes `gcnn14_full.npz`: gcnn-14's full size (fairseq's
`fconv_lm_dauphin_wikitext103`, 267,744 ids, the 2018 adaptive softmax of the published
checkpoint) with the seeded weights of tools/convert/seeded_weights.py (`names`, `shapes` of its
parameters), fairseq's log-probabilities of `tokens` and greedy continuation of `prompt`.
"""

import argparse
import importlib.util
import os
import sys
import types

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seeded_weights  # noqa: E402  (numpy only; the zoo's full-size test draws the same weights)

EVAL_SETTINGS = ((16, 0), (48, 32), (24, 8))  # eval_lm's (--tokens-per-sample, --context-window)
FULL_SIZE = dict(arch="fconv_lm_dauphin_wikitext103", rows=267_744, seed=14)
VOCABULARY_WORDS = 60  # dict.txt lines; 4 specials + 60 = 64, a multiple of 8 (no madeupwords)
CUTOFFS = "12,24"  # a head of 12 words, two tail clusters
# Reduced from fairseq/models/fconv_lm.py: the same kinds of layers in the same patterns.
ARCHITECTURES = {
    # 850-wide single-layer blocks with kernels 6, 1, 5, 4, then wider: residual 1 everywhere, a
    # projection on the residual path where the width grows.
    "wikitext103": dict(arch="fconv_lm_dauphin_wikitext103", decoder_embed_dim=12,
                        decoder_layers="[(16, 6)] * 2 + [(16, 1)] + [(16, 5)] + [(24, 4)] + [(32, 4)]"),
    # Bottleneck blocks: two layers without a residual, then one reaching 3 layers back, with a
    # projection when the block widens.
    "gbw": dict(arch="fconv_lm_dauphin_gbw", decoder_embed_dim=8,
                decoder_layers="[(32, 5)] + [(8, 1, 0), (8, 5, 0), (32, 1, 3)] * 2"
                               " + [(16, 1, 0), (16, 5, 0), (48, 1, 3)]"),
    # fconv_lm itself without an adaptive softmax (criterion cross_entropy): fc2 to the
    # embedding's width, then fc3, a weight-normalised full softmax
    "plain": dict(arch="fconv_lm", decoder_embed_dim=8, decoder_layers="[(16, 4)] * 2 + [(24, 3)]",
                  criterion="cross_entropy"),
}
# a translation model (encoder and decoder), which the converter refuses naming its architecture
TRANSLATION = dict(arch="fconv_iwslt_de_en", encoder_embed_dim=8, encoder_layers="[(8, 3)]", decoder_embed_dim=8,
                   decoder_layers="[(8, 3)]", decoder_out_embed_dim=8)


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _package(name):
    module = types.ModuleType(name)
    module.__path__ = []
    sys.modules[name] = module
    return module


def load_fairseq(src, adaptive_softmax):
    """fairseq's fconv modules from `src` (a folder holding `fairseq/`), with stand-ins for the
    parts of fairseq they import but this oracle does not use; `adaptive_softmax` is the path of
    the adaptive_softmax.py to use."""
    for name in [n for n in sys.modules if n == "fairseq" or n.startswith("fairseq.")]:
        del sys.modules[name]
    root = os.path.join(src, "fairseq")
    fairseq = _package("fairseq")
    utils = types.ModuleType("fairseq.utils")
    utils.get_incremental_state = lambda m, s, k: m.get_incremental_state(s, k)
    utils.set_incremental_state = lambda m, s, k, v: m.set_incremental_state(s, k, v)
    utils.log_softmax = lambda x, dim, onnx_trace=False: torch.nn.functional.log_softmax(x.float(), dim=dim)
    utils.softmax = lambda x, dim, onnx_trace=False: torch.nn.functional.softmax(x.float(), dim=dim)
    utils.item = lambda t: t.item() if hasattr(t, "item") else t
    utils.safe_hasattr = hasattr
    utils.eval_str_list = lambda x, type=float: [type(v) for v in (eval(x) if isinstance(x, str) else x)]
    utils.make_positions = None
    utils.strip_pad = lambda tensor, pad: tensor[tensor.ne(pad)]  # fairseq.utils.strip_pad
    sys.modules["fairseq.utils"] = fairseq.utils = utils
    _load("fairseq.incremental_decoding_utils", os.path.join(root, "incremental_decoding_utils.py"))

    models = _package("fairseq.models")
    models.register_model = lambda *a, **k: (lambda cls: cls)
    models.register_model_architecture = lambda *a, **k: (lambda fn: fn)

    class FairseqModel(torch.nn.Module):
        def __init__(self, *parts):
            super().__init__()
            for name, part in zip(("decoder",) if len(parts) == 1 else ("encoder", "decoder"), parts):
                setattr(self, name, part)

    models.FairseqEncoder = models.FairseqEncoderDecoderModel = models.FairseqLanguageModel = FairseqModel
    models.FairseqDecoder = _load("fairseq.models.fairseq_decoder",
                                  os.path.join(root, "models", "fairseq_decoder.py")).FairseqDecoder
    models.FairseqIncrementalDecoder = _load(
        "fairseq.models.fairseq_incremental_decoder",
        os.path.join(root, "models", "fairseq_incremental_decoder.py")).FairseqIncrementalDecoder

    modules = _package("fairseq.modules")
    for name, cls in (("fairseq_dropout", "FairseqDropout"), ("quant_noise", None), ("grad_multiply", "GradMultiply"),
                      ("beamable_mm", "BeamableMM"), ("learned_positional_embedding", "LearnedPositionalEmbedding"),
                      ("conv_tbc", "ConvTBC"), ("linearized_convolution", "LinearizedConvolution")):
        module = _load(f"fairseq.modules.{name}", os.path.join(root, "modules", f"{name}.py"))
        if cls:
            setattr(modules, cls, getattr(module, cls))
    modules.AdaptiveSoftmax = _load("fairseq.modules.adaptive_softmax", adaptive_softmax).AdaptiveSoftmax
    data = _package("fairseq.data")
    data.FairseqDataset = object
    monolingual = types.ModuleType("fairseq.data.monolingual_dataset")
    monolingual.MonolingualDataset = object  # a type annotation only
    sys.modules[monolingual.__name__] = monolingual
    _load("fairseq.data.lm_context_window_dataset", os.path.join(root, "data", "lm_context_window_dataset.py"))
    _load("fairseq.sequence_scorer", os.path.join(root, "sequence_scorer.py"))
    fconv = _load("fairseq.models.fconv", os.path.join(root, "models", "fconv.py"))
    return _load("fairseq.models.fconv_lm", os.path.join(root, "models", "fconv_lm.py")), fconv


class Dictionary:
    """fairseq's id order (`<s>`, `<pad>`, `</s>`, `<unk>`, then dict.txt): what FConvDecoder asks."""

    def __init__(self, words):
        self.symbols = ["<s>", "<pad>", "</s>", "<unk>"] + list(words)

    def __len__(self):
        return len(self.symbols)

    def pad(self):
        return 1

    def eos(self):
        return 2


def build(fconv_lm, dictionary, case, seed):
    case = {"criterion": "adaptive_loss", **case}
    if case["criterion"] == "adaptive_loss":
        case.setdefault("adaptive_softmax_cutoff", CUTOFFS)
    args = argparse.Namespace(dropout=0.1, tokens_per_sample=64, **{k: v for k, v in case.items() if k != "arch"})
    # the function registered under the architecture's name ("fconv_lm" is base_lm_architecture)
    getattr(fconv_lm, "base_lm_architecture" if case["arch"] == "fconv_lm" else case["arch"])(args)
    args.arch = case["arch"]
    task = types.SimpleNamespace(target_dictionary=dictionary)
    torch.manual_seed(seed)
    model = fconv_lm.FConvLanguageModel.build_model(args, task)
    with torch.no_grad():  # random weights everywhere (fairseq initialises biases and gains plainly)
        for name, p in model.named_parameters():
            p.normal_(0, 0.5 if name.endswith("weight_g") or name.endswith("bias") else 0.3)
            if name.endswith("weight_g"):
                p.abs_().add_(0.2)
    return model.eval(), args


def log_probs(model, tokens):
    with torch.no_grad():
        out = model.decoder(tokens)
        lp = model.decoder.get_normalized_probs(out, log_probs=True)
    return torch.gather(lp[:, :-1], 2, tokens[:, 1:, None])[..., 0].numpy()


def greedy(model, prompt, steps):
    """fairseq's incremental decoding, greedy: one token at a time through `incremental_state`."""
    state, tokens = {}, prompt[:, :1]
    with torch.no_grad():
        for t in range(prompt.shape[1] + steps - 1):
            # the decoder reads only the last token of what it is given (the rest is in `state`)
            out = model.decoder(tokens, incremental_state=state)
            lp = model.decoder.get_normalized_probs(out, log_probs=True)[:, -1].clone()
            # fairseq's SequenceGenerator never selects <pad>; <s> (never a training target of
            # fairseq's language models) is left out too, as the zoo never emits it
            lp[:, [0, 1]] = -float("inf")
            following = prompt[:, t + 1:t + 2] if t + 1 < prompt.shape[1] else lp.argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, following], dim=1)
    return tokens[:, prompt.shape[1]:].numpy()


class _Scored(torch.nn.Module):
    """The language model as SequenceScorer calls it: `model(src_tokens, src_lengths)` and
    `get_normalized_probs` (FairseqLanguageModel's, which hand both to the decoder)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, src_tokens, src_lengths=None):
        return self.model.decoder(src_tokens)

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        return self.model.decoder.get_normalized_probs(net_output, log_probs, sample)


class _Blocks:
    """`MonolingualDataset` over `TokenBlockDataset` as fairseq 0.12.2 builds them for eval_lm
    (targets "future", no bos): `collater` of (source, target) pairs, right-padded."""

    def __init__(self, pad):
        self.pad = pad

    def collater(self, samples):
        width = max(len(s) for s, _ in samples)
        src = torch.full((len(samples), width), self.pad, dtype=torch.long)
        tgt = torch.full((len(samples), width), self.pad, dtype=torch.long)
        for i, (source, target) in enumerate(samples):
            src[i, :len(source)], tgt[i, :len(target)] = torch.tensor(source), torch.tensor(target)
        lengths = torch.tensor([len(s) for s, _ in samples])
        return {"net_input": {"src_tokens": src, "src_lengths": lengths}, "target": tgt,
                "id": torch.arange(len(samples)), "ntokens": int(lengths.sum())}


def encode_line(line, dictionary):
    """fairseq's Dictionary.encode_line: words split on whitespace, unknown ones `<unk>`, `</s>` after."""
    index = {w: i for i, w in enumerate(dictionary.symbols)}
    return [index.get(w, 3) for w in line.split()] + [dictionary.eos()]


def eval_lm(model, lines, dictionary, tokens_per_sample=None, context_window=0, batch_size=2):
    """What `fairseq-eval-lm` computes: `(log-probability of every token, in order, perplexity)`.
    `tokens_per_sample=None` is `--sample-break-mode eos` (each line alone)."""
    from fairseq.data.lm_context_window_dataset import LMContextWindowDataset
    from fairseq.sequence_scorer import SequenceScorer

    encoded = [encode_line(line, dictionary) for line in lines]
    eos, pad = dictionary.eos(), dictionary.pad()
    if tokens_per_sample is None:
        blocks = [([eos] + ids[:-1], ids) for ids in encoded]
    else:
        stream = [i for ids in encoded for i in ids]
        size = tokens_per_sample - context_window  # eval_lm shrinks the block by the context window
        blocks = [(([eos] + stream[:s + size - 1]) if s == 0 else stream[s - 1:s + size - 1], stream[s:s + size])
                  for s in range(0, len(stream), size)]
    dataset = _Blocks(pad)
    if context_window > 0:
        dataset = LMContextWindowDataset(dataset, tokens_per_sample - context_window, context_window, pad)
    scorer, scored = SequenceScorer(dictionary), _Scored(model)
    scores = []
    for b in range(0, len(blocks), batch_size):
        sample = dataset.collater(blocks[b:b + batch_size])
        for hypos in scorer.generate([scored], sample):
            scores.append(hypos[0]["positional_scores"].float())
    scores = torch.cat(scores)
    loss = -scores.sum().item() / scores.numel() / np.log(2)  # base 2, as eval_lm reports it
    return scores.numpy(), 2 ** loss


def eval_text():
    """eval.txt's lines: words of dict.txt, unknown words (odd Unicode too), blank lines, tabs."""
    rng = np.random.default_rng(7)
    lines = []
    for n in range(40):
        words = [f"w{i:02d}" for i in rng.integers(0, VOCABULARY_WORDS, rng.integers(0, 12))]
        if n % 7 == 3:
            words.insert(len(words) // 2, ["naïve", "zzz", "ß​"][n % 3])
        lines.append(("\t" if n % 5 == 1 else " ").join(words) + ("  " if n % 4 == 2 else ""))
    return lines


def full_size(fconv_lm, dictionary_words, out):
    """gcnn14_full.npz: fairseq's outputs on gcnn-14's full size with seeded weights."""
    dictionary = Dictionary(dictionary_words)
    args = argparse.Namespace(criterion="adaptive_loss", adaptive_softmax_cutoff="10000,20000,200000", dropout=0.1,
                              tokens_per_sample=512)
    getattr(fconv_lm, FULL_SIZE["arch"])(args)
    args.arch = FULL_SIZE["arch"]
    model = fconv_lm.FConvLanguageModel.build_model(args, types.SimpleNamespace(target_dictionary=dictionary))
    names = [name for name, _ in model.named_parameters()]
    shapes = [list(p.shape) for _, p in model.named_parameters()]
    weights = seeded_weights.state_dict(FULL_SIZE["seed"], names, shapes)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(weights[name]))
    del weights
    model.eval()
    rng = np.random.default_rng(14)
    tokens = torch.tensor(np.concatenate([np.full((2, 1), 2), rng.integers(4, len(dictionary), (2, 40))], 1))
    tokens[1, 5:15] = torch.tensor(rng.integers(4, 300, 10))  # frequent words: the head's shortlist too
    prompt = tokens[:1, :6]
    np.savez(os.path.join(out, "gcnn14_full.npz"), names=np.array(names),
             shapes=np.array([",".join(str(d) for d in shape) for shape in shapes]),
             seed=FULL_SIZE["seed"], decoder_layers=args.decoder_layers, decoder_embed_dim=args.decoder_embed_dim,
             adaptive_softmax_cutoff=args.adaptive_softmax_cutoff, tokens=tokens.numpy(),
             log_probs=log_probs(model, tokens), prompt=prompt.numpy(), greedy=greedy(model, prompt, 4))
    print(f"gcnn14_full.npz: {sum(int(np.prod(s)) for s in shapes):,} numbers")


def write_tensors(out):
    """Every storage type a checkpoint can hold, views with offsets and strides, in both formats."""
    torch.manual_seed(0)
    base = torch.randn(5, 6)
    tensors = {
        "float32": base, "transposed": base.t(), "row_view": base[2], "column_view": base[:, 3],
        "float64": torch.randn(3, dtype=torch.float64), "float16": torch.randn(4).half(),
        "bfloat16": torch.randn(4).bfloat16(), "int64": torch.tensor([1, -2, 3 << 40]),
        "int32": torch.tensor([7, -8], dtype=torch.int32), "uint8": torch.tensor([0, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False]), "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3),
    }
    torch.save(tensors, os.path.join(out, "tensors_zip.pt"))
    torch.save(tensors, os.path.join(out, "tensors_legacy.pt"), _use_new_zipfile_serialization=False)
    np.savez(os.path.join(out, "tensors.npz"),
             **{k: (v.float() if v.dtype == torch.bfloat16 else v).numpy() for k, v in tensors.items()})


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fairseq", required=True, help="folder with v0.12.2/fairseq/... and 2018/fairseq/modules/...")
    p.add_argument("--out", required=True)
    p.add_argument("--full-size", action="store_true", help="only gcnn14_full.npz (1.3 GB of weights in memory)")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    words = [f"w{i:02d}" for i in range(VOCABULARY_WORDS)]
    with open(os.path.join(args.out, "dict.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{w} {1000 - i}\n" for i, w in enumerate(words))
    dictionary = Dictionary(words)
    current = os.path.join(args.fairseq, "v0.12.2")
    old_softmax = os.path.join(args.fairseq, "2018", "fairseq", "modules", "adaptive_softmax.py")
    if args.full_size:
        fconv_lm, _ = load_fairseq(current, old_softmax)
        full_size(fconv_lm, [f"w{i:06d}" for i in range(FULL_SIZE["rows"] - 4)], args.out)
        return
    lines = eval_text()
    with open(os.path.join(args.out, "eval.txt"), "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    rng = np.random.default_rng(0)
    tokens = torch.tensor(np.concatenate([np.full((3, 1), 2), rng.integers(4, len(dictionary), (3, 20))], 1))
    tokens[0, 10] = 2  # a line end inside the sequence, as fairseq's stream of lines has
    prompt = tokens[:2, :4]
    for softmax_format, softmax_path in (("", os.path.join(current, "fairseq", "modules", "adaptive_softmax.py")),
                                         ("_2018", old_softmax)):
        fconv_lm, _ = load_fairseq(current, softmax_path)
        for seed, (name, case) in enumerate(ARCHITECTURES.items()):
            if softmax_format and "criterion" in case:
                continue  # no adaptive softmax: one format
            model, model_args = build(fconv_lm, dictionary, case, seed)
            state = model.state_dict()
            assert ("decoder.adaptive_softmax.version" in state) == (softmax_format == "" and "criterion" not in case)
            checkpoint = {"args": model_args, "model": state, "optimizer_history": [
                {"criterion_name": "AdaptiveLoss", "optimizer_name": "FairseqNAG", "lr_scheduler_state": {"best": 4.5},
                 "num_updates": 10}], "extra_state": {"val_loss": np.float64(4.5), "train_iterator": {"epoch": 1}}}
            stem = os.path.join(args.out, f"{name}{softmax_format}")
            torch.save(checkpoint, stem + ".pt")
            torch.save(checkpoint, stem + ".legacy.pt", _use_new_zipfile_serialization=False)
            evaluated = {}
            for t, c in EVAL_SETTINGS:
                evaluated[f"eval_{t}_{c}"], evaluated[f"eval_{t}_{c}_perplexity"] = eval_lm(
                    model, lines, dictionary, t, c)
            evaluated["eval_eos"], evaluated["eval_eos_perplexity"] = eval_lm(model, lines, dictionary)
            np.savez(stem + ".npz", tokens=tokens.numpy(), log_probs=log_probs(model, tokens),
                     prompt=prompt.numpy(), greedy=greedy(model, prompt, 8), **evaluated)
            print(f"{stem}: {sum(v.numel() for v in state.values())} numbers")
    write_translation(args.out, dictionary)
    write_tensors(args.out)


def write_translation(out, dictionary):
    """translation.pt: a tiny fconv translation model (fairseq's FConvModel), as fairseq saves it."""
    fconv = sys.modules["fairseq.models.fconv"]  # as load_fairseq loaded it last
    args = argparse.Namespace(dropout=0.1, max_source_positions=64, max_target_positions=64, share_input_output_embed=False,
                              **{k: v for k, v in TRANSLATION.items() if k != "arch"})
    getattr(fconv, TRANSLATION["arch"])(args)
    args.arch, args.criterion = TRANSLATION["arch"], "label_smoothed_cross_entropy"
    task = types.SimpleNamespace(source_dictionary=dictionary, target_dictionary=dictionary)
    torch.manual_seed(5)
    model = fconv.FConvModel.build_model(args, task)
    torch.save({"args": args, "model": model.state_dict(), "optimizer_history": [], "extra_state": {}},
               os.path.join(out, "translation.pt"))


if __name__ == "__main__":
    main()
