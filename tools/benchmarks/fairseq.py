"""`zoo benchmark fairseq`: a converted fairseq `fconv_lm` checkpoint in the zoo against fairseq's own code on
it, side by side on the CPU, and what converting and exporting it costs. How: docs/benchmarks.md#fairseq.
"""

import collections
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from zoo.tools.benchmarks import harness
from zoo.tools.benchmarks.common import zipf_targets

TORCH_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fairseq_torch.py")
ARCH = "fconv_lm_dauphin_wikitext103"  # every size is saved under it (its layers and embedding overridden)
FULL_LAYERS = ("[(850, 6)] * 3 + [(850, 1)] * 1 + [(850, 5)] * 4 + [(850, 1)] * 1 + [(850, 4)] * 3"
               " + [(1024, 4)] * 1 + [(2048, 4)] * 1")
# The architectures: `words` is dict.txt's length (fairseq adds 4 specials), `softmax` fairseq's
# adaptive softmax format ("2018": the published checkpoints'; "current": v0.12.2's).
SIZES = {name: {"arch": ARCH, **dict(zip(("embed_dim", "layers", "cutoffs", "words", "softmax", "dropout"), size))}
         for name, size in [("full", (280, FULL_LAYERS, "10000,20000,200000", 267_740, "2018", 0.1)),
                            ("ptb", (128, "[(128, 4)] * 4", "2000,6000", 9_998, "current", 0.2)),
                            ("tiny", (16, "[(32, 4)] * 2 + [(32, 1)] + [(48, 3)]", "100,300", 496, "2018", 0.1)),
                            ("tiny-train", (16, "[(16, 4)] * 2", "50,150", 196, "current", 0.2))]}
PTB_OPTIMIZER = {"learning_rate": 2e-3, "clipnorm": 1.0}  # gcnn-ptb's: adam, global_clipnorm 1.0
DEFAULTS = {"repeats": 5, "window": 512, "windows": 2, "prompt": 16, "new_tokens": 64, "batches": [1, 8],
            "train_batch": 32, "train_seq": 64, "full": "full", "train": "ptb"}
SMALL = {"repeats": 2, "window": 64, "windows": 2, "prompt": 8, "new_tokens": 16, "batches": [1, 2],
         "train_batch": 4, "train_seq": 16, "full": "tiny", "train": "tiny-train"}
MATMUL_N, COPY_MIB, SEED = 4096, 1024, 0


def cost(model):
    """What a token of the zoo's converted `model` costs, by `zoo.models.compute`'s count: `multiply_adds` up
    to the adaptive softmax's head (included), each tail cluster's (`tails`), the `cutoffs` and `embedding_dim`."""
    from zoo.models.compute import multiply_adds_per_token

    head = model.head
    tails = [int(np.prod(p.shape)) + int(np.prod(k.shape)) for p, k in zip(head.tail_projections, head.tail_kernels)]
    return {"multiply_adds": multiply_adds_per_token(model)["total"] - sum(tails), "tails": tails,
            "cutoffs": list(head.cutoffs), "embedding_dim": model.embedding_dim}


def cluster_shares(cost, targets):
    """The share of `targets` (fairseq ids) in each tail cluster."""
    targets, cuts = np.asarray(targets).reshape(-1), cost["cutoffs"] + [np.inf]
    return [float(np.mean((targets >= cuts[i]) & (targets < cuts[i + 1]))) for i in range(len(cuts) - 1)]


def scoring_flops_per_token(cost, shares):
    """FLOPs (2 per multiply-add) of one target's exact log-probability: the stack and the head, and a
    tail cluster for the tokens whose target lies in it (`shares`). A training step: 3 times this."""
    return 2 * (cost["multiply_adds"] + sum(share * tail for share, tail in zip(shares, cost["tails"])))


def generation_bytes_per_token(cost):
    """Float32 weight bytes a batch-1 token reads: every matrix (greedy needs every id's score), one embedding row."""
    return 4 * (cost["multiply_adds"] + sum(cost["tails"]) + cost["embedding_dim"])


def windows(spec, rows, length, seed):
    """`[rows, length + 1]` ids, each row `</s>` (id 2, fairseq's line start) then `length` words: ids from 4 up
    with a Zipf law over dict.txt's order, as running text's targets fall in the adaptive softmax's clusters."""
    words = 4 + zipf_targets(spec["words"], rows * length, seed).reshape(rows, length).astype(np.int64)
    return np.concatenate([np.full((rows, 1), 2, np.int64), words], axis=1)


def check_torch_python(path):
    """`path` made absolute if it is an executable Python that imports torch, else a ValueError naming it."""
    if not path:
        raise ValueError("zoo benchmark fairseq needs --torch-python PATH, a Python with torch (fairseq's side "
                         "runs there; torch is no dependency of the zoo).")
    resolved = shutil.which(path)  # a name on $PATH, or a path checked as it is
    if not resolved or not os.path.isfile(resolved):
        raise ValueError(f"--torch-python {path!r} is not an executable file.")
    probe = subprocess.run([resolved, "-c", "import torch, numpy"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise ValueError(f"--torch-python {path!r} cannot import torch and numpy "
                         f"({(probe.stderr.strip().splitlines() or ['?'])[-1]}).")
    return os.path.abspath(resolved)


def check_fairseq_sources(path):
    """`path` made absolute if it holds fairseq's sources as make_fairseq_goldens.py wants them, else a ValueError."""
    if not path:
        raise ValueError("zoo benchmark fairseq needs --fairseq SRC (or FAIRSEQ_SRC): a folder with "
                         "v0.12.2/fairseq/... and 2018/fairseq/modules/adaptive_softmax.py "
                         "(tools/convert/make_fairseq_goldens.py says how to make it).")
    for part in (("v0.12.2", "fairseq", "models", "fconv.py"), ("2018", "fairseq", "modules", "adaptive_softmax.py")):
        if not os.path.isfile(os.path.join(path, *part)):
            raise ValueError(f"--fairseq {path!r} has no {os.path.join(*part)}; make_fairseq_goldens.py's "
                             "docstring says how to gather fairseq's sources.")
    return os.path.abspath(path)


def measured_run(command, what):
    """`command` in a fresh process: `(wall seconds, its peak RSS in MiB (wait4's), its output)`; exits on failure."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=harness.child_env())
    output = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{what} failed (exit status {os.waitstatus_to_exitcode(status)}):\n{output[-3000:]}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024, output


@contextlib.contextmanager
def workers(torch_python, src, threads):
    """`{"fairseq": fairseq_torch.py's worker, "zoo": this module's}`, both closed after."""
    with harness.Worker([torch_python, TORCH_SCRIPT, "serve", src, str(threads)], "the fairseq worker") as fairseq, \
            harness.Worker([sys.executable, "-m", __spec__.name, "--worker", str(threads)], "the zoo worker") as zoo:
        yield {"fairseq": fairseq, "zoo": zoo}


def interleaved(sides, repeats, op, **args):
    """`{side: [answers]}`: `op` on every worker, `repeats` rounds in the harness's order."""
    return harness.interleaved({name: (lambda w=w: w(op, **args)) for name, w in sides.items()}, repeats)


def compared(sides, work, name, repeats, op, **args):
    """`op` on both sides once, untimed, then `repeats` rounds: `(its results, fairseq's output, the zoo's)`."""
    warm = {n: w(op, save=os.path.join(work, f"{name}_{n}.npy"), **args) for n, w in sides.items()}
    a, b = (np.load(os.path.join(work, f"{name}_{n}.npy")) for n in ("fairseq", "zoo"))
    return {"warmup": warm, "runs": interleaved(sides, repeats, op, **args)}, a, b


def limits(sides, suffix=""):
    """The machine's limits as each side measures them, 3 rounds: a matmul's GFLOP/s, a copy's GB/s."""
    return {f"matmul{suffix}": interleaved(sides, 3, "matmul", n=MATMUL_N),
            f"copy{suffix}": interleaved(sides, 3, "copy", mib=COPY_MIB)}


class ZooWorker:
    """The zoo's side of every command of fairseq_torch.py's worker."""

    def __init__(self, threads):
        self.tf, self.threads = harness.cpu_tensorflow(threads, threads), threads

    def load(self, preset):
        import zoo

        self.model = zoo.load(preset)
        return {"params": int(self.model.count_params()), "rss_mib": harness.status_kib("VmRSS") / 1024,
                "library": f"tensorflow {self.tf.__version__}", "threads": self.threads, "cost": cost(self.model)}

    def score(self, tokens, save=None):
        """`target_log_probs`: the compiled path of `score` and `perplexity`."""
        ids = np.load(tokens).astype(np.int32)
        seconds, scores = harness.timed(self.model.target_log_probs, ids[:, :-1], ids[:, 1:])
        if save:
            np.save(save, scores)
        return {"s": seconds, "tokens": int(scores.size)}

    def generate(self, prompt, new_tokens, save=None):
        ids = np.load(prompt).astype(np.int32)
        seconds, out = harness.timed(self.model.generate, ids.tolist(), max_new_tokens=new_tokens, sampler="greedy",
                                     stop=None)
        new = np.asarray(out)[:, ids.shape[1]:]
        if save:
            np.save(save, new)
        return {"s": seconds, "tokens": int(new.size)}

    def train_load(self, checkpoint, learning_rate, clipnorm):
        """The converted model under `zoo train`'s step with gcnn-ptb's optimiser (Adam, global norm clipped)."""
        import zoo
        from zoo import optimizers
        from zoo.training.steps import step_functions

        self.train_model, self.iterator = zoo.load(checkpoint), None
        adam = optimizers.from_config({"name": "adam", "learning_rate": learning_rate, "global_clipnorm": clipnorm})
        self.steps = step_functions(self.train_model, adam, self.tf.distribute.get_strategy())
        return {"params": int(self.train_model.count_params()), "cost": cost(self.train_model)}

    def train(self, tokens):
        if self.iterator is None:
            ids = np.load(tokens).astype(np.int32)
            batch = (ids[:, :-1], ids[:, 1:], np.ones(ids[:, 1:].shape, np.float32))
            self.iterator = iter(self.tf.data.Dataset.from_tensors(batch).repeat())
            self.tokens = int(ids[:, 1:].size)
        seconds, loss = harness.timed(lambda: float(self.steps.train(self.iterator)))
        return {"s": seconds, "tokens": self.tokens, "loss": loss}

    def matmul(self, n, repeats=3):
        tf = self.tf
        a, b = tf.random.normal((n, n)), tf.random.normal((n, n))
        tf.matmul(a, b).numpy()
        best = min(harness.timed(lambda: tf.matmul(a, b).numpy())[0] for _ in range(repeats))
        return {"gflops": 2 * n**3 / best / 1e9, "library": "tf.matmul"}

    def copy(self, mib, repeats=3):
        """numpy's copy of `mib` MiB, a slice per thread: bytes read + written per second (STREAM's Copy)."""
        src = np.ones(mib * 2**18, np.float32)
        parts = np.array_split(np.empty_like(src), self.threads), np.array_split(src, self.threads)

        def run():
            with ThreadPoolExecutor(self.threads) as pool:
                list(pool.map(np.copyto, *parts))

        run()
        best = min(harness.timed(run)[0] for _ in range(repeats))
        return {"gbs": 2 * src.nbytes / best / 1e9, "library": "numpy copyto"}

    def profile(self, logdir, what, **args):
        """The command `what` once under tf.profiler: its answer and the self-time of each TF op type."""
        answer, rows = harness.profiled(lambda: getattr(self, what)(**args), logdir)
        return {**answer, "ops": harness.self_time_shares(rows, top=15)}


def export_check(path, prompt_words=20):
    """In a fresh process: the export at `path` loaded, its `score_ids` and `generate` called, each timed."""
    tf = harness.cpu_tensorflow()
    load_s, loaded = harness.timed(tf.saved_model.load, path)
    ids = tf.constant([[2] + list(range(4, 4 + prompt_words))], tf.int32)
    score_s, scored = harness.timed(loaded.signatures["score_ids"], token_ids=ids,
                                    lengths=tf.constant([ids.shape[1]], tf.int32))
    generate_s, made = harness.timed(harness.generate_request, loaded, ["w000000 w000001 w000002"], 8)
    return {"load_s": load_s, "score_first_call_s": score_s, "generate_first_call_s": generate_s,
            "score_lengths": int(scored["lengths"].numpy()[0]),
            "score_finite": bool(np.isfinite(scored["token_log_probs"].numpy()[0]).all()),
            "score_sum": float(scored["log_prob"].numpy()[0]),
            "generate_text": made["text"].numpy()[0].decode(), "generate_lengths": int(made["lengths"].numpy()[0])}


def parse_args(argv):
    p = harness.parser("fairseq", __doc__, "", f"timed repeats per figure (default {DEFAULTS['repeats']})", out=True)
    p.add_argument("--torch-python", help="a Python with torch and numpy, for fairseq's side (required)")
    p.add_argument("--fairseq", default=os.environ.get("FAIRSEQ_SRC"),
                   help="fairseq's sources, as make_fairseq_goldens.py gathers them (default: $FAIRSEQ_SRC)")
    p.add_argument("--work", help="folder for the checkpoints, presets and exports, kept and reused (default: a "
                                  "temporary one)")
    p.add_argument("--threads", type=int, default=2, help="threads of each side (torch intra-op; TF intra, inter op)")
    p.add_argument("--new-tokens", type=int, help=f"greedy new tokens per prompt (default {DEFAULTS['new_tokens']})")
    p.add_argument("--profile", action="store_true", help="also profile a scoring call, a batch-1 generation")
    p.add_argument("--py-spy", default="py-spy", help="the py-spy program (for --profile)")
    p.add_argument("--small", action="store_true", help="tiny architectures: a smoke test")
    p.add_argument("--skip-export", action="store_true", help="no conversion figures beyond the convert itself")
    args = p.parse_args(argv)
    try:
        harness.at_least_one(args, "threads", "repeats", "new_tokens")
    except ValueError as e:
        p.error(str(e))
    return args


def main(argv):
    args = parse_args(argv)
    try:
        torch_python, src = check_torch_python(args.torch_python), check_fairseq_sources(args.fairseq)
    except ValueError as e:
        raise SystemExit(f"zoo benchmark fairseq: {e}") from None
    cfg = dict(SMALL if args.small else DEFAULTS)
    cfg.update({key: getattr(args, key) for key in ("repeats", "new_tokens") if getattr(args, key)})
    results = harness.header("fairseq", argv, threads=args.threads, config=cfg,
                             sizes={k: SIZES[cfg[k]] for k in ("full", "train")})
    print(f"machine: {harness.machine_summary()}", flush=True)
    with (contextlib.nullcontext(os.path.abspath(args.work)) if args.work else
          tempfile.TemporaryDirectory(prefix="zoo-fairseq-", ignore_cleanup_errors=True)) as work:
        os.makedirs(work, exist_ok=True)
        results["conversion"] = prepare(args, cfg, work, torch_python, src)
        results.update(measure(args, cfg, work, torch_python, src))
    results["load_average_after"] = harness.load_average_text()
    return harness.report(args, results, markdown(results))


def prepare(args, cfg, work, torch_python, src):
    """Both checkpoints written by fairseq's code and converted, the full one exported: the figures."""
    out, zoo = {}, [sys.executable, "-m", "zoo"]
    for key in ("full", "train"):
        folder = os.path.join(work, key)
        checkpoint, preset = os.path.join(folder, "checkpoint.pt"), os.path.join(folder, "preset")
        print(f"writing the {key} checkpoint ({cfg[key]}) with fairseq's code ...", flush=True)
        if os.path.exists(checkpoint):
            made = {"reused": True, "bytes": os.path.getsize(checkpoint)}
        else:
            try:
                made = harness.run_once([torch_python, TORCH_SCRIPT, "make", src, str(args.threads),
                                         json.dumps(SIZES[cfg[key]]), folder], "fairseq_torch.py make")
            except RuntimeError as e:
                raise SystemExit(str(e)) from None
        if os.path.exists(preset):
            out[key] = {"checkpoint": made, "reused": True, "preset_bytes": harness.directory_bytes(preset)}
            continue
        print("converting it: zoo convert fairseq ...", flush=True)
        wall, peak_mib, _ = measured_run(zoo + ["convert", "fairseq", checkpoint, "--out", preset, "--dictionary",
                                                os.path.join(folder, "dict.txt")], "zoo convert fairseq")
        out[key] = {"checkpoint": made, "convert_s": wall, "convert_peak_rss_mib": peak_mib,
                    "preset_bytes": harness.directory_bytes(preset)}
        print(f"  {wall:.1f} s, peak RSS {peak_mib:,.0f} MiB, preset {out[key]['preset_bytes'] / 2**20:,.0f} MiB",
              flush=True)
    if not args.skip_export:
        out["export"] = export(work)
    return out


def export(work):
    """`zoo export` of the full preset, then the export loaded and called in a fresh process: the figures."""
    base = os.path.join(work, "exports")
    shutil.rmtree(base, ignore_errors=True)
    print("exporting the full preset: zoo export ...", flush=True)
    wall, peak_mib, log = measured_run([sys.executable, "-m", "zoo", "export", os.path.join(work, "full", "preset"),
                                        "--base", base], "zoo export")
    path = log.strip().splitlines()[-1].strip()
    fresh_s, fresh_mib, said = measured_run([sys.executable, "-m", __spec__.name, "--export-check", path],
                                            "loading the export in a fresh process")
    answer = next(line for line in reversed(said.splitlines()) if line.startswith("{"))  # harness.answer's line
    fresh = {**json.loads(answer), "wall_s": fresh_s, "peak_rss_mib": fresh_mib}
    out = {"export_s": wall, "export_peak_rss_mib": peak_mib, "bytes": harness.directory_bytes(path),
           "fresh_process": fresh}
    print(f"  export {out['bytes'] / 2**20:,.0f} MiB; a fresh process loads it in {fresh['load_s']:.1f} s", flush=True)
    return out


def inputs(work, name, ids):
    """`ids` saved as `work`/`name`.npy: its path."""
    np.save(path := os.path.join(work, f"{name}.npy"), ids)
    return path


def measure(args, cfg, work, torch_python, src):
    out, spec, full = {}, SIZES[cfg["full"]], os.path.join(work, "full")
    with workers(torch_python, src, args.threads) as sides:
        out["load"] = {"fairseq": sides["fairseq"]("load", checkpoint=os.path.join(full, "checkpoint.pt"), spec=spec),
                       "zoo": sides["zoo"]("load", preset=os.path.join(full, "preset"))}
        out["limits"], zoo_cost = limits(sides), out["load"]["zoo"]["cost"]
        tokens = windows(spec, cfg["windows"], cfg["window"], SEED)
        shares = cluster_shares(zoo_cost, tokens[:, 1:])
        print(f"scoring {tokens.shape[0]} windows of {cfg['window']} tokens ...", flush=True)
        out["scoring"], a, b = compared(sides, work, "score", cfg["repeats"], "score",
                                        tokens=inputs(work, "score_tokens", tokens))
        out["scoring"].update(max_abs_diff=float(np.max(np.abs(a - b))), mean_log_prob=float(a.mean()),
                              cluster_shares=shares, flops_per_token=scoring_flops_per_token(zoo_cost, shares))
        out["generation"] = {}
        for batch in cfg["batches"]:
            print(f"greedy generation, batch {batch}: {cfg['prompt']}-token prompts, {cfg['new_tokens']} new "
                  "tokens ...", flush=True)
            prompt = inputs(work, f"prompt_{batch}", windows(spec, batch, cfg["prompt"] - 1, SEED + batch))
            entry, a, b = compared(sides, work, f"gen_{batch}", cfg["repeats"], "generate", prompt=prompt,
                                   new_tokens=cfg["new_tokens"])
            out["generation"][batch] = {**entry, "same_tokens": float(np.mean(a == b)),
                                        "bytes_per_token": generation_bytes_per_token(zoo_cost)}
        out["limits"].update(limits(sides, "_after"))
        if args.profile:
            out["profile"] = profile(cfg, work, sides, args.py_spy)
    with workers(torch_python, src, args.threads) as sides:
        out["training"] = train(cfg, work, sides)
    summarise(out)
    return out


def train(cfg, work, sides):
    """Training steps of the `train` size on each side, 3 untimed rounds first, interleaved: the figures."""
    folder, spec = os.path.join(work, "train"), SIZES[cfg["train"]]
    sides["fairseq"]("train_load", checkpoint=os.path.join(folder, "checkpoint.pt"), spec=spec, **PTB_OPTIMIZER)
    zoo_cost = sides["zoo"]("train_load", checkpoint=os.path.join(folder, "preset"), **PTB_OPTIMIZER)["cost"]
    tokens = windows(spec, cfg["train_batch"], cfg["train_seq"], SEED + 100)
    path, shares = inputs(work, "train_tokens", tokens), cluster_shares(zoo_cost, tokens[:, 1:])
    print(f"training steps at {cfg['train']}'s size, batch {cfg['train_batch']} x {cfg['train_seq']} ...", flush=True)
    warm = interleaved(sides, 3, "train", tokens=path)
    return {"warmup": warm, "runs": interleaved(sides, max(cfg["repeats"], 10), "train", tokens=path),
            "cluster_shares": shares, "flops_per_token": 3 * scoring_flops_per_token(zoo_cost, shares),
            "train_matmul": interleaved(sides, 2, "matmul", n=MATMUL_N)}


def peak(limits, kind, key):
    """The machine's limit: the best median of either side's `kind` measurements."""
    return max(statistics.median(a[key] for a in answers)
               for name, sides in limits.items() if name.startswith(kind) for answers in sides.values())


def summarise(out):
    """The table's rows: each side's median rate, their ratio, and each one's share of the machine's limit."""
    gflops, gbs = peak(out["limits"], "matmul", "gflops"), peak(out["limits"], "copy", "gbs")
    out["machine_limit"] = {"matmul_gflops": gflops, "copy_gbs": gbs}
    s, t = out["scoring"], out["training"]
    cases = [("scoring, tokens/s", s["runs"], s["flops_per_token"], gflops)]
    cases += [(f"greedy generation batch {batch}, new tokens/s", g["runs"], g["bytes_per_token"] if int(batch) == 1
               else None, gbs) for batch, g in out["generation"].items()]
    cases.append(("training step, tokens/s", t["runs"], t["flops_per_token"], gflops))
    out["table"] = []
    for what, runs, per_token, limit in cases:  # a share: the rate times its cost per token over the limit
        f, z = harness.median_rate(runs["fairseq"]), harness.median_rate(runs["zoo"])
        shares = [None if per_token is None else r * per_token / 1e9 / limit for r in (f, z)]
        out["table"].append({"what": what, "fairseq": f, "zoo": z, "ratio": z / f, "share_fairseq": shares[0],
                             "share_zoo": shares[1]})


def profile(cfg, work, sides, py_spy):
    """One scoring call and one batch-1 generation of each side, profiled: fairseq under py-spy
    (its main thread, native frames: the kernels torch runs on it), the zoo under tf.profiler."""
    found = {}
    for op, op_args in [("score", {"tokens": os.path.join(work, "score_tokens.npy")}),
                        ("generate", {"prompt": os.path.join(work, "prompt_1.npy"), "new_tokens": cfg["new_tokens"]})]:
        logdir, raw = os.path.join(work, f"tfprof_{op}"), os.path.join(work, f"pyspy_{op}.txt")
        shutil.rmtree(logdir, ignore_errors=True)
        found[f"zoo {op}"] = sides["zoo"]("profile", logdir=logdir, what=op, **op_args)
        spy = subprocess.Popen([py_spy, "record", "--pid", str(sides["fairseq"].proc.pid), "--native", "--rate",
                                "200", "--format", "raw", "--output", raw], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
        time.sleep(2)
        answer = sides["fairseq"](op, **op_args)
        spy.send_signal(signal.SIGINT)
        log = spy.communicate()[0].decode(errors="replace")
        answer["frames"] = pyspy_summary(raw) if os.path.exists(raw) else f"py-spy wrote nothing: {log[-500:]}"
        found[f"fairseq {op}"] = answer
    return found


def pyspy_summary(path, top=15):
    """From py-spy's raw (collapsed) output: `{"leaf": [(frame, share)], "python": [(function,
    share)]}`: the share of samples in each innermost frame, and in each innermost Python frame."""
    leaf, python = collections.Counter(), collections.Counter()
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            if count.isdigit():
                frames = stack.split(";")
                py = [frame for frame in frames if ".py" in frame]
                leaf[frames[-1]] += int(count)
                python[py[-1] if py else "(no Python frame)"] += int(count)
    total = sum(leaf.values()) or 1
    return {name: [(k, v / total) for k, v in counts.most_common(top)] for name, counts in
            (("leaf", leaf), ("python", python))}


def markdown(results):
    lines = [f"command: `{results['command']}`", f"CPU: {results['cpu']}, {results['threads']} threads per side", "",
             *throughput(results)]
    lines += [line for name, found in (results.get("profile") or {}).items() if (line := profile_line(name, found))]
    conv = results.get("conversion", {})
    if "convert_s" in (c := conv.get("full", {})):
        lines.append(f"conversion of the full checkpoint ({c['checkpoint'].get('bytes', 0) / 2**20:,.0f} MiB): "
                     f"{c['convert_s']:.1f} s, peak RSS {c['convert_peak_rss_mib']:,.0f} MiB; preset directory "
                     f"{c['preset_bytes'] / 2**20:,.0f} MiB")
    if "export" in conv:
        e, fresh = conv["export"], conv["export"]["fresh_process"]
        lines.append(f"zoo export: {e['export_s']:.1f} s, {e['bytes'] / 2**20:,.0f} MiB on disk; a fresh process loads "
                     f"it in {fresh['load_s']:.1f} s, score_ids answers {fresh['score_lengths']} finite scores "
                     f"({fresh['score_first_call_s']:.1f} s, first call), generate answers {fresh['generate_text']!r} "
                     f"({fresh['generate_first_call_s']:.1f} s, first call)")
    return "\n".join(lines)


def throughput(results):
    """The lines of the throughput table, its exactness and cost per token, and the limits measured."""
    limit, scoring, generation = results["machine_limit"], results["scoring"], results["generation"]
    rows = [[r["what"], f"{r['fairseq']:,.1f}", f"{r['zoo']:,.1f}", f"{r['ratio']:.2f}×",
             "-" if r["share_zoo"] is None else f"{r['share_fairseq']:.0%} / {r['share_zoo']:.0%}"]
            for r in results["table"]]
    lines = [f"machine limit measured in the same run: matmul {limit['matmul_gflops']:.0f} GFLOP/s, "
             f"copy {limit['copy_gbs']:.1f} GB/s", "",
             harness.markdown_table(["measurement", "fairseq:", "zoo:", "zoo/fairseq:",
                                     "share of limit (fairseq / zoo):"], rows),
             "", f"scoring: max |zoo − fairseq| log-probability {scoring['max_abs_diff']:.2e}; greedy tokens "
                 "equal: " + ", ".join(f"batch {b}: {g['same_tokens']:.0%}" for b, g in generation.items()),
             f"counted from the architecture: scoring {scoring['flops_per_token'] / 1e6:,.1f} MFLOP per token "
             "(targets in the tail clusters: " + ", ".join(f"{s:.1%}" for s in scoring["cluster_shares"])
             + f"), training {results['training']['flops_per_token'] / 1e6:,.1f} MFLOP per token, batch-1 "
             f"generation {next(iter(generation.values()))['bytes_per_token'] / 1e6:,.0f} MB of weights per token"]
    for kind, key, unit in (("matmul", "gflops", "GFLOP/s"), ("copy", "gbs", "GB/s")):
        parts = [f"{side} {answers[0].get('library', '')} {statistics.median(a[key] for a in answers):.1f}"
                 for phase in (kind, kind + "_after") for side, answers in results["limits"].get(phase, {}).items()]
        lines.append(f"{kind} limit ({unit}; before and after the measurements): " + ", ".join(parts))
    return lines


def profile_line(name, found):
    """A profiled call's line: tf.profiler's op types, or py-spy's frames (None when py-spy wrote nothing)."""
    if "ops" in found:
        top = ", ".join(f"{k.strip()} {share:.0%}" for k, _, share in found["ops"][:10])
        return f"profile, {name} ({found['s']:.2f} s; tf.profiler, share of op self-time): {top}"
    if not isinstance(found.get("frames"), dict):
        return None
    leaf, python = (", ".join(f"{k} {share:.0%}" for k, share in found["frames"][part][:n])
                    for part, n in (("leaf", 8), ("python", 6)))
    return (f"profile, {name} ({found['s']:.2f} s; py-spy, share of samples): innermost frames: {leaf}; "
            f"innermost Python frames: {python}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        harness.serve(ZooWorker(int(sys.argv[2])), {"ready": True, "pid": os.getpid()})
    elif sys.argv[1:2] == ["--export-check"]:
        harness.answer(export_check, sys.argv[2])
    else:
        main(sys.argv[1:])
