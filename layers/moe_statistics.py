"""What a mixture of experts does with its tokens, measured: the balance statistics of Table 6
(Shazeer et al. 2017) per batch and over windows of batches, set beside the floor that sampling
alone gives, and the router's entropy.

Definitions (what `summarize` reports):

- **tokens per expert per step**: the (token, expert) assignments an expert receives in one
  training batch (`counts` of the `Routing`); with n tokens a batch and k experts a token, their
  mean is n·k/E. **Over the run**: those counts summed over every batch measured.
- **CV(Importance)**, **CV(Load)**: the coefficients of variation (population, not squared) of
  Importance (equation 6) and of the smooth Load estimator (equation 10, the hard count when the
  gate is not noisy), as in Table 6; **CV(counts)** and **max/mean load** on the hard counts.
- **window**: the same statistics on the sums over W consecutive batches, i.e. at W·n tokens a
  batch: the paper's batches held about 300,000 words, so per-batch figures at 2,048 tokens are
  not comparable with Table 6's, whatever the router does.
- **floor**: the statistics of perfectly uniform routing (every token sends its k assignments to
  k distinct experts drawn uniformly) at the same tokens a batch: what sampling alone gives.
  Each expert's count is then Binomial(n, k/E), so CV ≈ sqrt((1 − k/E) / (n·k/E)).
- **router entropy**: the entropy (nats) of the full gate distribution before top-k and without
  noise (`NoisyTopKRouter.gate_distribution`: Softmax(x·W_g) over all E experts), averaged over
  tokens, and as a fraction of ln E (1: the router cannot tell experts apart; 0: one expert per
  token). **Marginal entropy**: the entropy of that distribution averaged over the batch's
  tokens, as a fraction of ln E (1: every expert equally wanted overall).
"""

import math
from typing import NamedTuple

import numpy as np


class RoutingRecord(NamedTuple):
    """One call of a `SparseMoE` layer, in numpy (`SparseMoE.routing_recorded`).

    Fields:
        counts: [E], assignments each expert received.
        importance: [E], equation 6 (13).
        load: [E], equation 10 (14), or the counts without noise.
        entropy: the mean over tokens of the entropy (nats) of the full gate distribution.
        marginal: [E], the gate distribution averaged over the call's tokens.
    """

    counts: np.ndarray
    importance: np.ndarray
    load: np.ndarray
    entropy: float
    marginal: np.ndarray


def record(routing, distribution) -> RoutingRecord:
    """The `RoutingRecord` of one call: its `Routing` and its gate distribution [n, E]."""
    p = np.asarray(distribution, np.float64)
    entropy = -np.sum(p * np.log(np.clip(p, 1e-30, None)), axis=1)
    return RoutingRecord(np.asarray(routing["counts"], np.float64), np.asarray(routing["importance"], np.float64),
                         np.asarray(routing["load"], np.float64), float(entropy.mean()) if len(p) else 0.0,
                         p.mean(axis=0) if len(p) else np.zeros(p.shape[1]))


def cv(values, axis=-1) -> np.ndarray:
    """The coefficient of variation (population standard deviation / mean) along `axis`."""
    values = np.asarray(values, np.float64)
    mean = values.mean(axis=axis)
    return np.sqrt(values.var(axis=axis)) / np.where(mean > 0, mean, np.inf)


def max_over_mean(counts, axis=-1) -> np.ndarray:
    counts = np.asarray(counts, np.float64)
    mean = counts.mean(axis=axis)
    return counts.max(axis=axis) / np.where(mean > 0, mean, np.inf)


def uniform_floor(tokens: int, k: int, num_experts: int, trials: int = 200, seed: int = 0) -> dict:
    """CV(counts) and max/mean load of perfectly uniform routing of `tokens` tokens, each to k
    distinct experts of `num_experts`, averaged over `trials` draws (and the binomial formula)."""
    rng = np.random.default_rng(seed)
    counts = rng.binomial(tokens, k / num_experts, size=(trials, num_experts))  # each expert: Bin(n, k/E)
    return {"tokens": tokens, "cv_counts": float(cv(counts).mean()), "max_load_ratio": float(max_over_mean(counts).mean()),
            "cv_formula": math.sqrt((1 - k / num_experts) / (tokens * k / num_experts))}


def _balance(counts, importance, load) -> dict:
    return {"cv_importance": float(cv(importance).mean()), "cv_load": float(cv(load).mean()),
            "cv_counts": float(cv(counts).mean()), "max_load_ratio": float(max_over_mean(counts).mean())}


def summarize(records, k: int, window: int = 1) -> dict:
    """The statistics of the module docstring over `records` (one per batch, in order), per
    batch and over consecutive windows of `window` batches (the last incomplete one dropped),
    each beside the uniform floor at the same tokens a batch. `k`: assignments per token."""
    if not records:
        raise ValueError("No routing was recorded: run the model on at least one batch inside routing_recorded().")
    counts = np.stack([r.counts for r in records])
    importance = np.stack([r.importance for r in records])
    load = np.stack([r.load for r in records])
    experts = counts.shape[1]
    tokens = int(round(counts[0].sum() / k))
    out = {
        "batches": len(records), "tokens_per_batch": tokens, "num_experts": experts, "k": k,
        "tokens_per_expert_per_step": {"mean": float(counts.mean()), "min": float(counts.min()),
                                       "max": float(counts.max())},
        "per_batch": {**_balance(counts, importance, load), "floor": uniform_floor(tokens, k, experts)},
        "over_the_run": {"assignments": counts.sum(0).astype(int).tolist(),
                         "cv_counts": float(cv(counts.sum(0))),
                         "busiest_share": float(counts.sum(0).max() / counts.sum()),
                         "experts_never_used": int((counts.sum(0) == 0).sum())},
        "router_entropy": float(np.mean([r.entropy for r in records])),
        "router_entropy_fraction": float(np.mean([r.entropy for r in records]) / math.log(experts)),
    }
    marginal = np.mean([r.marginal for r in records], axis=0)
    out["marginal_entropy_fraction"] = float(-np.sum(marginal * np.log(np.clip(marginal, 1e-30, None)))
                                             / math.log(experts))
    if window > 1:
        whole = len(records) // window * window
        if whole:
            def windows(a):
                return a[:whole].reshape(-1, window, experts).sum(1)
            out["per_window"] = {"batches": window, **_balance(windows(counts), windows(importance), windows(load)),
                                 "floor": uniform_floor(tokens * window, k, experts)}
    return out
