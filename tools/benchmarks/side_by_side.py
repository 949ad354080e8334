"""Train several models on the same batches, their steps interleaved, for fair comparisons."""

import statistics

from zoo.tools.benchmarks import harness


def train_side_by_side(models, batches, steps, report_every=100, track=()):
    """One `train_on_batch` per model per batch, in turn (`harness.rotated`), so machine noise hits all
    alike.

    Returns `{name: {"median_step_s": …, "metrics": {metric: mean over the last 100 steps}}}`;
    `track` names the logged metrics to average (e.g. an MoE layer's `cv_load`).
    """
    times = {name: [] for name in models}
    recent = {name: [] for name in models}
    for step, (x, y, w) in enumerate(batches.take(steps)):
        for name in harness.rotated(models, step):  # the harness's order: a, b, then b, a, …
            seconds, logs = harness.timed(models[name].train_on_batch, x, y, sample_weight=w, return_dict=True)
            times[name].append(seconds)
            # train_on_batch resets metrics each call, so logs are this batch's own values
            recent[name] = (recent[name] + [logs])[-100:]
        if report_every and (step + 1) % report_every == 0:
            print(f"  step {step + 1}/{steps}", flush=True)
    out = {}
    for name in models:
        steady = times[name][5:] or times[name]
        metrics = {}
        for key in recent[name][0] if recent[name] else []:
            if any(t in key for t in track):
                metrics[key] = statistics.mean(float(l[key]) for l in recent[name])
        out[name] = {"median_step_s": statistics.median(steady), "metrics": metrics}
    return out
