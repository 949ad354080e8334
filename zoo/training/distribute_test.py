"""Strategy names, TF_CONFIG checking and the chief rule (no cluster is started here)."""

import json

import pytest

from zoo.training import distribute
from zoo.tools.cli import main

GOOD = {"cluster": {"worker": ["host1:2222", "host2:2222"]}, "task": {"type": "worker", "index": 1}}


def test_good_tf_config_is_returned_as_parsed():
    assert distribute.parse_tf_config(json.dumps(GOOD)) == GOOD
    with_chief = {"cluster": {"chief": ["a:1"], "worker": ["b:2"]}, "task": {"type": "chief", "index": 0}}
    assert distribute.parse_tf_config(json.dumps(with_chief)) == with_chief


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"cluster": {"worker": ["a:1"]}', "TF_CONFIG is not valid JSON"),
        ("[1, 2]", 'must be a JSON object with a "cluster"'),
        ('{"task": {"type": "worker", "index": 0}}', 'must be a JSON object with a "cluster"'),
        ('{"cluster": {"workers": ["a:1"]}, "task": {"type": "workers"}}', "has a job 'workers'"),
        ('{"cluster": {"worker": "a:1"}, "task": {"type": "worker"}}', '"host:port" addresses'),
        ('{"cluster": {"worker": ["a"]}, "task": {"type": "worker"}}', '"host:port" addresses'),
        ('{"cluster": {"worker": ["a:1"]}}', "\"task\" must name this process's job"),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}', "one of 'worker'"),
        ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 2}}',
         r"index must be an integer in \[0, 1\]"),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": "0"}}', "got '0'"),
    ],
)
def test_malformed_tf_config_is_one_clear_sentence(text, message):
    with pytest.raises(ValueError, match=message) as info:
        distribute.parse_tf_config(text)
    assert "\n" not in str(info.value)


def test_unknown_strategy_names_the_known_ones():
    with pytest.raises(ValueError, match="Unknown strategy 'mirror'; expected one of default, mirrored, "
                                         "multi_worker_mirrored"):
        distribute.get_strategy("mirror")


def test_default_strategy_process_is_its_own_chief():
    strategy = distribute.get_strategy("default")
    assert distribute.is_chief(strategy) and distribute.task(strategy) == (None, None)
    assert not distribute.is_multi_worker(strategy)


@pytest.mark.parametrize(
    "argv, env, message",
    [
        (["--strategy", "tpu"], None, "zoo: error: Unknown strategy 'tpu'; expected one of default, "
                                      "mirrored, multi_worker_mirrored."),
        (["--strategy", "multi_worker_mirrored"], "{not json", "zoo: error: TF_CONFIG is not valid JSON"),
        (["--global-batch-size", "0"], None, "zoo: error: global_batch_size must be an integer >= 1, got 0."),
    ],
)
def test_cli_reports_bad_distribution_settings_in_one_line(argv, env, message, tmp_path, capsys, monkeypatch):
    if env is not None:
        monkeypatch.setenv("TF_CONFIG", env)
    code = main(["train", "--preset", "gcnn-ptb", "--data", "ptb", "--out", str(tmp_path / "x"), *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(message) and err.count("\n") == 1
    assert not (tmp_path / "x").exists()  # nothing written


def test_the_former_zoo_distribute_warns_and_is_the_training_module():
    import zoo

    with pytest.warns(DeprecationWarning, match="zoo.training.distribute"):
        former = zoo.distribute
    assert former is distribute
    with pytest.raises(AttributeError, match="no attribute 'distributed'"):
        zoo.distributed
