"""`zoo reproduce`: the papers' experiments, measured on this machine and set beside the papers'
figures (installed as `zoo.tools.reproduce`).

    zoo reproduce --list                             name, what it measures, the paper's figure
    zoo reproduce NAME [--quick] [--out results/] [--repeats N] [--minutes M]
    zoo reproduce NAME --redraw [--out results/]    NAME.json's figures and NAME.png again from its units
    zoo reproduce --results [--out results/] [--results-file RESULTS.md]

A run writes `OUT/NAME.json` (every figure measured beside the paper's, the raw timings, the
machine, the exact command, the git commit) and `OUT/NAME.png`. It is resumable: each measured
unit (one timed repeat of one model in one mode, say) goes into `OUT/NAME.partial.json` as soon
as it is done, and a rerun with the same settings measures only the units that are missing; the
partial file is removed once the run is complete. `--quick` runs the same code on tiny models and
inputs in seconds (a smoke test for CI: its figures say nothing about the paper).
`--results` rewrites RESULTS.md (default: beside OUT, i.e. at the repository root for
`results/`) from OUT/*.json, one row per figure.

An experiment is a module with `NAME`, `DESCRIPTION`, `PAPER` (the figure it reproduces),
`settings(quick, repeats)`, `units(settings)`, `run(settings, pending, save, log, done)` (`done`:
the units already measured),
`figures(settings, units)`, `extras(settings, units)` and `plot(result, path)`; `EXPERIMENTS`
maps its name to the module's import path (or `module:ATTRIBUTE`, an object with those
attributes: the training-curve experiments of `zoo.tools.reproduce_curves`). This module imports neither TensorFlow nor
matplotlib: the experiments do, when they run.
"""

import datetime
import glob
import importlib
import json
import os
import platform
import shlex
import subprocess
import sys

EXPERIMENTS = {
    "table4": "zoo.tools.reproduce_table4",
    "figure3": "zoo.tools.reproduce_curves:FIGURE3",
    "figure5": "zoo.tools.reproduce_curves:FIGURE5",
    "figure6": "zoo.tools.reproduce_curves:FIGURE6",
    "ptb-sentence": "zoo.tools.reproduce_curves:PTB_SENTENCE",
    "table7": "zoo.tools.reproduce_curves:TABLE7",
}
DEFAULT_OUT = "results"
RESULTS_FILE = "RESULTS.md"


def experiment(name):
    """The experiment module `name`, or a ValueError naming the known ones."""
    if name not in EXPERIMENTS:
        raise ValueError(f"Unknown experiment {name!r}; known experiments: {', '.join(sorted(EXPERIMENTS))} "
                         "(zoo reproduce --list).")
    module, _, attribute = EXPERIMENTS[name].partition(":")
    module = importlib.import_module(module)
    return getattr(module, attribute) if attribute else module


def list_experiments():
    """`[(name, description, paper figure)]` of every experiment."""
    return [(name, experiment(name).DESCRIPTION, experiment(name).PAPER) for name in EXPERIMENTS]


# ---- the record of a run ---------------------------------------------------------------------
def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def cpu_model():
    from zoo.tools.benchmarks.common import cpu_model as _cpu_model

    return _cpu_model()


def machine():
    """What the figures were measured on. The load average shows whether the machine was shared."""
    info = {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        with open("/proc/meminfo") as f:
            info["memory_gib"] = round(int(f.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    if "tensorflow" in sys.modules:  # the experiments import it; --results does not need it
        import keras
        import tensorflow as tf

        info["tensorflow"] = tf.__version__
        info["keras"] = keras.version()
        info["gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
    return info


def load_average():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def git_state():
    """The commit of the checkout this code runs from (or of the working directory), and the
    tracked files that differ from it."""
    here = os.path.dirname(os.path.abspath(__file__))
    for where in (here, os.getcwd()):
        try:
            commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True,
                                    check=True, timeout=20).stdout.strip()
            changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                                     capture_output=True, text=True, check=True, timeout=20).stdout.split("\n")
            return {"commit": commit, "modified": sorted(line[3:] for line in changed if line.strip())}
        except (OSError, subprocess.SubprocessError):
            continue
    return {"commit": "unknown (not a git checkout)", "modified": []}


def command_line(name, quick=False, out=DEFAULT_OUT, repeats=None, minutes=None):
    """The command that reproduces a run, as a user types it."""
    words = ["zoo", "reproduce", name]
    if quick:
        words.append("--quick")
    if out != DEFAULT_OUT:
        words += ["--out", out]
    if repeats is not None:
        words += ["--repeats", str(repeats)]
    if minutes is not None:
        words += ["--minutes", f"{minutes:g}"]
    return shlex.join(words)


def write_json(path, data):
    """Written to a temporary file and renamed, so that an interrupted write leaves the old file."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


# ---- running an experiment -----------------------------------------------------------------------
def reproduce(name, out=DEFAULT_OUT, quick=False, repeats=None, command=None, log=print, minutes=None):
    """Runs experiment `name` (reusing the units of an interrupted run with the same settings) and
    writes OUT/NAME.json and OUT/NAME.png. Returns the result dict."""
    exp = experiment(name)
    if minutes is None:
        settings = exp.settings(quick=quick, repeats=repeats)
    elif getattr(exp, "TIMED_BY_MINUTES", False):
        settings = exp.settings(quick=quick, repeats=repeats, minutes=minutes)
    else:
        raise ValueError(f"--minutes sets the training budget of a curve experiment (figure3, figure5, figure6), "
                         f"not of {name} (its runs are a number of passes over the data).")
    os.makedirs(out, exist_ok=True)
    partial_path = os.path.join(out, f"{name}.partial.json")
    partial = None
    if os.path.exists(partial_path):
        try:
            with open(partial_path) as f:
                partial = json.load(f)
        except (OSError, json.JSONDecodeError):
            log(f"{partial_path} is unreadable; starting afresh.")
        if partial is not None and partial.get("settings") != settings:
            log(f"{partial_path} was measured with other settings; starting afresh.")
            partial = None
    if partial is None:
        partial = {"experiment": name, "settings": settings, "sessions": [], "units": {}}
    session = {"started_at": now(), "command": command or command_line(name, quick, out, repeats, minutes),
               "git": git_state(), "load_average_start": load_average()}
    partial["sessions"].append(session)
    units = partial["units"]
    wanted = exp.units(settings)
    pending = [key for key in wanted if key not in units]
    log(f"{name}: {len(wanted) - len(pending)} of {len(wanted)} units reused from {partial_path}, "
        f"{len(pending)} to measure.")
    write_json(partial_path, partial)

    def save(key, record):
        record = dict(record, measured_at=now(), session=len(partial["sessions"]) - 1)
        units[key] = record
        write_json(partial_path, partial)

    if pending:
        exp.run(settings, pending, save, log, done=dict(units))
    missing = [key for key in wanted if key not in units]
    if missing:
        raise RuntimeError(f"{name}: the experiment did not measure {len(missing)} units ({missing[0]}, ...).")
    session["finished_at"] = now()
    session["load_average_end"] = load_average()

    result = {
        "experiment": name,
        "description": exp.DESCRIPTION,
        "paper": exp.PAPER,
        "quick": bool(quick),
        "command": partial["sessions"][-1]["command"],
        "git": partial["sessions"][-1]["git"],
        "machine": machine(),
        "settings": settings,
        "sessions": partial["sessions"],
        "plot": f"{name}.png",
        "units": {key: units[key] for key in wanted},
    }
    _write(exp, result, out, log)
    os.remove(partial_path)
    return result


def _write(exp, result, out, log):
    """Derives the figures (and the experiment's extras) from the units, then writes NAME.json and NAME.png."""
    settings, units = result["settings"], result["units"]
    result["figures"] = exp.figures(settings, units)
    result.update(exp.extras(settings, units))
    result["paper_figures"] = {f["id"]: f["paper"] for f in result["figures"] if f.get("paper") is not None}
    json_path = os.path.join(out, f"{result['experiment']}.json")
    write_json(json_path, result)
    exp.plot(result, os.path.join(out, result["plot"]))
    log(f"wrote {json_path} and {os.path.join(out, result['plot'])}")


def redraw(name, out=DEFAULT_OUT, log=print):
    """Derives OUT/NAME.json's figures and redraws OUT/NAME.png from the units it holds, measuring
    nothing (after a change to how figures are derived or drawn); says so in the JSON."""
    exp = experiment(name)
    path = os.path.join(out, f"{name}.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"No {path} to redraw: run `zoo reproduce {name}` first.")
    with open(path) as f:
        result = json.load(f)
    result.setdefault("redrawn", []).append({"at": now(), "git": git_state()})
    _write(exp, result, out, log)
    return result


# ---- RESULTS.md ----------------------------------------------------------------------------------
def _number(x, unit=""):
    if x is None:
        return "—"
    if unit == "ppl":  # perplexities: one decimal (108.7 and 109.3 must not both read 109)
        return f"{x:,.1f}"
    if unit == "x":
        return f"{x:.2g}×" if abs(x) < 1 else f"{x:.2f}×" if abs(x) < 10 else f"{x:.1f}×"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def _comparison(figure):
    ours, paper = figure.get("ours"), figure.get("paper")
    if ours is None or paper is None or paper == 0:
        return "—"
    if figure.get("comparable") is False:  # a trend on another corpus: the ratio would mean nothing
        return f"— (ours {figure.get('ours_hardware')}, paper {figure.get('paper_hardware')})"
    text = _number(ours / paper, "x")
    if figure.get("paper_hardware") and figure.get("paper_hardware") != figure.get("ours_hardware"):
        text += f" (ours {figure.get('ours_hardware')}, paper {figure['paper_hardware']})"
    return text


def results_markdown(results, results_dir):
    """RESULTS.md from a list of result dicts (`results_dir` holds their plots, relative to RESULTS.md)."""
    lines = ["# Results", "",
             "The papers' figures beside ours, one row per figure, written by `zoo reproduce --results` from "
             "`results/*.json` (do not edit by hand). Each experiment's JSON holds the raw timings, the machine, "
             "the command and the commit; rerun the command to measure again.", ""]
    for r in sorted(results, key=lambda r: (r["experiment"], r.get("folder", ""))):
        m = r.get("machine", {})
        where = (f"{m.get('cpu_model', '?')}, {m.get('cores', '?')} cores, TensorFlow {m.get('tensorflow', '?')}, "
                 f"Keras {m.get('keras', '?')}")
        # a resumed run has one session per invocation; each may have run at its own commit
        commits = []
        for session in r.get("sessions") or [{"git": r.get("git", {})}]:
            git = session.get("git", {})
            label = f"`{git.get('commit', '?')[:12]}`" + (f" + {len(git['modified'])} modified files"
                                                          if git.get("modified") else "")
            if label not in commits:
                commits.append(label)
        redrawn = r.get("redrawn") or []
        where_dir = "/".join(part for part in (results_dir, r.get("folder")) if part)
        plot = f"{where_dir}/{r['plot']}" if where_dir else r["plot"]
        folder = f" (in {results_dir or '.'}/{r['folder']}/)" if r.get("folder") else ""
        lines += [f"## {r['experiment']}{folder}: {r['paper']}", "", r["description"], ""]
        if r.get("quick"):
            lines += ["**Quick smoke-test run (tiny models and inputs): these figures say nothing about the paper.**", ""]
        lines += [f"Measured {r['sessions'][-1].get('finished_at', '?')} on {where}; "
                  + ("commit " if len(commits) == 1 else f"{len(commits)} sessions at commits ") + ", ".join(commits)
                  + (f"; figures redrawn at `{redrawn[-1]['git']['commit'][:12]}`" if redrawn else "")
                  + f"; command `{r['command']}`; plot [{r['plot']}]({plot}).", ""]
        if r.get("notes"):
            lines += [f"- {note}" for note in r["notes"]] + [""]
        lines += ["| figure | paper | ours | ours / paper | command | plot |",
                  "| --- | ---: | ---: | ---: | --- | --- |"]
        for f in r["figures"]:
            unit = f.get("unit", "")
            paper = _number(f.get("paper"), unit)
            if f.get("paper") is not None and f.get("paper_hardware"):
                paper += f" ({f['paper_hardware']})"
            ours = _number(f.get("ours"), unit)
            if f.get("ours") is not None and f.get("ours_hardware"):
                ours += f" ({f['ours_hardware']})"
            label = f["label"] + (f" [{unit}]" if unit and unit not in ("x", "ppl") else "")
            lines.append(f"| {label} | {paper} | {ours} | {_comparison(f)} | `{r['command']}` | "
                         f"[{r['plot']}]({plot}) |")
        lines.append("")
    return "\n".join(lines)


def write_results(out=DEFAULT_OUT, results_file=None, log=print):
    """Rewrites RESULTS.md (default: in OUT's parent folder) from OUT/*.json and OUT/*/*.json (runs
    with other settings, or on other hardware, written with `--out OUT/SUBFOLDER`). Returns its path."""
    paths = sorted(p for p in glob.glob(os.path.join(out, "*.json")) + glob.glob(os.path.join(out, "*", "*.json"))
                   if not p.endswith(".partial.json"))
    results = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        if isinstance(data, dict) and "figures" in data and "experiment" in data:
            folder = os.path.relpath(os.path.dirname(path), out)
            if folder != ".":
                data["folder"] = folder.replace(os.sep, "/")
            results.append(data)
    if not results:
        raise ValueError(f"No experiment results in {out!r} (run `zoo reproduce NAME` first).")
    results_file = results_file or os.path.join(os.path.dirname(os.path.abspath(out)), RESULTS_FILE)
    relative = os.path.relpath(os.path.abspath(out), os.path.dirname(os.path.abspath(results_file)))
    with open(results_file, "w") as f:
        f.write(results_markdown(results, relative.replace(os.sep, "/")))
    log(f"wrote {results_file} ({len(results)} experiments, {sum(len(r['figures']) for r in results)} figures)")
    return results_file


# ---- command line (`zoo reproduce`, wired in tools/cli.py) ---------------------------------------
def add_arguments(parser):
    parser.add_argument("name", nargs="?", help="the experiment (zoo reproduce --list)")
    parser.add_argument("--list", action="store_true", help="list the experiments")
    parser.add_argument("--quick", action="store_true", help="tiny models and inputs: a smoke test in seconds")
    parser.add_argument("--out", default=DEFAULT_OUT, help="folder of NAME.json / NAME.png (default results/)")
    parser.add_argument("--repeats", type=int, help="timed repeats per measurement (default: the experiment's)")
    parser.add_argument("--minutes", type=float,
                        help="training minutes per run of a curve experiment (default: the experiment's; a sweep's "
                             "runs get the same fraction of it)")
    parser.add_argument("--redraw", action="store_true",
                        help="derive NAME.json's figures and NAME.png again from its stored units, measuring nothing")
    parser.add_argument("--results", action="store_true", help="rewrite RESULTS.md from OUT/*.json")
    parser.add_argument("--results-file", help="where --results writes (default: RESULTS.md beside OUT)")


def run_from_args(args):
    if args.list:
        for name, description, paper in list_experiments():
            print(f"{name:12s}  {paper}: {description}")
        return
    if args.name:
        if args.repeats is not None and args.repeats < 1:
            raise ValueError(f"--repeats must be at least 1, got {args.repeats}.")
        if args.redraw:
            redraw(args.name, out=args.out)
        else:
            if args.minutes is not None and not args.minutes > 0:
                raise ValueError(f"--minutes must be a number > 0, got {args.minutes:g}.")
            reproduce(args.name, out=args.out, quick=args.quick, repeats=args.repeats, minutes=args.minutes)
    if args.results:
        write_results(args.out, args.results_file)
    if not args.name and not args.results:
        raise ValueError("Name an experiment (zoo reproduce --list), or give --list or --results.")
