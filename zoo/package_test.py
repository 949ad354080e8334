"""`import zoo` alone gives every subpackage the docs spell out from it: `zoo.export` and
`zoo.training` load on first use (docs/serving.md's `zoo.export.export_saved_model(...)` after
`import zoo` failed with an AttributeError before)."""

import subprocess
import sys

import pytest


@pytest.mark.ci  # a fresh Python process importing TensorFlow (9 s)
def test_the_subpackages_are_attributes_after_import_zoo_alone():
    code = ("import sys, zoo; assert 'zoo.export' not in sys.modules; "
            "print(zoo.export.export_saved_model.__name__, zoo.training.train.__name__, zoo.data.read_lines.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["export_saved_model", "train", "read_lines"]


def test_an_unknown_attribute_is_still_an_attribute_error():
    import pytest

    import zoo

    with pytest.raises(AttributeError, match="^module 'zoo' has no attribute 'exports'$"):
        zoo.exports  # noqa: B018
