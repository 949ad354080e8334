"""RESULTS.md, written by `zoo reproduce --results` from results/: one section per experiment
(OUT/*.json, and OUT/*/*.json for runs with other settings), one row per figure, the paper's
figure beside ours; then, under "## Benchmarks", the measured benchmark tables of
OUT/benchmarks/*.md in file-name order."""

import glob
import json
import os
import re

from zoo.tools.reproduce.record import DEFAULT_OUT

RESULTS_FILE = "RESULTS.md"
BENCHMARKS = "benchmarks"  # OUT/benchmarks/*.md: one measured benchmark table a file


def number(x, unit=""):
    """A figure as RESULTS.md prints it."""
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
    text = number(ours / paper, "x")
    if figure.get("paper_hardware") and figure.get("paper_hardware") != figure.get("ours_hardware"):
        text += f" (ours {figure.get('ours_hardware')}, paper {figure['paper_hardware']})"
    return text


def results_markdown(results, results_dir, benchmark_tables=()):
    """RESULTS.md from a list of result dicts (`results_dir` holds their plots, relative to
    RESULTS.md) and the `(file name, text)` of the benchmark tables."""
    lines = ["# Results", "",
             "The papers' figures beside ours, one row per figure, written by `zoo reproduce --results` from "
             "`results/*.json` and `results/benchmarks/*.md` (do not edit by hand). Each experiment's JSON holds the raw timings, the machine, "
             "the command and the commit; rerun the command to measure again.", ""]
    for r in sorted(results, key=lambda r: (r["experiment"], r.get("folder", ""))):
        lines += _experiment_section(r, results_dir)
    lines += _benchmarks_section(benchmark_tables, results_dir)
    return "\n".join(lines)


def _experiment_section(r, results_dir):
    where_dir = "/".join(part for part in (results_dir, r.get("folder")) if part)
    plot = f"{where_dir}/{r['plot']}" if where_dir else r["plot"]
    folder = f" (in {results_dir or '.'}/{r['folder']}/)" if r.get("folder") else ""
    lines = [f"## {r['experiment']}{folder}: {r['paper']}", "", r["description"], ""]
    if r.get("quick"):
        lines += ["**Quick smoke-test run (tiny models and inputs): these figures say nothing about the paper.**", ""]
    lines += [_provenance(r, plot), ""]
    if r.get("notes"):
        lines += [f"- {note}" for note in r["notes"]] + [""]
    lines += ["| figure | paper | ours | ours / paper | command | plot |",
              "| --- | ---: | ---: | ---: | --- | --- |"]
    lines += [_figure_row(f, r, plot) for f in r["figures"]]
    return lines + [""]


def _provenance(r, plot):
    """Where, when, at which commit(s) and by which command a result was measured."""
    m = r.get("machine", {})
    isa = f" ({m['cpu_isa']})" if m.get("cpu_isa") else ""  # recorded since 2026-12-07
    where = (f"{m.get('cpu_model', '?')}{isa}, {m.get('cores', '?')} cores, TensorFlow {m.get('tensorflow', '?')}, "
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
    return (f"Measured {r['sessions'][-1].get('finished_at', '?')} on {where}; "
            + ("commit " if len(commits) == 1 else f"{len(commits)} sessions at commits ") + ", ".join(commits)
            + (f"; figures redrawn at `{redrawn[-1]['git']['commit'][:12]}`" if redrawn else "")
            + f"; command `{r['command']}`; plot [{r['plot']}]({plot}).")


def _figure_row(f, r, plot):
    unit = f.get("unit", "")
    paper = number(f.get("paper"), unit)
    if f.get("paper") is not None and f.get("paper_hardware"):
        paper += f" ({f['paper_hardware']})"
    ours = number(f.get("ours"), unit)
    if f.get("ours") is not None and f.get("ours_hardware"):
        ours += f" ({f['ours_hardware']})"
    label = f["label"] + (f" [{unit}]" if unit and unit not in ("x", "ppl") else "")
    return f"| {label} | {paper} | {ours} | {_comparison(f)} | `{r['command']}` | [{r['plot']}]({plot}) |"


# ---- the benchmark tables --------------------------------------------------------------------------
def benchmark_tables(out):
    """`[(file name, text)]` of OUT/benchmarks/*.md, in file-name order."""
    tables = []
    for path in sorted(glob.glob(os.path.join(out, BENCHMARKS, "*.md"))):
        with open(path, encoding="utf-8") as f:
            tables.append((os.path.basename(path), f.read()))
    return tables


def _benchmarks_section(tables, results_dir):
    if not tables:
        return []
    folder = "/".join(part for part in (results_dir, BENCHMARKS) if part)
    lines = ["## Benchmarks", "",
             f"Measured benchmark tables, one file each in `{folder}/`, copied here as they are (their headings "
             "one level down); the command above each table measures it again.", ""]
    for _, text in tables:
        lines += below_section(text.strip().splitlines()) + [""]
    return lines


HEADING = re.compile(r"^(#{1,6})(\s)")
FENCE = re.compile(r"^\s*(```|~~~)")


def below_section(lines, top=3):
    """Markdown `lines` with their headings moved so that the highest is at level `top` (a file's
    `#` or `##` title becomes a `###` under "## Benchmarks"); fenced code is left alone."""
    levels, fenced = [], False
    for line in lines:
        fenced ^= bool(FENCE.match(line))
        if not fenced and HEADING.match(line):
            levels.append(len(HEADING.match(line).group(1)))
    shift = top - min(levels) if levels else 0
    out, fenced = [], False
    for line in lines:
        fenced ^= bool(FENCE.match(line))
        heading = None if fenced else HEADING.match(line)
        if heading:
            level = min(6, max(1, len(heading.group(1)) + shift))
            line = "#" * level + line[len(heading.group(1)):]
        out.append(line)
    return out


def write_results(out=DEFAULT_OUT, results_file=None, log=print):
    """Rewrites RESULTS.md (default: in OUT's parent folder) from OUT/*.json and OUT/*/*.json (runs
    with other settings, or on other hardware, written with `--out OUT/SUBFOLDER`) and the tables of
    OUT/benchmarks/*.md. Returns its path."""
    results = read_results(out)
    if not results:
        raise ValueError(f"No experiment results in {out!r} (run `zoo reproduce NAME` first).")
    tables = benchmark_tables(out)
    results_file = results_file or os.path.join(os.path.dirname(os.path.abspath(out)), RESULTS_FILE)
    relative = os.path.relpath(os.path.abspath(out), os.path.dirname(os.path.abspath(results_file)))
    with open(results_file, "w") as f:
        f.write(results_markdown(results, relative.replace(os.sep, "/"), tables))
    log(f"wrote {results_file} ({len(results)} experiments, {sum(len(r['figures']) for r in results)} figures"
        + (f", {len(tables)} benchmark tables" if tables else "") + ")")
    return results_file


def read_results(out):
    """The experiments' result dicts of OUT/*.json and OUT/*/*.json, a subfolder's marked as such."""
    paths = sorted(p for p in glob.glob(os.path.join(out, "*.json")) + glob.glob(os.path.join(out, "*", "*.json"))
                   if not p.endswith(".partial.json"))
    results = []
    for path in paths:
        with open(path) as f:
            try:
                data = json.load(f)
            except ValueError as e:
                raise ValueError(f"{path} is not a results file of zoo reproduce (not JSON: {e}); move it out of "
                                 f"{out} or run its experiment again.") from None
        if isinstance(data, dict) and "figures" in data and "experiment" in data:
            folder = os.path.relpath(os.path.dirname(path), out)
            if folder != ".":
                data["folder"] = folder.replace(os.sep, "/")
            results.append(data)
    return results
