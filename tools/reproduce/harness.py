"""Running an experiment of `zoo reproduce`: its units measured one by one into
OUT/NAME.partial.json (so that an interrupted run resumes where it stopped), then its figures
derived into OUT/NAME.json and drawn into OUT/NAME.png; and `--redraw`, which derives and draws
again from the stored units, measuring nothing."""

import json
import os

from zoo.tools.benchmarks.harness import load_average, machine
from zoo.tools.reproduce.experiments import experiment, experiments
from zoo.files import write_json
from zoo.tools.reproduce.record import DEFAULT_OUT, command_line, git_state, now


def reproduce(name, out=DEFAULT_OUT, quick=False, repeats=None, command=None, log=print, minutes=None):
    """Runs experiment `name` (reusing the units of an interrupted run with the same settings) and
    writes OUT/NAME.json and OUT/NAME.png. Returns the result dict."""
    exp = experiment(name)
    settings = _settings(exp, name, quick, repeats, minutes)
    os.makedirs(out, exist_ok=True)
    partial_path = os.path.join(out, f"{name}.partial.json")
    partial = _resumed(partial_path, settings, log) or {"experiment": name, "settings": settings, "sessions": [],
                                                        "units": {}}
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


def _settings(exp, name, quick, repeats, minutes):
    if minutes is None:
        return exp.settings(quick=quick, repeats=repeats)
    if getattr(exp, "TIMED_BY_MINUTES", False):
        return exp.settings(quick=quick, repeats=repeats, minutes=minutes)
    timed = ", ".join(n for n, e in experiments().items() if getattr(e, "TIMED_BY_MINUTES", False))
    raise ValueError(f"--minutes sets the training budget of a curve experiment ({timed}), "
                     f"not of {name}, whose budget is not set in minutes.")


def _resumed(partial_path, settings, log):
    """The partial record of an interrupted run with the same settings, or None."""
    if not os.path.exists(partial_path):
        return None
    try:
        with open(partial_path) as f:
            partial = json.load(f)
    except (OSError, json.JSONDecodeError):
        log(f"{partial_path} is unreadable; starting afresh.")
        return None
    if partial.get("settings") != settings:
        log(f"{partial_path} was measured with other settings; starting afresh.")
        return None
    return partial


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
    result["description"] = exp.DESCRIPTION  # what the experiment now says it measures (new variants named)
    _write(exp, result, out, log)
    return result
