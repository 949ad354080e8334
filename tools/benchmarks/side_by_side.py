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


def on_ptb(variants, seed, batch_size, seq_len, steps, track=()):
    """The Penn Treebank run `zoo benchmark ptb-softmax` and `moe-ptb` share: every variant
    (`{label: (preset, overrides)}`) made from `seed` and compiled, trained side by side on the same
    shuffled batches of the training split, then scored on the validation split (stream).
    Returns `{label: {"params", "median_step_s", "metrics", "valid_perplexity_stream"}}`."""
    import keras

    import zoo
    from zoo.data import pipeline, ptb_tokenizer, read_lines

    models = {}
    for label, (preset, overrides) in variants.items():
        keras.utils.set_random_seed(seed)
        models[label] = zoo.load(preset, **overrides)
        models[label].compile()
    batches = pipeline.stream_dataset(read_lines("ptb", "train"), ptb_tokenizer(), batch_size, seq_len, shuffle=True,
                                      seed=seed, repeat=True)
    trained = train_side_by_side(models, batches, steps, track=track)
    valid = read_lines("ptb", "valid")
    return {label: {"params": model.count_params(), **trained[label],
                    "valid_perplexity_stream": model.perplexity(valid, mode="stream")} for label, model in models.items()}
