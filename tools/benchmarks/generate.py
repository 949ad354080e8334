"""`zoo benchmark generate`: the compiled `generate` against the zoo's previous Python loop.

How it measures: docs/benchmarks.md#generate.
"""

import statistics
import sys

import numpy as np

from zoo.tools.benchmarks import common, harness

DEFAULT_MODELS = ("gcnn-ptb", "lstmp-ptb")
SEED = 0
DEFAULTS = {"repeats": 5, "new_tokens": 100, "long_prompt": 1000}
QUICK = {"repeats": 2, "new_tokens": 20, "long_prompt": 200}  # --quick: a smoke run


# ---- the baseline ----------------------------------------------------------------------------------
def previous_generate(model, prompt_ids, max_length, temperature, top_k, seed, stop_at_eos=True):
    """The zoo's previous `LanguageModel.generate` (zoo/models/generation.py at commit bd7b041),
    verbatim (`self` is `model`) but for one change: `stop_at_eos=False` does not stop at `</s>`,
    so that it writes exactly `max_new_tokens` new tokens, as `generate(..., stop=None)` does.

    Continue `prompt` (a string, or a list of ids) up to `max_new_tokens` new tokens.

    `temperature=0` is greedy decoding; `top_k` samples among the k most likely tokens.
    Stops early at `</s>`. Returns a string for a string prompt, else a list of ids.
    """
    self, prompt = model, prompt_ids
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}.")
    if top_k is not None and not 1 <= top_k <= self.vocabulary_size:
        raise ValueError(f"top_k must be in [1, {self.vocabulary_size}], got {top_k}.")
    as_text = isinstance(prompt, str)
    if as_text:
        ids = self.require_tokenizer().encode(prompt, add_eos=False)
    else:
        ids = [int(i) for i in self.check_ids(prompt).reshape(-1)]
    rng = np.random.default_rng(seed)
    state = None
    for token in ids:
        log_probs, state = self.decode_step([token], state)
    out = []
    eos = self.tokenizer.eos_id if self.tokenizer is not None else None
    for _ in range(max_length):
        lp = log_probs.numpy()[0].astype("float64")
        lp[:2] = -np.inf  # never emit <pad> or <s>
        if temperature == 0:
            token = int(np.argmax(lp))
        else:
            lp = lp / temperature
            if top_k is not None:
                cut = np.partition(lp, -top_k)[-top_k]
                lp[lp < cut] = -np.inf
            p = np.exp(lp - lp.max())
            token = int(rng.choice(len(p), p=p / p.sum()))
        out.append(token)
        if stop_at_eos and token == eos:  # the one change: `if token == eos:` before
            break
        log_probs, state = self.decode_step([token], state)
    if as_text:
        return self.tokenizer.decode(ids + out)
    return ids + out


def stepwise_first_token(model):
    """(c): a tf.function of `(ids [batch, time], lengths [batch])` → the greedy first new token
    [batch]: the prompt fed token by token to `step` inside one `tf.while_loop`
    (`stepwise_prefill`), then the output layer; `<pad>` and `<s>` never chosen."""
    import tensorflow as tf

    from zoo.models import generation

    spec = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)]

    def first(ids, lengths):
        with generation.loop_invariants(model):  # as `generate` traces its loops
            hidden, _ = generation.stepwise_prefill(model, ids, lengths)
            scores = generation.next_token_scores(model, hidden, normalised=False)
        return tf.argmax(scores[:, 2:], axis=-1, output_type=tf.int32) + 2

    return tf.function(first, input_signature=spec, autograph=False)


# ---- models and prompts ----------------------------------------------------------------------------
def build_model(preset, small):
    """The preset with its trained weights, or with `small` its tiny random config."""
    return common.build_model(preset, small, weights="trained")


def text_ids(model, count, use_treebank=True):
    """`(ids, where they come from)`: `count` ids of running text, `<s>` first. The Penn Treebank
    test lines, each ended by `</s>`; without the treebank, the vocabulary's words cycled."""
    vocabulary = model.require_tokenizer()
    if use_treebank:
        try:
            from zoo.data.corpus import read_lines

            lines = read_lines("ptb", "test")
        except (ImportError, OSError, ValueError):
            lines = None
        if lines:
            ids = [vocabulary.bos_id]
            for line in lines:
                ids += vocabulary.encode(line, add_bos=False, add_eos=True)
                if len(ids) >= count:
                    return ids[:count], "the Penn Treebank test text (<s>, then each line ended by </s>)"
    words = list(range(4, model.vocabulary_size))  # past <pad>, <s>, </s>, <unk>
    ids = [vocabulary.bos_id] + [words[i % len(words)] for i in range(count - 1)]
    return ids, "the vocabulary's words cycled (no treebank)"


class Case:
    """One model's prompts and the paths timed on them."""

    def __init__(self, name, model, args):
        self.name, self.model = name, model
        n = args.new_tokens
        stream, self.source = text_ids(model, max(args.long_prompt, args.prompt_tokens, args.batch),
                                       use_treebank=not args.small)
        self.prompt = stream[:args.prompt_tokens]
        self.batch = [stream[:i + 1] for i in range(args.batch)]  # lengths 1 … batch
        self.long = stream[:args.long_prompt]
        t, k, seed = args.temperature, args.top_k, args.seed

        def new(prompts, jit, expected):
            def run():
                out = model.generate(prompts, max_new_tokens=n, temperature=t, top_k=k, seed=seed, stop=None,
                                     jit_compile=jit)
                got = [len(row) - len(p) for row, p in zip(out, prompts)]
                if got != expected:
                    raise RuntimeError(f"{name}: generate(stop=None) wrote {got} new tokens, not {n} per prompt.")
                return out
            return run

        def previous(prompts):
            return lambda: [previous_generate(model, p, n, t, k, seed + i, stop_at_eos=False)
                            for i, p in enumerate(prompts)]

        stepwise = stepwise_first_token(model)
        long_ids, long_length = np.asarray([self.long], np.int32), np.asarray([len(self.long)], np.int32)
        self.paths = {
            "b1_previous": previous([self.prompt]),
            "b1_new": new([self.prompt], False, [n]),
            "b1_xla": new([self.prompt], "auto", [n]),
            "bN_previous": previous(self.batch),
            "bN_new": new(self.batch, False, [n] * len(self.batch)),
            "bN_xla": new(self.batch, "auto", [n] * len(self.batch)),
            "first_a": lambda: model.generate([self.long], max_new_tokens=1, temperature=0, stop=None,
                                              jit_compile=False)[0][-1],
            "first_b": lambda: previous_generate(model, self.long, 1, 0, None, seed, stop_at_eos=False)[-1],
            "first_c": lambda: int(stepwise(long_ids, long_length).numpy()[0]),
        }
        self.times = {path: [] for path in self.paths}
        self.first_call = {}
        self.outputs = {}

    def warm_up(self, log):
        for path, fn in self.paths.items():
            self.first_call[path], self.outputs[path] = harness.timed(fn)
        log(f"  {self.name}: warm-up done (first calls: "
            + ", ".join(f"{p} {s:.2f} s" for p, s in self.first_call.items()) + ")", flush=True)

    def check(self, args):
        """Greedy, the previous loop (no </s> stop) and `generate(stop=None)` write the same ids;
        (a), (b) and (c) choose the same first token."""
        n = args.new_tokens
        want = previous_generate(self.model, self.prompt, n, 0, None, args.seed, stop_at_eos=False)
        got = self.model.generate([self.prompt], max_new_tokens=n, temperature=0, stop=None)[0]
        firsts = [self.outputs[f"first_{x}"] for x in "abc"]
        return {"greedy_same_ids": want == got,
                "greedy_first_difference": next((i - len(self.prompt) for i, (a, b) in enumerate(zip(want, got))
                                                 if a != b), None),
                "first_tokens": firsts, "first_tokens_agree": len(set(firsts)) == 1}


def measure(cases, repeats):
    """Every path of every case once a round, in the harness's rotating order."""
    calls = {(i, path): (lambda fn=fn: harness.timed(fn)[0]) for i, case in enumerate(cases)
             for path, fn in case.paths.items()}
    for (i, path), times in harness.interleaved(calls, repeats).items():
        cases[i].times[path] = times


def summarise(case, args):
    n, batch = args.new_tokens, args.batch
    median = {path: statistics.median(times) for path, times in case.times.items()}
    tokens = {"b1": n, "bN": n * batch}
    result = {"model": case.name, "params": int(case.model.count_params()), "prompt_source": case.source,
              "prompt_tokens": len(case.prompt), "batch_prompt_lengths": [len(p) for p in case.batch],
              "long_prompt_tokens": len(case.long), "times_s": case.times, "first_call_s": case.first_call,
              "median_s": median, "tokens_per_s": {}, "vs_previous": {}}
    for path, seconds in median.items():
        group = path.split("_")[0]
        if group in tokens:
            result["tokens_per_s"][path] = tokens[group] / seconds
            result["vs_previous"][path] = median[f"{group}_previous"] / seconds
    result["first_token_ms"] = {x: median[f"first_{x}"] * 1e3 for x in "abc"}
    result["first_token_ratios"] = {"b/a": median["first_b"] / median["first_a"],
                                    "c/a": median["first_c"] / median["first_a"],
                                    "b/c": median["first_b"] / median["first_c"]}
    return result


# ---- the table -------------------------------------------------------------------------------------
def table(report):
    args, results = report["args"], report["results"]
    n, batch = args["new_tokens"], args["batch"]
    sampling = f"temperature {args['temperature']:g}, top-k {args['top_k']}"
    lines = [
        "# generate: the compiled `generate` against the previous Python loop",
        "",
        "```bash",
        report["command"],
        "```",
        "",
        f"machine: {report['machine']}; load average at the end {report['load_average_end']}",
        "",
        f"Decoding: {sampling}, {n} new tokens per prompt (`stop=None`: every row writes all of them; the "
        f"previous loop with its `</s>` stop off), seed {args['seed']}. Prompts from "
        f"{results[0]['prompt_source'] if results else '-'}: batch 1 its first {args['prompt_tokens']} ids, "
        f"batch {batch} its first 1, 2, …, {batch} ids. {args['repeats']} repeats, every path of every model "
        f"once per repeat in turn; medians. First call: the untimed warm-up (tracing; with XLA, compiling for "
        f"the prompt shape).",
        "",
    ]
    rows, labels = [], {
        "previous": "previous `generate` (Python loop: `decode_step` + numpy draw per token)",
        "new": "`generate(jit_compile=False)` (the graph loop, one `tf.while_loop`)",
        "xla": "`generate()` (the default, `jit_compile=\"auto\"`: the loop under XLA)",
    }
    for r in results:
        first = True
        for group, size in (("b1", 1), ("bN", batch)):
            for kind in ("previous", "new", "xla"):
                path = f"{group}_{kind}"
                label = labels[kind]
                if kind == "previous" and size > 1:
                    label = f"previous `generate`, the {size} prompts one at a time (measured)"
                ratio = "1.0×" if kind == "previous" else f"{r['vs_previous'][path]:.1f}×"
                rows.append(["`" + r["model"] + "`" if first else "", size, label, f"{r['median_s'][path]:.3f}",
                             f"{r['tokens_per_s'][path]:,.0f}", ratio, f"{r['first_call_s'][path]:.2f}"])
                first = False
    lines.append(harness.markdown_table(["model", "batch:", "path", "median s:", "new tokens/s:", "× previous:",
                                         "first call s:"], rows))
    long = args["long_prompt"]
    lines += [
        "",
        f"Time to the first new token after a {long:,}-token prompt (greedy), ms (medians of the same repeats):",
        "",
        "- (a) `generate([prompt], max_new_tokens=1, temperature=0, stop=None, jit_compile=False)`: the prompt read in one parallel pass (the graph loop, as (c));",
        "- (b) the previous `generate` (max_length 1, greedy): `decode_step` per prompt token from Python, then the "
        "first token;",
        "- (c) `stepwise_prefill` (`step` per prompt token inside one `tf.while_loop`) and the output layer, in a "
        "tf.function: what (a) would cost without the parallel pass.",
        "",
        harness.markdown_table(
            ["model", "(a) parallel pass ms:", "(b) Python `decode_step` loop ms:", "(c) in-graph token by token ms:",
             "b/a:", "c/a:", "b/c:"],
            [[f"`{r['model']}`", *(f"{r['first_token_ms'][x]:.1f}" for x in "abc"),
              *(f"{r['first_token_ratios'][q]:.1f}×" for q in ("b/a", "c/a", "b/c"))] for r in results]),
        "", "Checks:"]
    for r in results:
        c = r["checks"]
        same = "yes" if c["greedy_same_ids"] else f"NO (first difference at new token {c['greedy_first_difference']})"
        lines.append(f"- `{r['model']}`: greedy, the previous loop and `generate(stop=None)` write the same "
                     f"{n} ids: {same}; (a), (b), (c) choose the same first token: "
                     f"{'yes' if c['first_tokens_agree'] else 'NO ' + str(c['first_tokens'])}.")
    return "\n".join(lines) + "\n"


# ---- the command -----------------------------------------------------------------------------------
def parse(argv):
    p = harness.parser("generate", __doc__, "", f"timed calls of every path (default {DEFAULTS['repeats']})", out=True)
    p.add_argument("--models", default=",".join(DEFAULT_MODELS),
                   help="comma-separated presets, loaded with their trained weights (default: gcnn-ptb,lstmp-ptb)")
    p.add_argument("--new-tokens", type=int, help=f"new tokens per prompt (default {DEFAULTS['new_tokens']})")
    p.add_argument("--batch", type=int, default=32, help="prompts of the batched row (default 32)")
    p.add_argument("--prompt-tokens", type=int, default=16, help="ids of the batch-1 prompt (default 16)")
    p.add_argument("--long-prompt", type=int,
                   help=f"prompt of the time-to-first-token part, in ids (default {DEFAULTS['long_prompt']})")
    p.add_argument("--temperature", type=float, default=0.8, help="sampling temperature (default 0.8)")
    p.add_argument("--top-k", type=int, default=40, help="top-k of the sampler (default 40)")
    p.add_argument("--seed", type=int, default=SEED, help=f"sampling seed (default {SEED})")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items())
                        + " unless given")
    p.add_argument("--small", action="store_true", help="tiny configs of the presets, random weights (tests)")
    args = p.parse_args(argv)
    for key, value in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    harness.at_least_one(args, "repeats", "new_tokens", "batch", "prompt_tokens", "long_prompt")
    if not args.temperature > 0:
        raise ValueError(f"--temperature must be > 0 (the sampled rows), got {args.temperature}.")
    return args


def main(argv):
    args = parse(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    report = harness.header("generate", argv)
    harness.cpu_tensorflow()
    machine = f"{harness.machine_summary()} at the start; {harness.versions()}; TF threads: default; device CPU"
    print(f"machine: {machine}", flush=True)
    cases = []
    for name in models:
        model = build_model(name, args.small)
        if model.tokenizer is not None and args.top_k > model.vocabulary_size:
            raise ValueError(f"--top-k {args.top_k} is larger than {name}'s vocabulary ({model.vocabulary_size}).")
        cases.append(Case(name, model, args))
        print(f"  {name}: {model.count_params():,} parameters{' (tiny config, random weights)' if args.small else ''}",
              flush=True)
    for case in cases:
        case.warm_up(print)
    measure(cases, args.repeats)
    results = [dict(summarise(case, args), checks=case.check(args)) for case in cases]
    report.update(machine=machine, load_average_end=harness.load_average_text(), args=vars(args), results=results)
    return harness.report(args, report, table(report))


if __name__ == "__main__":
    main(sys.argv[1:])
