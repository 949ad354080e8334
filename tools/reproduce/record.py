"""The record of a run of `zoo reproduce`: when, at which commit, by which command. The machine is
described by the measurement harness (`zoo.tools.benchmarks.harness.machine`) and the JSON written
by the library's one atomic writer, `zoo.files.write_json`."""

import datetime
import os
import shlex
import subprocess

from zoo.tools.cli.reproduce import DEFAULT_OUT, QUICK_OUT  # noqa: F401  (the command line's defaults)


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


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


def portable(path, kind):
    """`path` as a reader's checkout names it in a recorded command: from its last folder whose name
    starts with `kind` (`runs`, `corpora`) down, that folder called `kind` (`/work/runs52/a/b` ->
    `runs/a/b`), or `kind/<its last name>` when it has none; this machine's own paths stay out."""
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    top = max((i for i, part in enumerate(parts) if part.startswith(kind)), default=len(parts) - 1)
    return "/".join([kind, *parts[top + 1:]] if parts[top].startswith(kind) else [kind, parts[-1]])


def command_line(name, quick=False, out=DEFAULT_OUT, repeats=None, minutes=None):
    """The command that reproduces a run, as a user types it."""
    words = ["zoo", "reproduce", name]
    if quick:
        words.append("--quick")
    if out != (QUICK_OUT if quick else DEFAULT_OUT):
        words += ["--out", out]
    if repeats is not None:
        words += ["--repeats", str(repeats)]
    if minutes is not None:
        words += ["--minutes", f"{minutes:g}"]
    return shlex.join(words)
