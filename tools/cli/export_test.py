"""`zoo export` end to end: versions 1 then 2 from one preset directory, the default name, the
existing version untouched, and one-sentence errors with exit code 2; `--format litert`
(BASE/NAME/litert/, an existing export untouched, the SavedModel's flags refused)."""

import hashlib
import os

import pytest

from tests.cli_checks import one_sentence_error
from tests.export_checks import vocabulary
from zoo.tools.cli import main
from zoo.tools.cli.export import default_export_name


@pytest.fixture
def preset(tiny_model, word_tokenizer, tmp_path_factory):
    """A training run's best/ preset directory, as `zoo train` leaves it."""
    directory = tmp_path_factory.mktemp("runs") / "tiny-lstm" / "best"
    tiny_model("lstm", tokenizer=word_tokenizer).save_to_preset(str(directory))
    return str(directory)


def _digest(directory):
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(directory)):
        dirs.sort()
        for name in sorted(files):
            h.update(name.encode() + open(os.path.join(root, name), "rb").read())
    return h.hexdigest()


@pytest.mark.ci
def test_export_twice_makes_versions_1_and_2_and_never_touches_1(preset, tmp_path, capsys):
    base = tmp_path / "exports"
    assert main(["export", preset, "--base", str(base)]) == 0
    first = capsys.readouterr().out.strip()
    assert first == str(base / "tiny-lstm" / "1")  # named after the run, not "best"
    before = _digest(first)
    assert main(["export", preset, "--base", str(base)]) == 0
    assert capsys.readouterr().out.strip() == str(base / "tiny-lstm" / "2")
    assert sorted(os.listdir(base / "tiny-lstm")) == ["1", "2"]  # no temporary directory left
    assert _digest(first) == before
    for version in ("1", "2"):
        assert {"saved_model.pb", "variables", "assets", "assets.extra"} <= set(os.listdir(base / "tiny-lstm" / version))

    err = one_sentence_error(["export", preset, "--base", str(base), "--version", "1"], capsys)
    assert err.startswith("zoo: error: Version 1 of 'tiny-lstm' already exists") and "never overwritten" in err
    assert _digest(first) == before


@pytest.mark.parametrize("argv, message", [
    (["export", "{tmp}/nowhere"], "does not exist"),
    (["export", "{tmp}/noconfig"], "has no config.json"),
    (["export", "{preset}", "--base", "{tmp}/e", "--name", ".hidden"], "model name"),
    (["export", "{preset}", "--base", "{tmp}/e", "--version", "0"], "version must be an integer >= 1"),
    (["export", "{preset}", "--base", "{tmp}/e", "--quantize", "int4"], "Unknown quantization mode 'int4'; the zoo's "
                                                                          "models quantize to 'int8'"),
    (["export", "{preset}", "--base", "{tmp}/e", "--head-blocks", "0"], "head_blocks must be an integer in [1, 64], got 0"),
])
def test_bad_export_arguments_give_one_sentence_and_exit_code_2(argv, message, preset, tmp_path, capsys):
    (tmp_path / "noconfig").mkdir()
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{preset}", preset) for a in argv]
    assert message in one_sentence_error(argv, capsys)
    assert not os.path.exists(tmp_path / "e" / ".hidden")
    assert not os.path.exists(tmp_path / "e" / "tiny-lstm")


def test_default_name(tmp_path):
    assert default_export_name(str(tmp_path / "runs" / "gcnn-ptb" / "best")) == "gcnn-ptb"
    assert default_export_name(str(tmp_path / "my lm")) == "my-lm"
    assert default_export_name(str(tmp_path / ".hidden dir")) == "hidden-dir"
    assert default_export_name(str(tmp_path / "runs" / "gcnn-ptb" / "final")) == "final"


def test_a_preset_directory_without_a_vocabulary_is_refused_by_name(tiny_model, tmp_path, capsys):
    tiny_model("lstm").save_to_preset(str(tmp_path / "bare"))
    err = one_sentence_error(["export", str(tmp_path / "bare"), "--base", str(tmp_path / "e")], capsys)
    assert f"{str(tmp_path / 'bare')!r} has no tokenizer" in err
    assert not os.path.exists(tmp_path / "e")


@pytest.mark.ci  # a SavedModel export in int8 (11 s)
def test_export_quantize_int8_writes_int8_variables_and_leaves_the_float_preset_as_it_was(tiny_model, word_tokenizer,
                                                                                            tmp_path, capsys):
    import json

    import tensorflow as tf

    preset = tiny_model("gcnn", tokenizer=word_tokenizer, cutoffs=[5]).save_to_preset(str(tmp_path / "tiny-gcnn"))
    before = _digest(preset)
    assert main(["export", preset, "--base", str(tmp_path / "e"), "--quantize", "int8"]) == 0
    path = capsys.readouterr().out.strip()
    assert _digest(preset) == before
    metadata = json.load(open(os.path.join(path, "assets.extra", "zoo_export.json")))
    assert metadata["config"]["quantization"] == "int8"
    dtypes = {name: tf.train.load_checkpoint(os.path.join(path, "variables", "variables")).get_variable_to_dtype_map()[name]
              for name, shape in tf.train.list_variables(os.path.join(path, "variables", "variables")) if len(shape) >= 2}
    assert dtypes and set(dtypes.values()) == {tf.int8}, dtypes


# ---- zoo export --format litert --------------------------------------------------------------------
@pytest.fixture(scope="module")
def litert_preset(tiny_model, tmp_path_factory):
    """An LSTMP training run's best/ preset directory."""
    directory = tmp_path_factory.mktemp("runs") / "tiny-lstm" / "best"
    tiny_model("lstmp", tokenizer=vocabulary()).save_to_preset(str(directory))
    return str(directory)


@pytest.mark.ci  # two LiteRT conversions through the CLI (16 s); export/litert_test.py converts in the default tier
def test_zoo_export_format_litert_writes_base_name_litert_and_never_changes_it(litert_preset, tmp_path, capsys):
    import json

    from zoo.export import litert

    preset = litert_preset
    base = tmp_path / "exports"
    assert main(["export", preset, "--base", str(base), "--format", "litert"]) == 0
    path = capsys.readouterr().out.strip()
    assert path == str(base / "tiny-lstm" / "litert")
    assert {litert.MODEL_FILE, litert.METADATA_FILE, "vocabulary.txt"} <= set(os.listdir(path))
    mtimes = {name: os.stat(os.path.join(path, name)).st_mtime_ns for name in os.listdir(path)}
    before = _digest(path)
    err = one_sentence_error(["export", preset, "--base", str(base), "--format", "litert"], capsys)
    assert "already exists and is never changed" in err
    assert _digest(path) == before
    assert {name: os.stat(os.path.join(path, name)).st_mtime_ns for name in os.listdir(path)} == mtimes
    assert main(["export", preset, "--base", str(base), "--format", "litert", "--quantize", "int8"]) == 0
    assert capsys.readouterr().out.strip() == str(base / "tiny-lstm" / "litert-int8")
    about = json.load(open(base / "tiny-lstm" / "litert-int8" / litert.METADATA_FILE))
    assert about["quantization"]["mode"] == "int8"
    assert main(["export", preset, "--base", str(base), "--name", "other", "--format", "litert"]) == 0
    assert capsys.readouterr().out.strip() == str(base / "other" / "litert")


@pytest.mark.parametrize("argv, message", [
    (["--format", "onnx"], "Unknown export format 'onnx'; zoo export writes saved_model or litert."),
    (["--format", "litert", "--quantize", "int4"], "Unknown quantization mode 'int4' for --format litert"),
    (["--format", "litert", "--version", "2"], "--version applies to --format saved_model only"),
    (["--format", "litert", "--max-new-tokens", "9", "--head-blocks", "2"],
     "--max-new-tokens, --head-blocks apply to --format saved_model only"),
    (["--format", "litert", "--name", ".hidden"], "model name"),
])
def test_bad_litert_arguments_give_one_sentence(litert_preset, tmp_path, capsys, argv, message):
    preset = litert_preset
    err = one_sentence_error(["export", preset, "--base", str(tmp_path / "e"), *argv], capsys)
    assert message in err
    assert not os.path.exists(tmp_path / "e")
