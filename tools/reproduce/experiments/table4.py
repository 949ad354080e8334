"""`zoo reproduce table4`: Dauphin et al. (2016), §5.1, Table 4, "throughput and responsiveness".

The paper's protocol (§5.1): throughput is tokens per second scoring a batch of 750 sequences of
20 tokens (15,000 tokens); responsiveness is tokens per second processing one sequence of 15,000
contiguous tokens. Here every token is scored as the papers score it: the log-probability of the
next token through the model's adaptive softmax (`model.target_log_probs`, the zoo's own scoring
call), at Google Billion Word's vocabulary (793,471 ids) with each preset's own cutoffs.

- LSTM: the preset `lstm-2048-512` (an LSTM of 2048 units projected to 512, embedding 512,
  adaptive softmax 10k/40k/200k). Table 4's "LSTM-2048" is the LSTM of 2048 units of Table 2; the
  zoo's closest preset is this one (Table 2's LSTM-2048-512 row, Jozefowicz et al.), whose
  projection makes each recurrent step cheaper than an unprojected LSTM-2048's.
  Responsiveness runs the Keras RNN over the whole sequence in one call: sequential inside (one
  `tf.while_loop` step per token), which is the fastest honest form, not a Python loop of calls.
- GCNN-9 (`gcnn-9`) and GCNN-8 Bottleneck (`gcnn-8b`): responsiveness is one forward pass over
  the whole sequence (its activations, 15,000 × 2 × 2,048 floats at the widest layer, fit in
  memory, so no chunking is needed).

Two ways of calling each model are timed side by side, their repeats interleaved:

- `plain`: `model.target_log_probs(inputs, targets)` as a user calls it (one compiled graph);
- `xla`: the model's forward pass (embedding and trunk) compiled by XLA
  (`tf.function(jit_compile=True)`), then the same adaptive-softmax scoring as `plain` in an
  ordinary graph. The scoring itself cannot go under XLA: it gathers the tokens of each tail
  cluster (shapes known only at run time), which XLA pads to the whole batch, far beyond
  memory for the largest cluster. The model's layers are the same; only the call differs.

Inputs are token ids drawn from a Zipf law over the vocabulary (`zoo.tools.benchmarks.common.zipf_targets`:
P(id r) ∝ 1/(r+1), ids sorted by frequency as the vocabularies are), so each adaptive-softmax
cluster gets a word-like share of the targets; the weights are random (speed does not depend on
them). One warm-up call (tracing, compiling) precedes the timed repeats; a figure is tokens over
the median of the repeats' wall-clock seconds. `profile/<preset>` units trace one plain
responsiveness pass of each GCNN with `tf.profiler` and break its op self-time down by component.
"""

import re
import statistics
import time

from zoo.tools.benchmarks import harness

NAME = "table4"
DESCRIPTION = ("throughput (750 sequences × 20 tokens) and responsiveness (one sequence of 15,000 tokens) "
               "of LSTM-2048, GCNN-9 and GCNN-8 Bottleneck at Google Billion Word's vocabulary, every "
               "target scored through the adaptive softmax")
PAPER = "Dauphin et al. 2016, §5.1, Table 4"

MODES = ("throughput", "responsiveness")
VARIANTS = ("plain", "xla")
VARIANT_LABELS = {"plain": "ours", "xla": "ours, XLA forward"}
DEFAULT_REPEATS = 5
QUICK_REPEATS = 2
SEED = 0
QUICK_VOCABULARY = 500

# Table 4 of the paper (tokens/s): throughput on a CPU and a GPU, responsiveness on a GPU.
MODELS = [
    {"preset": "lstm-2048-512", "label": "LSTM-2048", "short": "LSTM",
     "paper": {"throughput_cpu": 169, "throughput_gpu": 45_622, "responsiveness_gpu": 2_282},
     "quick": {"vocabulary_size": QUICK_VOCABULARY, "embedding_dim": 16, "cutoffs": [50, 200],
               "layers": [{"type": "lstm", "units": 32, "projection": 16}]}},
    {"preset": "gcnn-9", "label": "GCNN-9", "short": "GCNN-9",
     "paper": {"throughput_cpu": 121, "throughput_gpu": 29_116, "responsiveness_gpu": 29_116},
     "quick": {"vocabulary_size": QUICK_VOCABULARY, "embedding_dim": 16, "cutoffs": [50, 200],
               "blocks": [[[4, 16]], [[4, 16], [4, 16]]]}},
    {"preset": "gcnn-8b", "label": "GCNN-8 Bottleneck", "short": "GCNN-8B",
     "paper": {"throughput_cpu": 179, "throughput_gpu": 45_878, "responsiveness_gpu": 45_878},
     "quick": {"vocabulary_size": QUICK_VOCABULARY, "embedding_dim": 16, "cutoffs": [50, 200],
               "blocks": [[[1, 32]], [[1, 8], [5, 8], [1, 32]]]}},
]
BY_PRESET = {m["preset"]: m for m in MODELS}
PROFILED = ("lstm-2048-512", "gcnn-9", "gcnn-8b")


# ---- settings and units --------------------------------------------------------------------------
def settings(quick=False, repeats=None):
    """Everything that decides what a unit measures: a partial run with other settings is not reused."""
    return {
        "quick": bool(quick),
        "models": [m["preset"] for m in MODELS],
        "overrides": {m["preset"]: m["quick"] for m in MODELS} if quick else {},
        "throughput_batch": [8, 20] if quick else [750, 20],
        "responsiveness_tokens": 200 if quick else 15_000,
        "repeats": repeats or (QUICK_REPEATS if quick else DEFAULT_REPEATS),
        "variants": list(VARIANTS),
        "profile": list(PROFILED),
        "inputs": "Zipf ids (zoo.tools.benchmarks.common.zipf_targets), random weights",
        "seed": SEED,
    }


def units(settings):
    keys = []
    for mode in MODES:
        for preset in settings["models"]:
            for variant in settings["variants"]:
                keys.append(f"{mode}/{preset}/{variant}/first-call")
        for r in range(settings["repeats"]):
            for preset in settings["models"]:
                for variant in settings["variants"]:
                    keys.append(f"{mode}/{preset}/{variant}/{r}")
    keys += [f"profile/{preset}" for preset in settings["profile"]]
    return keys


# ---- measuring -----------------------------------------------------------------------------------
class Bench:
    """The models (loaded once) and their inputs and timed calls."""

    def __init__(self, settings, log):
        self.settings = settings
        self.log = log
        self.models = {}
        self.calls = {}

    def model(self, preset):
        if preset not in self.models:
            import keras

            import zoo

            keras.utils.set_random_seed(SEED)
            start = time.perf_counter()
            self.models[preset] = zoo.load(preset, weights="random", **self.settings["overrides"].get(preset, {}))
            self.log(f"  loaded {preset} ({self.models[preset].count_params():,} parameters) in "
                     f"{time.perf_counter() - start:.1f} s")
        return self.models[preset]

    def inputs(self, mode, vocabulary_size):
        from zoo.tools.benchmarks.common import zipf_targets

        if mode == "throughput":
            batch, length = self.settings["throughput_batch"]
        else:
            batch, length = 1, self.settings["responsiveness_tokens"]
        ids = zipf_targets(vocabulary_size, batch * (length + 1), seed=SEED + 1).reshape(batch, length + 1)
        return ids[:, :-1], ids[:, 1:]

    def call(self, mode, preset, variant):
        """A function of no arguments that scores the mode's inputs and returns the log-probabilities."""
        key = (mode, preset, variant)
        if key not in self.calls:
            import tensorflow as tf

            model = self.model(preset)
            inputs, targets = self.inputs(mode, model.vocabulary_size)
            if variant == "plain":
                self.calls[key] = lambda: model.target_log_probs(inputs, targets)
            else:
                _, forward_xla, score = self.parts(preset)

                def xla():
                    ids = tf.constant(model.check_ids(inputs))
                    return score(forward_xla(ids), tf.constant(model.check_ids(targets))).numpy()

                self.calls[key] = xla
        return self.calls[key]

    def parts(self, preset):
        """The model's forward pass (plain and XLA-compiled) and its scoring, as separate graphs."""
        if ("parts", preset) not in self.calls:
            import tensorflow as tf

            model = self.model(preset)
            self.calls[("parts", preset)] = (
                tf.function(lambda ids: model(ids, training=False)),
                tf.function(lambda ids: model(ids, training=False), jit_compile=True),
                tf.function(lambda hidden, t: model.head.target_log_prob(hidden, t)),
            )
        return self.calls[("parts", preset)]


def device():
    import tensorflow as tf

    return "GPU" if tf.config.list_physical_devices("GPU") else "CPU"


def _seconds(x):
    return f"{x:.2f} s" if x >= 0.1 else f"{x * 1e3:.1f} ms"


def timed(fn):
    """Runs `fn` once: its result, and wall-clock and process CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def _load_average():
    """The 1-minute load average, or None."""
    from zoo.tools.benchmarks.harness import load_average

    return (load_average() or [None])[0]


def run(settings, pending, save, log, done=None):
    """Measures the `pending` units, saving each as soon as it is done. Within a mode the repeats
    of every (model, variant) are interleaved, each round starting one model later than the last,
    so that a noisy spell of a shared machine falls on all of them alike."""
    import tensorflow as tf

    # Each (mode, model, variant) traces its own graph once, on purpose: TensorFlow's warning about
    # "excessive retracing" would be noise here.
    level = tf.get_logger().level
    tf.get_logger().setLevel("ERROR")
    try:
        _run(settings, set(pending), save, log)
    finally:
        tf.get_logger().setLevel(level)


def _run(settings, pending, save, log):
    import numpy as np

    bench = Bench(settings, log)
    pairs = [(p, v) for p in settings["models"] for v in settings["variants"]]
    for mode in MODES:
        if not any(key.startswith(mode + "/") for key in pending):
            continue
        log(f"{NAME}: {mode}")
        reference = {}
        # warm-up: tracing / compiling; the first call of each (model, variant) is kept as a unit
        for preset, variant in pairs:
            if not any(key.startswith(f"{mode}/{preset}/") for key in pending):
                continue
            out, seconds, cpu = timed(bench.call(mode, preset, variant))
            record = {"seconds": seconds, "cpu_seconds": cpu, "params": bench.model(preset).count_params(),
                      "device": device()}
            if variant == "plain":
                reference[preset] = out
            elif preset in reference:
                record["max_abs_diff_vs_plain"] = float(np.max(np.abs(out - reference[preset])))
            key = f"{mode}/{preset}/{variant}/first-call"
            log(f"  {preset:14s} {variant:5s} first call {seconds:8.2f} s")
            if key in pending:
                save(key, record)
                pending.discard(key)
        tokens = (settings["throughput_batch"][0] * settings["throughput_batch"][1] if mode == "throughput"
                  else settings["responsiveness_tokens"])
        for r in range(settings["repeats"]):
            for preset, variant in harness.rotated(pairs, 2 * r):  # each round starts two pairs later
                key = f"{mode}/{preset}/{variant}/{r}"
                if key not in pending:
                    continue
                _, seconds, cpu = timed(bench.call(mode, preset, variant))
                save(key, {"seconds": seconds, "cpu_seconds": cpu, "tokens": tokens,
                           "tokens_per_s": tokens / seconds, "load_average": _load_average(), "device": device()})
                pending.discard(key)
                log(f"  {preset:14s} {variant:5s} repeat {r + 1}/{settings['repeats']} {seconds:8.2f} s "
                    f"{tokens / seconds:10,.0f} tokens/s")
    for preset in settings["profile"]:
        key = f"profile/{preset}"
        if key in pending:
            log(f"{NAME}: profiling {preset}'s responsiveness pass")
            save(key, profile(bench, preset, log))
            pending.discard(key)


# ---- the profile ---------------------------------------------------------------------------------
def component(op_name):
    """Which part of a model an op of the profile belongs to, from its name scope."""
    block = re.search(r"(?:^|/)((?:block|lstm)_\d+)", op_name)
    if block:
        return block.group(1)
    if "embedding" in op_name:
        return "embedding"
    return "adaptive softmax"  # the head's ops run outside the model's name scope


def profile(bench, preset, log):
    """The responsiveness pass of `preset`, taken apart: the forward pass (plain and XLA) and the
    adaptive-softmax scoring timed alone (one call each, after a warm-up), then one traced plain
    call: op self-time by component, by op type, and the top ops (tf.profiler's framework_op_stats,
    read through `zoo.compat.framework_op_stats`; the ops of the LSTM's while loop are itemised too)."""
    import tempfile

    import tensorflow as tf

    from zoo.compat import framework_op_stats

    split = _split_times(bench, preset)
    log(f"  forward {_seconds(split['forward_s'])} (XLA {_seconds(split['forward_xla_s'])}) + adaptive-softmax "
        f"scoring {_seconds(split['scoring_s'])}; the whole call {_seconds(split['plain_call_s'])}")
    call = bench.call("responsiveness", preset, "plain")
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        _, seconds, cpu = timed(call)
        tf.profiler.experimental.stop()
        record = {"split": split, "seconds": seconds, "cpu_seconds": cpu}
        try:
            rows = framework_op_stats(logdir)
        except Exception as e:  # the profile is a note: its absence must not lose the measurements
            record["error"] = f"{type(e).__name__}: {e}"
            log(f"  profile unavailable: {record['error']}")
            return record
    record.update(op_shares([r for r in rows if r["type"] != "IDLE"]))
    top = record["top_ops"][0]
    log(f"  traced call {seconds:.2f} s; op self-time: adaptive softmax "
        f"{record['by_component'].get('adaptive softmax', {}).get('share', 0):.0%}; top op {top['op']} "
        f"({top['share']:.0%})")
    return record


def _split_times(bench, preset):
    """Seconds of the forward pass (plain and XLA), of the scoring and of the whole call, each
    timed once after a warm-up call."""
    import tensorflow as tf

    call = bench.call("responsiveness", preset, "plain")
    model = bench.model(preset)
    inputs, targets = (tf.constant(a) for a in bench.inputs("responsiveness", model.vocabulary_size))
    forward, forward_xla, score = bench.parts(preset)
    hidden = forward(inputs)
    split = {}
    for name, fn in (("forward_s", lambda: forward(inputs).numpy()), ("forward_xla_s", lambda: forward_xla(inputs).numpy()),
                     ("scoring_s", lambda: score(hidden, targets).numpy()), ("plain_call_s", call)):
        fn()  # warm
        split[name] = timed(fn)[1]
    return split


def op_shares(rows):
    """Op self-time (rows of `zoo.compat.framework_op_stats`) by component, by op type, and the
    top ops, in milliseconds and as shares of the total."""
    total = sum(r["total_self_time"] for r in rows) or 1.0
    by_component, by_type = {}, {}
    for r in rows:
        part = component(r["operation"])
        by_component[part] = by_component.get(part, 0.0) + r["total_self_time"]
        by_type[r["type"]] = by_type.get(r["type"], 0.0) + r["total_self_time"]

    def shares(d):
        return {k: {"ms": round(v / 1e3, 2), "share": round(v / total, 4)}
                for k, v in sorted(d.items(), key=lambda kv: -kv[1])}

    top = sorted(rows, key=lambda r: -r["total_self_time"])[:12]
    return {
        "op_self_time_ms": round(total / 1e3, 1),
        "by_component": shares(by_component),
        "by_op_type": shares(by_type),
        "top_ops": [{"op": r["operation"], "type": r["type"], "ms": round(r["total_self_time"] / 1e3, 2),
                     "share": round(r["total_self_time"] / total, 4)} for r in top],
    }


# ---- figures -------------------------------------------------------------------------------------
def measured(settings, units, mode, preset, variant):
    reps = [units[f"{mode}/{preset}/{variant}/{r}"] for r in range(settings["repeats"])]
    seconds = [u["seconds"] for u in reps]
    tokens = reps[0]["tokens"]
    return {"tokens_per_s": tokens / statistics.median(seconds), "median_s": statistics.median(seconds),
            "min_s": min(seconds), "max_s": max(seconds), "repeats": len(seconds), "tokens": tokens,
            "device": reps[0]["device"]}


def figures(settings, units):
    m = {(mode, p, v): measured(settings, units, mode, p, v)
         for mode in MODES for p in settings["models"] for v in settings["variants"]}
    batch, length = settings["throughput_batch"]
    n = settings["responsiveness_tokens"]
    out = []

    def figure(id, label, ours, paper=None, paper_hardware=None, unit="tokens/s", hardware=None, **extra):
        return {"id": id, "label": label, "unit": unit, "ours": ours, "ours_hardware": hardware,
                "paper": paper, "paper_hardware": paper_hardware, **extra}

    for spec in MODELS:
        p, label = spec["preset"], spec["label"]
        thr, resp = m[("throughput", p, "plain")], m[("responsiveness", p, "plain")]
        out.append(figure(f"throughput-cpu/{p}", f"{label} throughput ({batch}×{length} batch)", thr["tokens_per_s"],
                          spec["paper"]["throughput_cpu"], "CPU", hardware=thr["device"], measured=thr))
        out.append(figure(f"throughput-gpu/{p}", f"{label} throughput ({batch}×{length} batch)", thr["tokens_per_s"],
                          spec["paper"]["throughput_gpu"], "GPU", hardware=thr["device"], measured=thr))
        out.append(figure(f"responsiveness/{p}", f"{label} responsiveness (1 sequence of {n:,} tokens)",
                          resp["tokens_per_s"], spec["paper"]["responsiveness_gpu"], "GPU", hardware=resp["device"],
                          measured=resp))
    lstm = MODELS[0]
    for spec in MODELS[1:]:
        for mode, column, hw in (("throughput", "throughput_cpu", "CPU"), ("responsiveness", "responsiveness_gpu", "GPU")):
            ours = m[(mode, spec["preset"], "plain")]["tokens_per_s"] / m[(mode, lstm["preset"], "plain")]["tokens_per_s"]
            paper = spec["paper"][column] / lstm["paper"][column]
            out.append(figure(f"{mode}-ratio/{spec['preset']}", f"{spec['short']} / LSTM {mode}", ours, paper, hw,
                              unit="x", hardware=m[(mode, spec["preset"], "plain")]["device"]))
    for mode in MODES:
        for spec in MODELS:
            xla, plain = m[(mode, spec["preset"], "xla")], m[(mode, spec["preset"], "plain")]
            out.append(figure(f"{mode}-xla/{spec['preset']}", f"{spec['label']} {mode}, XLA forward",
                              xla["tokens_per_s"], hardware=xla["device"], measured=xla))
            out.append(figure(f"{mode}-xla-speedup/{spec['preset']}", f"{spec['short']} {mode}: XLA forward / plain",
                              xla["tokens_per_s"] / plain["tokens_per_s"], unit="x", hardware=xla["device"]))
    return out


def extras(settings, units):
    models = {}
    for spec in MODELS:
        first = units[f"responsiveness/{spec['preset']}/xla/first-call"]
        models[spec["preset"]] = {
            "paper_label": spec["label"], "params": first["params"],
            "first_call_s": {f"{mode}/{v}": round(units[f"{mode}/{spec['preset']}/{v}/first-call"]["seconds"], 2)
                             for mode in MODES for v in settings["variants"]},
            "xla_max_abs_diff_vs_plain": max(units[f"{mode}/{spec['preset']}/xla/first-call"].get(
                "max_abs_diff_vs_plain", 0.0) for mode in MODES),
        }
    return {
        "models": models,
        "profile": {p: units[f"profile/{p}"] for p in settings["profile"]},
        "notes": [
            "LSTM-2048 is the zoo's preset lstm-2048-512 (2048 units projected to 512, embedding 512; Table 2's "
            "LSTM-2048-512 row): the closest to Table 4's LSTM-2048, whose unprojected recurrence costs more per token.",
            "Ours are on this machine's CPU; the paper's GPU columns are a different device, so the hardware-free "
            "comparison is the GCNN / LSTM ratio.",
            "Inputs: token ids drawn from a Zipf law over the vocabulary, random weights; tokens/s = tokens / median "
            f"of {settings['repeats']} timed repeats after a warm-up, the models' repeats interleaved.",
            "XLA forward: embedding and trunk compiled with tf.function(jit_compile=True); the adaptive softmax "
            "scoring stays in an ordinary graph (its per-cluster gathers have run-time shapes).",
        ] + load_notes(settings, units) + profile_notes(settings, units),
    }


def load_notes(settings, units):
    """How much of the machine the timed calls had: a shared machine shows here."""
    timed_units = [u for k, u in units.items() if k.split("/")[-1].isdigit()]
    if not timed_units:
        return []
    share = statistics.median(u["cpu_seconds"] / u["seconds"] for u in timed_units)
    loads = [u["load_average"] for u in timed_units if u.get("load_average") is not None]
    note = f"The timed calls used a median {share:.2f} CPU-seconds per wall-clock second"
    if loads:
        note += f"; the 1-minute load average was {min(loads):.2f}–{max(loads):.2f} (this process included)"
    return [note + "."]


def profile_notes(settings, units):
    """One line on where a responsiveness pass spends its time, from the profile units."""
    parts, shares = [], []
    for preset in settings["profile"]:
        prof = units[f"profile/{preset}"]
        label = BY_PRESET[preset]["short"]
        split = prof.get("split")
        if split:
            parts.append(f"{label} forward {_seconds(split['forward_s'])} (XLA {_seconds(split['forward_xla_s'])}) "
                         f"+ scoring {_seconds(split['scoring_s'])}")
        if "by_component" in prof:
            top = prof["top_ops"][0]
            shares.append(f"{label}: adaptive softmax {prof['by_component'].get('adaptive softmax', {}).get('share', 0):.0%}, "
                          f"largest op {top['op']} ({top['type']}, {top['share']:.0%})")
    notes = []
    if parts:
        notes.append(f"Profile of one responsiveness pass ({settings['responsiveness_tokens']:,} tokens), parts timed "
                     "alone: " + "; ".join(parts) + ".")
    if shares:
        notes.append("tf.profiler op self-time of those passes: " + "; ".join(shares) + ".")
    return notes


# ---- the plot ------------------------------------------------------------------------------------
def _fmt(x):
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs = {f["id"]: f for f in result["figures"]}
    hw = figs[f"throughput-cpu/{MODELS[0]['preset']}"]["ours_hardware"]
    cores = result.get("machine", {}).get("cores")
    ours_label = f"ours ({hw}, {cores} cores)" if cores else f"ours ({hw})"
    series = {
        "throughput": [
            (ours_label, "#1f77b4", lambda s: figs[f"throughput-cpu/{s['preset']}"]["ours"]),
            ("ours, XLA forward", "#9ecae1", lambda s: figs[f"throughput-xla/{s['preset']}"]["ours"]),
            ("paper (CPU)", "#ff7f0e", lambda s: s["paper"]["throughput_cpu"]),
            ("paper (GPU)", "#d62728", lambda s: s["paper"]["throughput_gpu"]),
        ],
        "responsiveness": [
            (ours_label, "#1f77b4", lambda s: figs[f"responsiveness/{s['preset']}"]["ours"]),
            ("ours, XLA forward", "#9ecae1", lambda s: figs[f"responsiveness-xla/{s['preset']}"]["ours"]),
            ("paper (GPU)", "#d62728", lambda s: s["paper"]["responsiveness_gpu"]),
        ],
    }
    settings = result["settings"]
    batch, length = settings["throughput_batch"]
    titles = {"throughput": f"Throughput: batches of {batch} × {length} tokens",
              "responsiveness": f"Responsiveness: one sequence of {settings['responsiveness_tokens']:,} tokens"}
    fig, axes = plt.subplots(1, 2, figsize=(14, 6.4), sharey=True)
    values = [value(s) for groups in series.values() for _, _, value in groups for s in MODELS]
    floor = min(values) / 2
    for ax, mode in zip(axes, MODES):
        groups = series[mode]
        width = 0.8 / len(groups)
        for j, (label, color, value) in enumerate(groups):
            xs = [i + (j - (len(groups) - 1) / 2) * width for i in range(len(MODELS))]
            ys = [value(s) for s in MODELS]
            ax.bar(xs, ys, width, label=label, color=color, edgecolor="black", linewidth=0.5)
            for x, y in zip(xs, ys):
                ax.text(x, y * 1.08, _fmt(y), ha="center", va="bottom", fontsize=8, rotation=90)
        ax.set_yscale("log")
        ax.set_ylim(floor, max(values) * 40)  # room above the bars for their labels, the legend and the box
        ax.set_xticks(range(len(MODELS)))
        ax.set_xticklabels([f"{s['label']}\n(preset {s['preset']})" for s in MODELS])
        ax.set_title(titles[mode], fontsize=11)
        ax.grid(axis="y", which="major", alpha=0.3)
        ax.legend(loc="upper left", fontsize=8, ncol=2)
        # the hardware-free comparison: each GCNN against the LSTM, ours and the paper's
        column = "CPU" if mode == "throughput" else "GPU"
        lines = [f"GCNN / LSTM, ours vs paper ({column}):"]
        for s in MODELS[1:]:
            r = figs[f"{mode}-ratio/{s['preset']}"]
            lines.append(f"{s['short']}: {r['ours']:.2f}× vs {r['paper']:.2f}×")
        # and ours against the paper's same-model figure
        lines.append(f"ours / paper ({column}):")
        first = "throughput-cpu" if mode == "throughput" else "responsiveness"
        same = [figs[f"{first}/{s['preset']}"] for s in MODELS]
        lines.append(",  ".join(f"{s['short']} {f['ours'] / f['paper']:.2g}×" for s, f in zip(MODELS, same)))
        ax.text(0.99, 0.985, "\n".join(lines), transform=ax.transAxes, ha="right", va="top", fontsize=8.5,
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.9, "edgecolor": "0.7"})
    quick = " — QUICK SMOKE TEST (tiny models): not comparable with the paper" if result.get("quick") else ""
    m = result.get("machine", {})
    fig.suptitle(f"{result['paper']}: ours vs the paper{quick}\n"
                 f"{m.get('cpu_model', '')}, {m.get('cores', '?')} cores, TensorFlow {m.get('tensorflow', '?')}; "
                 f"median of {settings['repeats']} repeats; `{result['command']}`", fontsize=10)
    axes[0].set_ylabel("tokens / second (log scale)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
