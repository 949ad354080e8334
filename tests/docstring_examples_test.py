"""The typed public API's docstring examples run (issue: every public entry point has one runnable
example). Each object is one test, so a failure names it; the examples run in their module's
globals, as `python -m doctest` runs them."""

import doctest
import inspect
import sys

import pytest

import zoo
from zoo import layers, samplers
from zoo.export import export_saved_model

METHODS = ("score", "perplexity", "log_probs", "target_log_probs", "decode_step", "generate", "save_to_preset", "quantize")


def public_api():
    objects = {"zoo.load": zoo.load, "zoo.export.export_saved_model": export_saved_model}
    objects.update({f"LanguageModel.{m}": getattr(zoo.LanguageModel, m) for m in METHODS})
    objects.update({f"zoo.layers.{c.__name__}": c for c in (layers.GatedConv1D, layers.AdaptiveSoftmax,
                                                              layers.SparseMoE)})
    # every sampler class, so that a new one is held to the same rule without editing this list
    objects.update({f"zoo.samplers.{c.__name__}": c for c in samplers.SAMPLERS})
    return objects


@pytest.mark.parametrize("name", sorted(public_api()))
def test_the_example_in_the_docstring_runs(name):
    obj = public_api()[name]
    assert ">>>" in (inspect.getdoc(obj) or ""), f"{name}'s docstring has no runnable example"
    module = sys.modules[inspect.unwrap(obj).__module__]
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, module=module, globs=vars(module).copy())
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0 and result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed"


@pytest.mark.parametrize("name", sorted(public_api()))
def test_its_arguments_and_result_are_annotated(name):
    obj = public_api()[name]
    function = obj.__init__ if inspect.isclass(obj) else obj
    signature = inspect.signature(function)
    named = [p for p in signature.parameters.values()
             if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    assert all(p.annotation is not p.empty for p in named), \
        f"{name} leaves {[p.name for p in named if p.annotation is p.empty]} unannotated"
    if not inspect.isclass(obj):
        assert signature.return_annotation is not signature.empty, f"{name} has no return annotation"
    doc = inspect.getdoc(obj) or ""
    assert "Returns" in doc or inspect.isclass(obj), f"{name}'s docstring has no Returns section"
