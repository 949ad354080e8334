"""The fairseq side of `zoo benchmark fairseq`: fairseq's own `FConvDecoder` and `AdaptiveSoftmax`
(loaded from fairseq's sources by tools/convert/make_fairseq_goldens.py) under torch, on CPU.

Standalone, as harness.py says (it imports make_fairseq_goldens.py too, not the zoo), and answering in
the harness's protocol. Two commands:

    TORCH_PYTHON fairseq_torch.py make --fairseq SRC --spec JSON --out DIR
        writes DIR/checkpoint.pt (fairseq's checkpoint dict, torch.save in the legacy format) and
        DIR/dict.txt: the architecture `--spec` (JSON, one of fairseq.py's SIZES) with
        make_fairseq_goldens.build's random weights.
    TORCH_PYTHON fairseq_torch.py serve --fairseq SRC --threads 2
        a worker: reads one JSON command per line on stdin, answers one JSON line on stdout
        (ops: load, score, generate, train_load, train, matmul, copy, quit); the zoo side's worker
        answers the same commands, so that the benchmark interleaves the two repeat by repeat.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import answer, serve as answer_commands, status_kib, timed  # noqa: E402

GOLDENS = os.path.join(HERE, os.pardir, "convert", "make_fairseq_goldens.py")


def import_goldens(path):
    path = os.path.abspath(path or GOLDENS)
    if not os.path.isfile(path):
        raise SystemExit(f"make_fairseq_goldens.py not found at {path}; give --goldens PATH.")
    sys.path.insert(0, os.path.dirname(path))
    import make_fairseq_goldens

    return make_fairseq_goldens


def softmax_path(src, softmax):
    if softmax == "2018":
        return os.path.join(src, "2018", "fairseq", "modules", "adaptive_softmax.py")
    return os.path.join(src, "v0.12.2", "fairseq", "modules", "adaptive_softmax.py")


def words(count):
    return [f"w{i:06d}" for i in range(count)]


def build(goldens, src, spec, seed=0):
    """fairseq's fconv_lm of `spec` (a dict: arch, embed_dim, layers, cutoffs, words, softmax,
    dropout; fairseq.py's SIZES) with make_fairseq_goldens.build's random weights: `(model, args)`."""
    fconv_lm, _ = goldens.load_fairseq(os.path.join(src, "v0.12.2"), softmax_path(src, spec["softmax"]))
    dictionary = goldens.Dictionary(words(spec["words"]))
    goldens.CUTOFFS = spec["cutoffs"]  # build() reads the module's CUTOFFS
    case = {"arch": spec["arch"], "decoder_embed_dim": spec["embed_dim"], "decoder_layers": spec["layers"]}
    model, args = goldens.build(fconv_lm, dictionary, case, seed)
    args.dropout = spec["dropout"]
    for module in model.modules():  # build() made them at 0.1
        if type(module).__name__ == "FairseqDropout":
            module.p = spec["dropout"]
    return model, args


def make(args):
    goldens = import_goldens(args.goldens)
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    spec = json.loads(args.spec)
    start = time.perf_counter()
    model, model_args = build(goldens, args.fairseq, spec, args.seed)
    state = model.state_dict()
    assert ("decoder.adaptive_softmax.version" in state) == (spec["softmax"] != "2018"), sorted(state)[-3:]
    checkpoint = {"args": model_args, "model": state, "optimizer_history": [
        {"criterion_name": "AdaptiveLoss", "optimizer_name": "FairseqNAG", "lr_scheduler_state": {"best": 4.5},
         "num_updates": 1}], "extra_state": {"val_loss": np.float64(4.5), "train_iterator": {"epoch": 1}}}
    path = os.path.join(args.out, "checkpoint.pt")
    torch.save(checkpoint, path, _use_new_zipfile_serialization=args.format == "zip")
    with open(os.path.join(args.out, "dict.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{w} {spec['words'] - i}\n" for i, w in enumerate(words(spec["words"])))
    return {"checkpoint": path, "numbers": sum(v.numel() for v in state.values()), "bytes": os.path.getsize(path),
            "seconds": time.perf_counter() - start}


# ---- the worker ---------------------------------------------------------------------------------
class Worker:
    def __init__(self, goldens, src, threads):
        self.goldens, self.src = goldens, src
        torch.set_num_threads(threads)
        self.threads = torch.get_num_threads()

    def load(self, checkpoint, spec):
        """fairseq's model of `spec`, its weights read back from `checkpoint` (what `make` wrote)."""
        self.model, _ = build(self.goldens, self.src, spec)
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)["model"]
        self.model.load_state_dict(state, strict=True)
        self.model.eval()
        del state
        return {"params": sum(p.numel() for p in self.model.parameters()), "rss_mib": status_kib("VmRSS") / 1024,
                "library": f"torch {torch.__version__}", "threads": torch.get_num_threads()}

    def score(self, tokens, save=None):
        """fairseq's exact scoring, as its SequenceScorer (eval_lm) does it: the decoder's forward
        pass, `get_normalized_probs(..., sample={"target": ...})` (the adaptive softmax computes
        only the tail clusters that hold a target) and the targets' log-probabilities gathered."""
        ids = torch.from_numpy(np.load(tokens).astype(np.int64))
        inputs, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

        def score():
            with torch.no_grad():
                out = self.model.decoder(inputs)
                lp = self.model.decoder.get_normalized_probs(out, log_probs=True, sample={"target": targets})
                return torch.gather(lp, 2, targets[..., None])[..., 0]

        seconds, scores = timed(score)
        if save:
            np.save(save, scores.numpy())
        return {"s": seconds, "tokens": int(targets.numel())}

    def generate(self, prompt, new_tokens, save=None):
        """make_fairseq_goldens.greedy: fairseq's incremental decoding, one token at a time."""
        ids = torch.from_numpy(np.load(prompt).astype(np.int64))
        seconds, out = timed(self.goldens.greedy, self.model, ids, new_tokens)
        if save:
            np.save(save, out)
        return {"s": seconds, "tokens": int(out.size)}

    def train_load(self, checkpoint, spec, learning_rate, clipnorm):
        self.train_model, _ = build(self.goldens, self.src, spec)
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)["model"]
        self.train_model.load_state_dict(state, strict=True)
        self.train_model.train()
        # gcnn-ptb's optimiser: Adam (torch's, foreach) with the gradients' global norm clipped
        self.optimizer = torch.optim.Adam(self.train_model.parameters(), lr=learning_rate)
        self.clipnorm = clipnorm
        return {"params": sum(p.numel() for p in self.train_model.parameters())}

    def train(self, tokens):
        """One training step as fairseq's trainer takes it with the adaptive_loss criterion
        (fairseq/criterions/adaptive_loss.py): the decoder, the adaptive softmax's clusters,
        the summed cross-entropy of each over the tokens, divided by their number (fairseq
        divides the gradients by the sample size), backward, clip, step."""
        ids = torch.from_numpy(np.load(tokens).astype(np.int64))
        inputs, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
        model, softmax = self.train_model, self.train_model.decoder.adaptive_softmax
        start = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        hidden, _ = model.decoder(inputs)
        logits, new_targets = softmax(hidden, targets.reshape(-1))
        loss = hidden.new(1).zero_()
        for cluster_logits, cluster_targets in zip(logits, new_targets):
            if cluster_targets is not None:
                assert cluster_targets.min() >= 0 and cluster_targets.max() <= cluster_logits.size(1)
                loss += torch.nn.functional.cross_entropy(cluster_logits, cluster_targets, ignore_index=1,
                                                          reduction="sum")
        (loss / targets.numel()).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), self.clipnorm)
        self.optimizer.step()
        value = float(loss) / targets.numel()
        return {"s": time.perf_counter() - start, "tokens": int(targets.numel()), "loss": value}

    def matmul(self, n, repeats=3):
        """GFLOP/s of an n×n float32 matmul (2·n³ FLOPs), the best of `repeats`."""
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)
        best = min(timed(torch.mm, a, b)[0] for _ in range(repeats))
        return {"gflops": 2 * n**3 / best / 1e9, "library": "torch.mm"}

    def copy(self, mib, repeats=3):
        """GB/s of a copy of a `mib`-MiB float32 array into another (bytes read + bytes written,
        as STREAM's Copy counts them), the best of `repeats`."""
        src = torch.ones(mib * 2**18)
        dst = torch.empty_like(src)
        dst.copy_(src)
        best = min(timed(dst.copy_, src)[0] for _ in range(repeats))
        return {"gbs": 2 * src.numel() * 4 / best / 1e9, "library": "torch copy_"}


def serve(args):
    goldens = import_goldens(args.goldens)
    worker = Worker(goldens, args.fairseq, args.threads)
    answer_commands(worker, {"ready": True, "pid": os.getpid(), "threads": worker.threads})


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("make", "serve"):
        s = sub.add_parser(name)
        s.add_argument("--fairseq", required=True, help="folder with v0.12.2/fairseq/... and 2018/fairseq/modules/...")
        s.add_argument("--goldens", help="make_fairseq_goldens.py (default: ../convert/ beside this file)")
        s.add_argument("--threads", type=int, default=2)
    make_parser = sub.choices["make"]
    make_parser.add_argument("--spec", required=True, help="the architecture as JSON (fairseq.py's SIZES)")
    make_parser.add_argument("--out", required=True)
    make_parser.add_argument("--format", choices=("legacy", "zip"), default="legacy")
    make_parser.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.command == "make":
        answer(make, args)
    else:
        serve(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
