"""`zoo reproduce table4-body`: Table 4's responsiveness read as the paper reads it (Dauphin et al.
2016, §5.1): how fast each model *processes* one sequence of 15,000 contiguous tokens, without
the output layer's scoring, beside the figure with scoring that `table4` measures.

The three models and inputs are `table4`'s (LSTM-2048 as `lstm-2048-512`, GCNN-9, GCNN-8
Bottleneck, at Google Billion Word's vocabulary; Zipf-drawn ids, random weights). Five calls of
each are timed side by side, their repeats interleaved:

- `scoring`: `model.target_log_probs(inputs, targets)`, every target scored through the adaptive
  softmax (table4's `plain` call; the scoring costs both kinds of model the same per token);
- `body`: the model body alone, `model(ids)` in one graph: embedding and trunk over the whole
  sequence, the hidden states out, no output layer (what "processing the sequence" means in §5.1);
- `body-xla`: the same body compiled by XLA;
- `body-bf16`: the same body computing in bfloat16 (Keras' `mixed_bfloat16` policy: the same
  float32 weights, each layer's arithmetic in bfloat16), which CPUs with bfloat16 matrix units
  run faster in matrix products but not in matrix-vector ones (each model's copy holds its own
  float32 weights: the experiment needs about twice the models' memory);
- `prompt`: the prompt pass of generation (`zoo.models.generation.prefill`, the call `generate`
  and the served `generate` signature make before the first new token): the GCNN's convolutions
  over every position at once, the LSTM's recurrence over the prompt; the user-facing figure.

Each model body's multiply-adds per token equal its trunk parameters (every conv or recurrent
weight is used once per token), so `2 × trunk parameters × tokens/s` is the arithmetic rate the
call reached, reported beside it: the GCNN's advantage is that its trunk is one large matrix
product per layer over all positions, where the LSTM's recurrence is a matrix-vector product per
token.
"""

import statistics

from zoo.tools.benchmarks import harness
from zoo.tools.reproduce.experiments import table4

NAME = "table4-body"
DESCRIPTION = ("responsiveness (one sequence of 15,000 tokens) of LSTM-2048, GCNN-9 and GCNN-8 Bottleneck: the "
               "model body alone, XLA-compiled, in bfloat16, the generation prompt pass, and with adaptive-softmax "
               "scoring")
PAPER = "Dauphin et al. 2016, §5.1, Table 4 (responsiveness)"

CALLS = ("scoring", "body", "body-xla", "body-bf16", "prompt")
CALL_LABELS = {"scoring": "with scoring (table4)", "body": "body", "body-xla": "body, XLA", "body-bf16": "body, bfloat16",
               "prompt": "prompt pass"}
BODY_CALLS = ("body", "body-xla", "body-bf16")  # the sequence processed, no output layer
# Table 4's LSTM-2048 itself: table4's LSTM preset with its recurrence unprojected (2,048 units, the
# hidden state 2,048 wide); its body alone is timed (scoring a 2,048-wide state would only add the
# output layer's cost, the same for every model).
UNPROJECTED = "lstm-2048"
UNPROJECTED_SPEC = {"preset": "lstm-2048-512", "label": "LSTM-2048 (unprojected)", "short": "LSTM-2048",
                    "overrides": {"layers": [{"type": "lstm", "units": 2048}]},
                    "quick": {"layers": [{"type": "lstm", "units": 32}]},
                    "paper": {"responsiveness_gpu": 2_282}}
GOAL = 10.0  # GCNN-8B body over the LSTM's, the issue's goal on this CPU
PAPER_RATIO = {"gcnn-9": 29_116 / 2_282, "gcnn-8b": 45_878 / 2_282}


def settings(quick=False, repeats=None):
    base = table4.settings(quick=quick, repeats=repeats)
    out = {key: base[key] for key in ("quick", "models", "overrides", "responsiveness_tokens", "repeats", "inputs",
                                      "seed")} | {"calls": list(CALLS)}
    out["models"] = out["models"] + [UNPROJECTED]
    if quick:  # the quick LSTM, unprojected
        unprojected = dict(base["overrides"]["lstm-2048-512"], **UNPROJECTED_SPEC["quick"])
    else:
        unprojected = UNPROJECTED_SPEC["overrides"]
    out["overrides"] = dict(out["overrides"], **{UNPROJECTED: unprojected})
    out["calls_of"] = {UNPROJECTED: ["body"]}
    return out


def calls_of(settings, model):
    return settings.get("calls_of", {}).get(model, settings["calls"])


def pairs_of(settings):
    return [(p, c) for p in settings["models"] for c in calls_of(settings, p)]


def units(settings):
    keys = [f"{p}/{c}/first-call" for p, c in pairs_of(settings)]
    keys += [f"{p}/{c}/{r}" for r in range(settings["repeats"]) for p, c in pairs_of(settings)]
    return keys


def spec_of(model):
    """A model's labels: table4's, but the projected LSTM named as the preset it is (the paper's
    LSTM-2048 is the unprojected one here)."""
    if model == UNPROJECTED:
        return UNPROJECTED_SPEC
    spec = table4.BY_PRESET[model]
    if model == "lstm-2048-512":
        return dict(spec, label="LSTM-2048-512", short="LSTM-2048-512")
    return spec


class Calls(table4.Bench):
    def model(self, preset):
        if preset == UNPROJECTED and preset not in self.models:
            import keras

            import zoo

            keras.utils.set_random_seed(table4.SEED)
            self.models[preset] = zoo.load(UNPROJECTED_SPEC["preset"], weights="random",
                                           **self.settings["overrides"][UNPROJECTED])
            self.log(f"  loaded {preset} ({self.models[preset].count_params():,} parameters)")
        return super().model(preset)

    def bf16_model(self, preset):
        """The model again, built under `mixed_bfloat16`, holding the float32 model's weights."""
        if ("bf16", preset) not in self.models:
            import zoo
            from zoo.training.precision import dtype_policy

            with dtype_policy("mixed_bfloat16"):
                model = zoo.load(preset, weights="random", **self.settings["overrides"].get(preset, {}))
            model.set_weights(self.model(preset).get_weights())
            self.models[("bf16", preset)] = model
        return self.models[("bf16", preset)]

    def body_call(self, preset, call):
        key = ("body", preset, call)
        if key not in self.calls:
            import tensorflow as tf

            from zoo.models.generation import prefill

            model = self.model(preset)
            inputs, targets = self.inputs("responsiveness", model.vocabulary_size)
            ids = tf.constant(model.check_ids(inputs))
            if call == "scoring":
                self.calls[key] = self.call("responsiveness", preset, "plain")
            elif call in ("body", "body-xla"):
                forward = self.parts(preset)[0 if call == "body" else 1]
                self.calls[key] = lambda: forward(ids).numpy()
            elif call == "body-bf16":
                bf16 = self.bf16_model(preset)
                forward = tf.function(lambda ids: tf.cast(bf16(ids, training=False), tf.float32))
                self.calls[key] = lambda: forward(ids).numpy()
            else:
                lengths = tf.constant([ids.shape[1]], tf.int32)
                prompt = tf.function(lambda ids, lengths: prefill(model, ids, lengths)[0])
                self.calls[key] = lambda: prompt(ids, lengths).numpy()
        return self.calls[key]

    def trunk_params(self, preset):
        model = self.model(preset)
        outside = model.embedding.count_params() + model.head.count_params()
        return model.count_params() - outside


def run(settings, pending, save, log, done=None):
    import numpy as np
    import tensorflow as tf

    level = tf.get_logger().level
    tf.get_logger().setLevel("ERROR")
    pending = set(pending)
    try:
        bench = Calls(settings, log)
        pairs = pairs_of(settings)
        body = {}
        for preset, call in pairs:
            key = f"{preset}/{call}/first-call"
            out, seconds, cpu = table4.timed(bench.body_call(preset, call))
            record = {"seconds": seconds, "cpu_seconds": cpu, "params": bench.model(preset).count_params(),
                      "trunk_params": bench.trunk_params(preset), "device": table4.device()}
            if call == "body":
                body[preset] = out
            elif call in ("body-xla", "prompt") and preset in body:
                # the prompt pass's hidden state is the body's at the last position
                reference = body[preset] if call == "body-xla" else body[preset][:, -1]
                record["max_abs_diff_vs_body"] = float(np.max(np.abs(out - reference)))
            elif call == "body-bf16" and preset in body:
                # bfloat16 keeps 8 bits of mantissa: the difference relative to the body's largest value
                record["max_rel_diff_vs_body"] = float(np.max(np.abs(out - body[preset])) / np.max(np.abs(body[preset])))
            log(f"  {preset:14s} {call:8s} first call {seconds:8.2f} s")
            if key in pending:
                save(key, record)
                pending.discard(key)
        tokens = settings["responsiveness_tokens"]
        for r in range(settings["repeats"]):
            for preset, call in harness.rotated(pairs, len(settings["calls"]) * r):  # each round one model later
                key = f"{preset}/{call}/{r}"
                if key not in pending:
                    continue
                _, seconds, cpu = table4.timed(bench.body_call(preset, call))
                save(key, {"seconds": seconds, "cpu_seconds": cpu, "tokens": tokens, "tokens_per_s": tokens / seconds,
                           "load_average": table4._load_average(), "device": table4.device()})
                pending.discard(key)
                log(f"  {preset:14s} {call:8s} repeat {r + 1}/{settings['repeats']} {seconds:8.2f} s "
                    f"{tokens / seconds:10,.0f} tokens/s")
    finally:
        tf.get_logger().setLevel(level)


def measured(settings, units, preset, call):
    seconds = [units[f"{preset}/{call}/{r}"]["seconds"] for r in range(settings["repeats"])]
    median = statistics.median(seconds)
    trunk = units[f"{preset}/{call}/first-call"]["trunk_params"]
    rate = settings["responsiveness_tokens"] / median
    return {"tokens_per_s": rate, "median_s": median, "min_s": min(seconds), "max_s": max(seconds),
            "repeats": len(seconds), "gflops": 2 * trunk * rate / 1e9}


def figures(settings, units):
    out = []
    lstm = settings["models"][0]
    m = {(p, c): measured(settings, units, p, c) for p, c in pairs_of(settings)}
    hardware = units[f"{lstm}/body/0"]["device"]
    for p in settings["models"]:
        spec = spec_of(p)
        for call in calls_of(settings, p):
            f = m[(p, call)]
            # the paper's responsiveness beside the bodies of its own models (its LSTM is the unprojected one)
            paper = spec["paper"]["responsiveness_gpu"] if call == "body" and p != lstm else None
            out.append({"id": f"{call}/{p}", "label": f"{spec['label']} responsiveness, {CALL_LABELS[call]}",
                        "unit": "tokens/s", "ours": f["tokens_per_s"], "ours_hardware": units[f"{p}/{call}/0"]["device"],
                        "paper": paper, "paper_hardware": "GPU" if paper else None, "measured": f})
        if p in (lstm, UNPROJECTED):
            continue
        if UNPROJECTED in settings["models"]:
            ratio = m[(p, "body")]["tokens_per_s"] / m[(UNPROJECTED, "body")]["tokens_per_s"]
            out.append({"id": f"ratio-body-unprojected/{p}", "label": f"{spec['short']} / LSTM-2048 (unprojected, "
                        "Table 4's LSTM) responsiveness, body", "unit": "x", "ours": ratio, "ours_hardware": hardware,
                        "paper": PAPER_RATIO[p], "paper_hardware": "GPU", "goal": GOAL if p == "gcnn-8b" else None})
        for call in settings["calls"]:
            ratio = m[(p, call)]["tokens_per_s"] / m[(lstm, call)]["tokens_per_s"]
            out.append({"id": f"ratio-{call}/{p}", "label": f"{spec['short']} / LSTM-2048-512 responsiveness, "
                        f"{CALL_LABELS[call]}", "unit": "x", "ours": ratio, "ours_hardware": hardware, "paper": None,
                        "paper_hardware": None, "goal": GOAL if (p == "gcnn-8b" and call == "body") else None})
        # each model's body at its fastest (plain, XLA or bfloat16), the LSTM's too
        mine, theirs = fastest_body(settings, m, p), fastest_body(settings, m, lstm)
        if mine and theirs:
            out.append({"id": f"ratio-body-fastest/{p}", "label": f"{spec['short']} / LSTM-2048-512 responsiveness, "
                        f"each body at its fastest ({CALL_LABELS[mine]} / {CALL_LABELS[theirs]})", "unit": "x",
                        "ours": m[(p, mine)]["tokens_per_s"] / m[(lstm, theirs)]["tokens_per_s"],
                        "ours_hardware": hardware, "paper": None, "paper_hardware": None,
                        "goal": GOAL if p == "gcnn-8b" else None, "calls": [mine, theirs]})
    return out


def fastest_body(settings, m, preset):
    """The body call (plain, XLA or bfloat16) at which `preset` processed the most tokens/s."""
    calls = [c for c in BODY_CALLS if c in calls_of(settings, preset)]
    return max(calls, key=lambda c: m[(preset, c)]["tokens_per_s"]) if calls else None


def extras(settings, units):
    lstm = settings["models"][0]
    m = {(p, c): measured(settings, units, p, c) for p, c in pairs_of(settings)}
    trunk = {p: units[f"{p}/body/first-call"]["trunk_params"] for p in settings["models"]}
    checks = {f"{p}/{c}": units[f"{p}/{c}/first-call"]["max_abs_diff_vs_body"]
              for p, c in pairs_of(settings) if "max_abs_diff_vs_body" in units[f"{p}/{c}/first-call"]}
    bf16_checks = {p: units[f"{p}/body-bf16/first-call"]["max_rel_diff_vs_body"] for p in settings["models"]
                   if "max_rel_diff_vs_body" in units.get(f"{p}/body-bf16/first-call", {})}
    rates = "; ".join(f"{spec_of(p)['short']} {m[(p, 'body')]['gflops']:.0f} GFLOP/s"
                      + (f" (bfloat16 {m[(p, 'body-bf16')]['gflops']:.0f})" if (p, "body-bf16") in m else "")
                      + f" ({trunk[p] / 1e6:.1f}M multiply-adds per token)" for p in settings["models"])
    gcnns = [p for p in settings["models"] if p.startswith("gcnn")]
    best = max(gcnns, key=lambda p: m[(p, "body")]["tokens_per_s"])
    share = statistics.median(u["cpu_seconds"] / u["seconds"] for k, u in units.items() if k.split("/")[-1].isdigit())
    notes = [
        f"Body: embedding and trunk over the {settings['responsiveness_tokens']:,} tokens in one graph, no output layer; scoring: table4's call "
        "(target log-probabilities through the adaptive softmax); prompt: `zoo.models.generation.prefill`, the pass "
        "`generate` makes over a prompt before the first new token.",
        f"Arithmetic rate of the body (2 × trunk parameters × tokens/s): {rates}. The LSTM's recurrence is one "
        "matrix-vector product per token, bound by reading its weights from memory each step; the GCNN's layers are "
        "matrix products over all positions at once.",
        f"Tokens/s = {settings['responsiveness_tokens']:,} / median of {settings['repeats']} repeats after a warm-up call, the calls of the three "
        f"models interleaved; the timed calls used a median {share:.2f} CPU-seconds per wall-clock second.",
        f"Checks: the XLA body and the prompt pass agree with the plain body (max abs difference "
        f"{max(checks.values()) if checks else float('nan'):.2g}).",
        f"GCNN-8B body over the projected LSTM-2048-512's: "
        f"{m[('gcnn-8b', 'body')]['tokens_per_s'] / m[(lstm, 'body')]['tokens_per_s']:.1f}× (goal {GOAL:g}×); "
        f"fastest GCNN body: {table4.BY_PRESET[best]['short']}.",
    ]
    if bf16_checks:
        mine, theirs = fastest_body(settings, m, "gcnn-8b"), fastest_body(settings, m, lstm)
        notes.append(
            "bfloat16 body: the same float32 weights, each layer computing in bfloat16 (Keras' mixed_bfloat16); its "
            "largest difference from the float32 body, relative to the body's largest value: "
            + ", ".join(f"{spec_of(p)['short']} {v:.2g}" for p, v in bf16_checks.items())
            + f". GCNN-8B over LSTM-2048-512 in bfloat16: "
            f"{m[('gcnn-8b', 'body-bf16')]['tokens_per_s'] / m[(lstm, 'body-bf16')]['tokens_per_s']:.1f}×; each body "
            f"at its fastest (GCNN-8B {CALL_LABELS[mine]}, LSTM {CALL_LABELS[theirs]}): "
            f"{m[('gcnn-8b', mine)]['tokens_per_s'] / m[(lstm, theirs)]['tokens_per_s']:.1f}× (goal {GOAL:g}×).")
    if UNPROJECTED in settings["models"]:
        notes.append(f"Against Table 4's own LSTM-2048 (unprojected, body only; the paper's 20.1× is against it, on a GPU): GCNN-8B "
                     f"{m[('gcnn-8b', 'body')]['tokens_per_s'] / m[(UNPROJECTED, 'body')]['tokens_per_s']:.1f}×, GCNN-9 "
                     f"{m[('gcnn-9', 'body')]['tokens_per_s'] / m[(UNPROJECTED, 'body')]['tokens_per_s']:.1f}×.")
    return {"trunk_params": trunk, "checks": checks, "bf16_checks": bf16_checks, "notes": notes}


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = result["settings"]
    figs = {f["id"]: f for f in result["figures"]}
    models = [s for s in table4.MODELS if s["preset"] in settings["models"]]  # the unprojected LSTM: in the box
    calls = settings["calls"]
    colours = {"scoring": "#9ecae1", "body": "#1f77b4", "body-xla": "#08519c", "body-bf16": "#6a51a3", "prompt": "#2ca02c"}
    fig, ax = plt.subplots(figsize=(11, 7.4))
    width = 0.8 / (len(calls) + 1)
    for j, call in enumerate(calls):
        xs = [i + (j - len(calls) / 2) * width for i in range(len(models))]
        ys = [figs[f"{call}/{s['preset']}"]["ours"] for s in models]
        ax.bar(xs, ys, width, label=f"ours, {CALL_LABELS[call]}", color=colours.get(call), edgecolor="black", linewidth=0.5)
        for x, y in zip(xs, ys):
            ax.text(x, y * 1.08, table4._fmt(y), ha="center", va="bottom", fontsize=8, rotation=90)
    xs = [i + (len(calls) / 2) * width for i in range(len(models))]
    ys = [s["paper"]["responsiveness_gpu"] for s in models]
    ax.bar(xs, ys, width, label="paper (GPU; its LSTM-2048 unprojected)", color="#d62728", edgecolor="black", linewidth=0.5)
    for x, y in zip(xs, ys):
        ax.text(x, y * 1.08, table4._fmt(y), ha="center", va="bottom", fontsize=8, rotation=90)
    ax.set_yscale("log")
    values = [f["ours"] for f in result["figures"] if f["unit"] == "tokens/s"] + ys
    ax.set_ylim(min(values) / 2, max(values) * 40)
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels([f"{spec_of(s['preset'])['label']}\n(preset {s['preset']})" for s in models])
    ax.set_ylabel("tokens / second (log scale)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, ncol=2)
    lines = ["GCNN / LSTM, ours (CPU); the paper's on a GPU:"]
    for s in models[1:]:
        key = s["preset"]
        parts = [f"{CALL_LABELS[c]} {figs['ratio-' + c + '/' + key]['ours']:.1f}×" for c in calls]
        if f"ratio-body-fastest/{key}" in figs:
            parts.append(f"each body at its fastest {figs[f'ratio-body-fastest/{key}']['ours']:.1f}×")
        lines.append(f"{s['short']} / LSTM-2048-512: " + ", ".join(parts))
        if f"ratio-body-unprojected/{s['preset']}" in figs:
            lines.append(f"    body over Table 4's unprojected LSTM-2048 "
                         f"({table4._fmt(figs[f'body/{UNPROJECTED}']['ours'])} tokens/s): "
                         f"{figs[f'ratio-body-unprojected/{key}']['ours']:.1f}×; paper {PAPER_RATIO[key]:.1f}×")
    fig.text(0.01, 0.01, "\n".join(lines), ha="left", va="bottom", fontsize=8.5,
             bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.9, "edgecolor": "0.7"})
    quick = " — QUICK SMOKE TEST (tiny models)" if result.get("quick") else ""
    m = result.get("machine", {})
    ax.set_title(f"{result['paper']}: one sequence of {settings['responsiveness_tokens']:,} tokens{quick}\n"
                 f"{m.get('cpu_model', '')}, {m.get('cores', '?')} cores; median of {settings['repeats']} repeats; "
                 f"`{result['command']}`", fontsize=10)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
