"""The torch side of `zoo benchmark adaptive-softmax`: one forward + backward step of
`torch.nn.AdaptiveLogSoftmaxWithLoss(...)(hidden, targets).loss`, timed, with its peak memory.

Standalone, as harness.py says (torch is no dependency of the zoo). The TF benchmark calls it as

    TORCH_PYTHON adaptive_softmax_torch.py --vocabulary-size V --cutoffs 10000,20000,200000 \
        --hidden-file hidden.npy --targets-file targets.npy --threads N --repeats R

and it answers one line of JSON (the harness's protocol of a one-shot child). It can be run by
hand the same way (without the .npy files it draws its own inputs: Gaussian hidden states and Zipf
targets, P(id = r) proportional to 1 / (r + 1), from `--seed`).
"""

import argparse
import os
import sys

import numpy as np
import torch

# The TF side's harness (timing, peak memory, the child's answer) and Zipf sampler, from the files
# beside this one (standard library and numpy only), found through this folder, not an installed zoo.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from common import zipf_targets  # noqa: E402
from harness import PeakRSS, status_kib  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vocabulary-size", type=int, required=True)
    p.add_argument("--cutoffs", required=True, help="comma-separated, e.g. 10000,20000,200000")
    p.add_argument("--div-value", type=float, default=4.0)
    p.add_argument("--hidden-size", type=int, default=512, help="ignored when --hidden-file is given")
    p.add_argument("--tokens", type=int, default=1024, help="ignored when --hidden-file is given")
    p.add_argument("--hidden-file", help=".npy float32 [tokens, hidden]")
    p.add_argument("--targets-file", help=".npy integer [tokens]")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    harness.answer(measure, p.parse_args(argv))
    return 0


def measure(args):
    """The step timed `args.warmup` + `args.repeats` times, with its peak memory."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cutoffs = [int(c) for c in args.cutoffs.split(",")]
    if args.hidden_file:
        hidden_np = np.load(args.hidden_file).astype(np.float32)
    else:
        hidden_np = np.random.default_rng(args.seed).standard_normal((args.tokens, args.hidden_size), dtype=np.float32)
    if args.targets_file:
        targets_np = np.load(args.targets_file).astype(np.int64)
    else:
        targets_np = zipf_targets(args.vocabulary_size, hidden_np.shape[0], args.seed).astype(np.int64)

    memory = PeakRSS()
    layer = torch.nn.AdaptiveLogSoftmaxWithLoss(hidden_np.shape[1], args.vocabulary_size, cutoffs,
                                                div_value=args.div_value)
    hidden = torch.from_numpy(hidden_np).requires_grad_(True)
    targets = torch.from_numpy(targets_np)
    setup_kib = status_kib("VmRSS")

    def step():
        layer.zero_grad(set_to_none=True)
        hidden.grad = None
        loss = layer(hidden, targets).loss  # the mean negative log-likelihood
        loss.backward()  # gradients w.r.t. every weight and the hidden input
        return loss.item()

    warmup_s, times, step_peaks = [], [], []
    for i in range(args.warmup + args.repeats):
        memory.start()
        elapsed, loss = harness.timed(step)
        peak = memory.stop()
        if i < args.warmup:
            warmup_s.append(elapsed)
        else:
            times.append(elapsed)
            step_peaks.append(peak)

    return {
        "model": "torch adaptive",
        "library": f"torch {torch.__version__}",
        "threads": torch.get_num_threads(),
        "params": sum(p.numel() for p in layer.parameters()),
        "loss": loss,
        **harness.summary(times, warmup_s),
        "setup_rss_mib": setup_kib / 1024,
        "step_peak_mib": max(step_peaks) / 1024 if step_peaks else None,
        "process_peak_mib": memory.process_peak_kib / 1024,
        "memory_method": memory.method,
        "note": "AdaptiveLogSoftmaxWithLoss defaults: head_bias=False, tails without bias",
    }


if __name__ == "__main__":
    sys.exit(main())
