"""The fairseq side of `zoo benchmark fairseq`: fairseq's own `FConvDecoder` and `AdaptiveSoftmax` (loaded from
fairseq's sources by tools/convert/make_fairseq_goldens.py) under torch, on CPU. Standalone, as harness.py says:
`TORCH_PYTHON fairseq_torch.py make SRC THREADS SPEC OUT` writes a checkpoint; `... serve SRC THREADS` is the
worker (docs/benchmarks.md#fairseq).
"""

import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, os.pardir, "convert")]
import make_fairseq_goldens as goldens  # noqa: E402
from harness import answer, serve, status_kib, timed  # noqa: E402


def words(count):
    return [f"w{i:06d}" for i in range(count)]


def build(src, spec, seed=0):
    """`(model, args)`: fairseq's fconv_lm of `spec` (a SIZES entry), make_fairseq_goldens.build's random weights."""
    version = "2018" if spec["softmax"] == "2018" else "v0.12.2"
    fconv_lm, _ = goldens.load_fairseq(os.path.join(src, "v0.12.2"),
                                       os.path.join(src, version, "fairseq", "modules", "adaptive_softmax.py"))
    case = {"arch": spec["arch"], "decoder_embed_dim": spec["embed_dim"], "decoder_layers": spec["layers"],
            "adaptive_softmax_cutoff": spec["cutoffs"]}
    model, args = goldens.build(fconv_lm, goldens.Dictionary(words(spec["words"])), case, seed)
    args.dropout = spec["dropout"]
    for module in model.modules():  # build() made them at 0.1
        if type(module).__name__ == "FairseqDropout":
            module.p = spec["dropout"]
    return model, args


def make(src, spec, out):
    """fairseq's checkpoint dict of `spec` in `out`/checkpoint.pt (torch.save's legacy format), and its dict.txt."""
    os.makedirs(out, exist_ok=True)
    start = time.perf_counter()
    model, model_args = build(src, spec)
    state = model.state_dict()
    assert ("decoder.adaptive_softmax.version" in state) == (spec["softmax"] != "2018"), sorted(state)[-3:]
    checkpoint = {"args": model_args, "model": state, "optimizer_history": [
        {"criterion_name": "AdaptiveLoss", "optimizer_name": "FairseqNAG", "lr_scheduler_state": {"best": 4.5},
         "num_updates": 1}], "extra_state": {"val_loss": np.float64(4.5), "train_iterator": {"epoch": 1}}}
    path = os.path.join(out, "checkpoint.pt")
    torch.save(checkpoint, path, _use_new_zipfile_serialization=False)
    with open(os.path.join(out, "dict.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{w} {spec['words'] - i}\n" for i, w in enumerate(words(spec["words"])))
    return {"checkpoint": path, "numbers": sum(v.numel() for v in state.values()), "bytes": os.path.getsize(path),
            "seconds": time.perf_counter() - start}


def pair(tokens):
    """The inputs and the targets of the windows in the .npy file `tokens`."""
    ids = torch.from_numpy(np.load(tokens).astype(np.int64))
    return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()


class Worker:
    """fairseq's side of every command of fairseq.py's ZooWorker."""

    def __init__(self, src):
        self.src = src

    def loaded(self, checkpoint, spec):
        model, _ = build(self.src, spec)
        model.load_state_dict(torch.load(checkpoint, map_location="cpu", weights_only=False)["model"], strict=True)
        return model

    def load(self, checkpoint, spec):
        self.model = self.loaded(checkpoint, spec).eval()
        return {"params": sum(p.numel() for p in self.model.parameters()), "rss_mib": status_kib("VmRSS") / 1024,
                "library": f"torch {torch.__version__}", "threads": torch.get_num_threads()}

    def score(self, tokens, save=None):
        """fairseq's exact scoring, as its SequenceScorer (eval_lm): the decoder, `get_normalized_probs(...,
        sample={"target": ...})` (only the tail clusters that hold a target) and the targets' log-probabilities."""
        inputs, targets = pair(tokens)

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
        seconds, out = timed(goldens.greedy, self.model, torch.from_numpy(np.load(prompt).astype(np.int64)), new_tokens)
        if save:
            np.save(save, out)
        return {"s": seconds, "tokens": int(out.size)}

    def train_load(self, checkpoint, spec, learning_rate, clipnorm):
        """gcnn-ptb's optimiser: torch's Adam (foreach), the gradients' global norm clipped."""
        self.train_model = self.loaded(checkpoint, spec).train()
        self.optimizer, self.clipnorm = torch.optim.Adam(self.train_model.parameters(), lr=learning_rate), clipnorm
        return {"params": sum(p.numel() for p in self.train_model.parameters())}

    def train(self, tokens):
        """One step as fairseq's trainer takes it with the adaptive_loss criterion: each cluster's summed
        cross-entropy over the tokens, divided by their number, backward, clip, step."""
        (inputs, targets), model = pair(tokens), self.train_model
        start = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        hidden, _ = model.decoder(inputs)
        logits, new_targets = model.decoder.adaptive_softmax(hidden, targets.reshape(-1))
        loss = hidden.new(1).zero_()
        for cluster_logits, cluster_targets in zip(logits, new_targets):
            if cluster_targets is not None:
                assert cluster_targets.min() >= 0 and cluster_targets.max() <= cluster_logits.size(1)
                loss += torch.nn.functional.cross_entropy(cluster_logits, cluster_targets, ignore_index=1,
                                                          reduction="sum")
        (loss / targets.numel()).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), self.clipnorm)
        self.optimizer.step()
        return {"s": time.perf_counter() - start, "tokens": int(targets.numel()), "loss": float(loss) / targets.numel()}

    def matmul(self, n, repeats=3):
        """GFLOP/s of an n×n float32 matmul (2·n³ FLOPs), the best of `repeats`."""
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)
        best = min(timed(torch.mm, a, b)[0] for _ in range(repeats))
        return {"gflops": 2 * n**3 / best / 1e9, "library": "torch.mm"}

    def copy(self, mib, repeats=3):
        """GB/s of a copy of `mib` MiB of float32 (bytes read + written, as STREAM's Copy), the best of `repeats`."""
        src = torch.ones(mib * 2**18)
        dst = torch.empty_like(src)
        dst.copy_(src)
        best = min(timed(dst.copy_, src)[0] for _ in range(repeats))
        return {"gbs": 2 * src.numel() * 4 / best / 1e9, "library": "torch copy_"}


if __name__ == "__main__":
    command, src, threads, *rest = sys.argv[1:]
    torch.set_num_threads(int(threads))
    if command == "make":
        answer(make, src, json.loads(rest[0]), rest[1])
    else:
        serve(Worker(src), {"ready": True, "pid": os.getpid(), "threads": torch.get_num_threads()})
