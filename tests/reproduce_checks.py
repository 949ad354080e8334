"""What the tests of `zoo reproduce` share (tools/reproduce/*_test.py and
tools/reproduce/experiments/*_test.py import it as `tests.reproduce_checks`): the PNG signature, a
training run's record with a chosen final perplexity, and `zoo reproduce NAME` with every variant's
training replaced by one. Not part of the installed package."""

import json
import os

from zoo.tools import cli, reproduce
from zoo.tools.reproduce import curves


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def fake_record(label, final, steps=100, diverged=None, **extra):
    curve = [{"step": s, "seconds": s * 0.5, "val_perplexity": p, "train_perplexity": p * 1.1, **extra}
             for s, p in ((steps // 2, final * 1.5), (steps, final))]
    return {"label": label, "params": 1000, "curve": curve[: 1 if diverged else 2], "steps": steps,
            "seconds": steps * 0.5, "tokens_per_second": 4096.0, "best_val_perplexity": final * (1.5 if diverged else 1),
            "final_val_perplexity": None if diverged else final, "diverged": diverged, "run_dir": None,
            "planned_steps": None, "log_tail": []}


def run_with_fake_training(monkeypatch, tmp_path, name, finals, calls=None):
    """`zoo reproduce NAME` (full settings) with each variant's training replaced by a made-up
    record whose final validation perplexity is `finals[key]` (None: diverged)."""
    def fake(exp_name, key, variant, settings, run_dir, log):
        if calls is not None:
            calls.append((key, variant))
        final = finals[key]
        return fake_record(variant["label"], final or 500.0,
                           diverged={"step": 51, "seconds": 25.0, "message": "nan"} if final is None else None)

    monkeypatch.setattr(curves, "train_curve", fake)
    monkeypatch.setenv("ZOO_REPRODUCE_RUNS", str(tmp_path / "runs"))
    return reproduce.reproduce(name, out=str(tmp_path / "results"), log=lambda *a: None)


def quick_result(name, folder):
    """`zoo reproduce NAME --quick --out FOLDER/results`: (that folder, its NAME.json read back)."""
    out = os.path.join(str(folder), "results")
    assert cli.main(["reproduce", name, "--quick", "--out", out]) == 0
    with open(os.path.join(out, f"{name}.json")) as f:
        return out, json.load(f)
