"""A run directory's files for `train`: the resume modes, the checkpointer, the metrics writer
(process 0's, refused by every process together) and a sweep's plan."""

from __future__ import annotations

import json
import os
from typing import Any

import jax

from jaxrl_fast import checkpoint, parallel
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.run.metrics import MetricsWriter
from jaxrl_fast.run.sweep import SweepPlan

RESUME_MODES = (False, True, "or_start")


def check_resume(run_dir: Any, resume: bool | str) -> bool:
    """`resume` as a bool, after refusing what cannot be resumed (before anything compiles)."""
    if resume not in RESUME_MODES or not isinstance(resume, (bool, str)):
        raise ValueError(f"resume={resume!r}: one of {RESUME_MODES}")
    if not resume:
        return False
    if run_dir is None:
        raise ValueError(f"resume={resume!r} needs run_dir: the directory of the run to continue.")
    if resume is True and not os.path.isdir(os.fspath(run_dir)):
        raise FileNotFoundError(
            f"resume: {os.fspath(run_dir)!r} does not exist, so there is no run to continue; "
            'to start a new run there if none is, pass resume="or_start" (CLI: '
            "--resume-or-start DIR), or run_dir alone (--run-dir DIR) for a new run."
        )
    return True


def check_sweep_run(config: TrainConfig, plan: SweepPlan, run_dir: Any, resume: bool) -> None:
    """Refuse what a sweep cannot do; on resume, the run directory's sweep must be this one."""
    if config.demo.active and any(
        f in plan.fields for f in ("dqn.gamma", "schedule.gamma_schedule")
    ):
        raise ValueError(
            "sweep: dqn.gamma / schedule.gamma_schedule cannot be swept with demonstrations "
            "(DemoConfig): their n-step rows are staged once, with one gamma."
        )
    if run_dir is None:
        return
    path = os.path.join(os.fspath(run_dir), "sweep_plan.json")
    mine = plan.to_dict()
    if resume and os.path.exists(path):
        with open(path) as f:
            saved = json.load(f)
        if saved != json.loads(json.dumps(mine)):
            raise ValueError(
                f"resume: {run_dir} holds another sweep ({saved['fields']}, "
                f"{len(saved['points'])} points x {saved['seeds_per_point']} seeds); resume "
                "with the same sweep and seeds_per_point."
            )
        return
    os.makedirs(os.fspath(run_dir), exist_ok=True)
    with open(path, "w") as f:
        json.dump(mine, f, indent=2)


def _metrics_writer(
    run_dir: str | os.PathLike | None, config: TrainConfig, resume: bool, force_config: bool
) -> MetricsWriter | None:
    """The run directory's writer, or None without one. In a multi-process run every process
    saves and restores its shards of the checkpoints, process 0 alone writes the metrics files
    and the summary, and when it refuses the directory (e.g. another run's config) every
    process stops, with its error."""
    if run_dir is None:
        return None
    refused = None
    try:
        if parallel.is_main():
            return_value = MetricsWriter(run_dir, config, resume=resume, force_config=force_config)
        else:
            return_value = None
    except ValueError as err:
        refused, return_value = err, None
    if jax.process_count() > 1 and parallel.any_process(refused is not None):
        raise refused or ValueError(
            f"run_dir={os.fspath(run_dir)!r}: process 0 refused the run directory (its error "
            "says why); this process stops with it."
        )
    if refused is not None:
        raise refused
    return return_value


def run_directory(run_dir, config, plan, on_chunk, resume, force_config, checkpoint_every, keep):
    """The run directory's checkpointer and metrics writer (None, None without `run_dir`), and
    the `on_chunk` that logs each chunk's record there before calling the user's."""
    if run_dir is None:
        return None, None, on_chunk
    saver = checkpoint.Checkpointer(
        os.path.join(os.fspath(run_dir), "checkpoints"),
        config,
        every_env_steps=checkpoint_every,
        keep=keep,
        resume=resume,
    )
    directory = _metrics_writer(run_dir, config, resume, force_config)
    if directory is None:
        return saver, None, on_chunk
    if plan is not None:
        directory.hparams = plan.hparams

    def log_then_call(rec: dict) -> None:
        directory.log_chunk(rec)
        if on_chunk is not None:
            on_chunk(rec)

    return saver, directory, log_then_call
