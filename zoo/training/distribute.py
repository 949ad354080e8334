"""Choosing a `tf.distribute` strategy by name, and who the chief of a job is.

The names are those of Model Garden's `distribute_utils`: `default` (no distribution: one
device, or whatever strategy is already in scope), `mirrored` (every local GPU, or the CPU;
synchronous all-reduce on one machine) and `multi_worker_mirrored` (the same across machines,
collective all-reduce over gRPC). A multi-worker job is configured by `TF_CONFIG`, or, under
Slurm with no `TF_CONFIG`, by `tf.distribute.cluster_resolver.SlurmClusterResolver`.
"""

import json
import os

import tensorflow as tf

from zoo.layers.validation import check_int

STRATEGIES = ("default", "mirrored", "multi_worker_mirrored")
TASK_TYPES = ("chief", "worker", "ps", "evaluator")


def parse_tf_config(text):
    """`TF_CONFIG` as a dict, checked the way `MultiWorkerMirroredStrategy` will read it.

    Raises one `ValueError` naming what is wrong: not JSON, no `cluster`, a job that is not a
    list of "host:port" addresses, a `task` whose type is not a job of the cluster, or whose
    index is not one of that job's.
    """
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"TF_CONFIG is not valid JSON ({e.msg} at character {e.pos}): {text!r}.") from None
    if not isinstance(config, dict) or not isinstance(config.get("cluster"), dict) or not config["cluster"]:
        raise ValueError(
            'TF_CONFIG must be a JSON object with a "cluster" of jobs, e.g. '
            '{"cluster": {"worker": ["host1:2222", "host2:2222"]}, "task": {"type": "worker", "index": 0}}; '
            f"got {text!r}."
        )
    for job, addresses in config["cluster"].items():
        if job not in TASK_TYPES:
            raise ValueError(f"TF_CONFIG's cluster has a job {job!r}; jobs are {', '.join(TASK_TYPES)}.")
        if (not isinstance(addresses, list) or not addresses
                or not all(isinstance(a, str) and a.rpartition(":")[2].isdigit() for a in addresses)):
            raise ValueError(
                f'TF_CONFIG\'s job {job!r} must be a non-empty list of "host:port" addresses, got {addresses!r}.'
            )
    task = config.get("task")
    if not isinstance(task, dict) or task.get("type") not in config["cluster"]:
        jobs = ", ".join(repr(j) for j in config["cluster"])
        raise ValueError(
            f'TF_CONFIG\'s "task" must name this process\'s job, one of {jobs}, as '
            f'{{"type": "worker", "index": 0}}; got {task!r}.'
        )
    index = task.get("index", 0)
    count = len(config["cluster"][task["type"]])
    check_int("TF_CONFIG's task index", index, 0, count - 1,
              bounds=f"[0, {count - 1}] (job {task['type']!r} has {count} addresses)")
    return config


def get_strategy(name="default"):
    """The strategy called `name`; see the module docstring. Create it before any other
    TensorFlow work: a multi-worker strategy configures the collective runtime at start-up."""
    if name not in STRATEGIES:
        raise ValueError(f"Unknown strategy {name!r}; expected one of {', '.join(STRATEGIES)}.")
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    resolver = None
    if os.environ.get("TF_CONFIG", "").strip():
        parse_tf_config(os.environ["TF_CONFIG"])
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    elif "SLURM_JOB_ID" in os.environ and "SLURM_PROCID" in os.environ:
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver()
    return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)


def task(strategy):
    """`(task_type, task_id)` of this process in a multi-worker job, `(None, None)` otherwise."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return None, None
    return resolver.task_type, resolver.task_id


def is_chief(strategy):
    """Whether this process writes the run's files: the `chief` task if the cluster has one,
    else worker 0; a process outside any cluster is its own chief."""
    task_type, task_id = task(strategy)
    if task_type is None:
        return True
    if task_type == "chief":
        return True
    jobs = strategy.cluster_resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and "chief" not in jobs


def is_multi_worker(strategy):
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
