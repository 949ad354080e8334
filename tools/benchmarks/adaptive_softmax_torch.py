"""The torch side of `zoo benchmark adaptive-softmax`: one forward + backward step of
`torch.nn.AdaptiveLogSoftmaxWithLoss(...)(hidden, targets).loss`, timed, with its peak memory.

Standalone, as harness.py says: `TORCH_PYTHON adaptive_softmax_torch.py --worker SPEC`, SPEC the
JSON the TF child takes, answers `{"torch": its results}` (the harness's one-shot child).
"""

import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def measure(spec):
    """The step run `warmup` times, then timed `repeats["torch"]` times, each with its peak RSS growth."""
    torch.set_num_threads(spec["threads"])
    torch.manual_seed(spec["seed"])
    hidden = torch.from_numpy(np.load(spec["hidden_file"]).astype(np.float32)).requires_grad_(True)
    targets = torch.from_numpy(np.load(spec["targets_file"]).astype(np.int64))
    memory = harness.PeakRSS()
    layer = torch.nn.AdaptiveLogSoftmaxWithLoss(hidden.shape[1], spec["vocabulary_size"], spec["cutoffs"],
                                                div_value=float(spec["factor"]))
    setup_kib = harness.status_kib("VmRSS")

    def step():
        layer.zero_grad(set_to_none=True)
        hidden.grad = None
        loss = layer(hidden, targets).loss  # the mean negative log-likelihood
        loss.backward()  # gradients w.r.t. every weight and the hidden input
        return loss.item()

    steps, warmup = [], spec["warmup"]
    for _ in range(warmup + spec["repeats"]["torch"]):
        memory.start()
        steps.append((*harness.timed(step), memory.stop()))  # (seconds, loss, peak RSS growth in KiB)
    return {"torch": {
        "model": "torch adaptive", "library": f"torch {torch.__version__}", "threads": torch.get_num_threads(),
        "params": sum(p.numel() for p in layer.parameters()), "loss": steps[-1][1],
        **harness.summary([s for s, _, _ in steps[warmup:]], [s for s, _, _ in steps[:warmup]]),
        "setup_rss_mib": setup_kib / 1024,
        "step_peak_mib": max(peak for _, _, peak in steps[warmup:]) / 1024 if steps[warmup:] else None,
        "process_peak_mib": memory.process_peak_kib / 1024, "memory_method": memory.method,
        "note": "AdaptiveLogSoftmaxWithLoss defaults: head_bias=False, tails without bias"}}


if __name__ == "__main__":
    harness.answer(measure, json.loads(sys.argv[2]))
