"""The host shell: `train(config)` compiles the fused loop once, runs it in chunks, shows
progress, keeps the chunk log, checks the loss for NaN/inf between chunks, and returns a
`TrainResult`. It never changes the numbers: any `num_chunks` gives bitwise the same parameters
for the same seed. The loop itself is `jaxrl_fast.loop`.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from typing import Any, Callable, Mapping, Sequence

import jax
import numpy as np
import tqdm

from jaxrl_fast import checkpoint, parallel
from jaxrl_fast.agent.schedules import budget_warnings
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.config import hparams as hparams_mod
from jaxrl_fast.loop import RunnerState, TrainFns, make_train
from jaxrl_fast.loop.resolve import ResolvedRun, bind_env, resolve
from jaxrl_fast.run import files as run_files
from jaxrl_fast.run.chunk_log import ChunkLog, check_finite  # noqa: F401 (check_finite: re-exported)
from jaxrl_fast.run.metrics import MetricsWriter
from jaxrl_fast.run.programs import Compiled, Evaluator, compile_programs
from jaxrl_fast.run.result import TrainResult
from jaxrl_fast.run.sweep import SweepResult
from jaxrl_fast.run.sweep import plan as sweep_plan


def train(
    config: TrainConfig | ResolvedRun,
    *,
    progress: bool = True,
    on_chunk: Callable[[dict], None] | None = None,
    env: Any = None,
    devices: Sequence[jax.Device] | None = None,
    run_dir: str | os.PathLike | None = None,
    resume: bool | str = False,
    checkpoint_every: int | None = None,
    keep: int = 3,
    force_config: bool = False,
    sweep: Mapping[Any, Sequence[Any]] | None = None,
    seeds_per_point: int = 1,
    extensions: Sequence[Callable] = (),
) -> TrainResult | SweepResult:
    """Train `config.num_seeds` agents in one compiled program and evaluate them; or, with
    `sweep`, `seeds_per_point` agents per point of a hyperparameter sweep, in one program.

    The shell compiles `init`, `run_chunk` (donating the runner) and the evaluation (in a
    background thread, while the chunks run) once, runs `config.chunks` chunks while showing
    progress, checks the loss for NaN/inf between chunks, and never changes the numbers: any
    `num_chunks` gives bitwise the same parameters for the same seed.

    Args:
      config: the run, or a `ResolvedRun` of it (`jaxrl_fast.loop.resolve.resolve`).
      progress: show a live progress bar (env steps, env-steps/s, mean episode return).
      on_chunk: called after each chunk with that chunk's record (a dict).
      env: optional env to train on instead of `config.env.name` (with a `TrainConfig`): one's
        own gymnax `Environment` instance or `(Environment, EnvParams)` pair (the run's config
        then names it "user:<its name>": `envs.custom`), a jaxrl_fast `Env` or a `SeededEnv`.
      devices: devices to spread the seeds over (default: all local devices); the most that
        divide `num_seeds` are used, with no communication between them. On a CPU call
        `jaxrl_fast.parallel.use_cpu_cores()` first to get one device per core. A seed's
        numbers match a one-device run to float rounding (XLA vectorises the smaller per-device
        batch differently), not bitwise; learning amplifies such differences over a long run.
      run_dir: a new directory for the run's files (`jaxrl_fast.run.metrics`): config.json with
        the library versions, metrics.jsonl / metrics.csv (a row per chunk per seed, written as
        chunks end), summary.json with each seed's `params_sha256`, and `checkpoints/`
        (orbax) of the whole train state. In a multi-process run every process passes the
        same `run_dir` (a directory they all see): each saves and restores its own shards,
        and process 0 writes the other files.
      resume: True: continue the run in `run_dir` from its newest checkpoint (same config, else
        a `ValueError` naming the differing fields); the remaining chunks give bitwise the
        parameters of a run that never stopped (gymnax envs). `run_dir` must exist (a typo is
        a `FileNotFoundError`, not a new run); one without a checkpoint yet starts from step 0,
        and stderr says which of the two happened. "or_start": the same, but a missing
        `run_dir` starts a new run there (one command for a job that may be requeued).
      checkpoint_every: env steps per seed between checkpoints (rounded to whole chunks;
        default: about 10% of the run); the last chunk is always saved.
      keep: checkpoints kept (the newest).
      force_config: when resuming, accept a config that differs from the run's in fields of
        `config.RESUME_OVERRIDABLE` only (no shape changes); config.json then records the change
        under "forced", and the run is no longer bitwise the uninterrupted one.
      sweep: dotted field names to lists of values, crossed as a grid (a tuple of names takes
        zipped tuples): `{"dqn.learning_rate": [1e-4, 3e-4], "dqn.gamma": [0.95, 0.99]}`. Only
        fields that change no shape or code path (`hparams.SWEEPABLE`); all points run as one
        program, compiled once (`jaxrl_fast.run.sweep`). `config.num_seeds` is then ignored.
      seeds_per_point: seeds per sweep point; seed k of every point starts from the same key.
      extensions: builders of loop extensions added after the library's
        (`builder(LoopParts) -> Extension | None`, `jaxrl_fast.loop.extension`). They are not
        recorded in the run directory: a resumed run must be given the same ones.

    Returns:
      A `TrainResult`; with `sweep`, a `SweepResult` (`.points`: values, per-seed final
      returns, mean and 95% confidence interval per point; `.result` the `TrainResult`).

    Raises:
      FloatingPointError: the loss became non-finite (the message names the chunk and seeds).
      ValueError: `run_dir` is a file, cannot be written or already holds a run (before
        anything compiles).
    """
    wall = time.perf_counter()
    run, plan, devices = _resolve_run(config, env, sweep, seeds_per_point, devices)
    progress = progress and parallel.is_main()
    resume = run_files.check_resume(run_dir, resume)
    saver, directory, on_chunk = run_files.run_directory(
        run_dir, run.config, plan, on_chunk, resume, force_config, checkpoint_every, keep
    )
    if plan is not None:
        run_files.check_sweep_run(run.config, plan, run_dir, resume)
    kinds = None if plan is None else hparams_mod.kinds_of(plan.hparams)
    fns = make_train(run, kinds=kinds, extensions=extensions)
    if saver is not None:  # the replay's host arrays go into the checkpoints too
        saver.host_state = fns.buffer.host_state
        saver.load_host_state = lambda arrays, runner: fns.buffer.load_host_state(
            arrays, runner.seeds.replay
        )
    try:
        compiled = compile_programs(fns, devices, plan)
        result = _run(
            fns,
            compiled,
            wall,
            progress=progress,
            on_chunk=on_chunk,
            saver=saver,
            metrics=directory,
        )
    finally:
        fns.buffer.close()
    if run_dir is not None:
        params = result.runner.seeds.agent.params
        if jax.process_count() > 1:
            params = parallel.to_host(params)  # a collective: every process takes part
        if directory is not None:
            directory.finish(result.summary(), params, result.history)
    if plan is None:
        return result
    swept = SweepResult.from_result(plan, result)
    if run_dir is not None and parallel.is_main():
        swept.write(run_dir)
    return swept


def _resolve_run(config, env, sweep, seeds_per_point, devices):
    """`(run, plan, devices)`: one's own gymnax env named in the config, the sweep planned (every
    point's config validated), the devices chosen and the run resolved; then the warnings
    about its budget. Nothing compiles here."""
    plan = None
    if not isinstance(config, ResolvedRun):  # one's own gymnax env becomes a name in the config
        config, env = bind_env(config, env)
    if sweep is not None:
        if isinstance(config, ResolvedRun):
            raise ValueError("train(sweep=...) takes a TrainConfig, not a ResolvedRun")
        plan = sweep_plan(config, sweep, seeds_per_point)
        config = plan.config
    if devices is None:  # every process's devices in a multi-process run
        devices = jax.devices() if jax.process_count() > 1 else jax.local_devices()
    devices = list(devices)
    run = config if isinstance(config, ResolvedRun) else resolve(config, env=env, device=devices[0])
    _warn_if_few_chunks(run.config)
    for line in budget_warnings(run.config):  # a shrunk preset's schedules
        warnings.warn(line, UserWarning, stacklevel=4)
    return run, plan, devices


def _warn_if_few_chunks(config: TrainConfig) -> None:
    """Warn when the automatic chunking gives little progress (a block count with no divisor
    near 20, e.g. a prime), naming a total_env_steps that chunks well."""
    if config.num_chunks is not None or config.num_blocks < 20 or config.chunks >= 5:
        return
    blocks = round(config.num_blocks / 20) * 20
    better = config.learning_starts + blocks * config.train_frequency
    warnings.warn(
        f"{config.num_blocks} training blocks have no divisor near 20, so the run is one of "
        f"{config.chunks} host call(s): progress, the learning curve and NaN checks come only "
        f"{config.chunks} time(s). total_env_steps={better} ({blocks} blocks) gives 20 chunks; "
        f"or set num_chunks.",
        UserWarning,
        stacklevel=4,
    )


def _restart_envs(fns: TrainFns, restored: RunnerState, fresh: RunnerState) -> RunnerState:
    """A restored runner whose envs are `fresh`'s (just reset by `init`), for envs whose state
    cannot be saved (envpool); the replay keeps its rows (`Buffer.restart_envs`)."""
    axes = fns.buffer.seed_axes
    restart = jax.jit(jax.vmap(fns.buffer.restart_envs, in_axes=(axes, axes), out_axes=axes))
    seeds = restored.seeds._replace(
        replay=restart(restored.seeds.replay, fresh.seeds.replay),
        env_state=fresh.seeds.env_state,
        obs=fresh.seeds.obs,
    )
    runner = restored._replace(seeds=seeds)
    return jax.tree.map(lambda x, like: jax.device_put(x, like.sharding), runner, fresh)


def _eval_due(config: TrainConfig, before: int, after: int) -> bool:
    """Whether the chunk from `before` to `after` env steps (per seed) is evaluated: it is the
    last, or it reaches a multiple of `eval_every`."""
    if config.eval_every is None:
        return False
    return (
        after >= config.total_env_steps or after // config.eval_every > before // config.eval_every
    )


def _run(
    fns: TrainFns,
    compiled: Compiled,
    wall: float,
    *,
    progress: bool,
    on_chunk,
    saver: checkpoint.Checkpointer | None = None,
    metrics: MetricsWriter | None = None,
) -> TrainResult:
    """Run init and every chunk, log them, evaluate, and gather the `TrainResult`."""
    config = fns.run.config
    bar = _progress_bar(config, progress)
    t = time.perf_counter()
    runner = compiled.init(compiled.keys, compiled.seed_ids, compiled.hparams)
    if progress:
        for line in fns.run.describe():
            bar.write(line)
    log = ChunkLog(fns, bar, on_chunk, t)
    runner, start, env_steps = _resume(fns, runner, log, bar, saver, metrics)
    evaluator = Evaluator(compiled)
    runner, env_steps, final, evaluations = _run_chunks(
        fns, compiled, evaluator, runner, log, saver, start, env_steps
    )
    jax.block_until_ready(runner)
    run_time = time.perf_counter() - t
    # the first chunk this call ran (a resumed run's first chunk ran in another process)
    first_chunk_time = log.history[start]["elapsed_s"] if start < config.chunks else run_time
    bar.close()

    t, waited = time.perf_counter(), evaluator.compile_wait_s
    final_return = np.asarray(parallel.to_host(evaluator(runner) if final is None else final))
    eval_time = time.perf_counter() - t - (evaluator.compile_wait_s - waited)
    return TrainResult(
        config=config,
        runner=runner,
        final_return=final_return,
        train_return=np.asarray(log.history[-1]["episode_return"], dtype=np.float64),
        history=log.history,
        env_steps=env_steps,
        compile_time_s=compiled.compile_time_s + evaluator.compile_wait_s,
        run_time_s=run_time,
        first_chunk_time_s=first_chunk_time,
        eval_time_s=eval_time,
        wall_time_s=time.perf_counter() - wall,
        num_devices=compiled.num_devices,
        precision=fns.run.precision.describe(),
        fp32_fallback_env_steps=log.fallback_at,
        spec=fns.run.env.spec,
        resumed_env_steps=log.resumed_env_steps,
        resumed_chunks=start,
        evaluations=evaluations + (final is None and config.eval_episodes > 0),
    )


def _progress_bar(config: TrainConfig, progress: bool) -> tqdm.tqdm:
    seeds_word = "seeds" if config.num_seeds > 1 else "seed"
    return tqdm.tqdm(
        total=config.total_env_steps,
        desc=f"{config.env.name} x{config.num_seeds} {seeds_word}",
        unit="step",
        unit_scale=True,
        disable=not progress,
        dynamic_ncols=True,
    )


def _resume(
    fns: TrainFns,
    runner: RunnerState,
    log: ChunkLog,
    bar: tqdm.tqdm,
    saver: checkpoint.Checkpointer | None,
    metrics: MetricsWriter | None,
) -> tuple[RunnerState, int, int]:
    """`(runner, first chunk, env steps per seed)`: the latest checkpoint's when `saver` resumes
    from one (its chunk log and replay counters into `log`, its metrics rows kept), else the
    fresh `runner`'s at the end of the prefill."""
    config = fns.run.config
    restored = None if saver is None else saver.restore_latest(runner)
    if restored is None:
        if saver is not None and saver.resume and parallel.is_main():
            tqdm.tqdm.write(
                f"resume: {saver.directory} holds no checkpoint yet, so the run starts from env "
                "step 0 there",
                file=sys.stderr,
            )
        log.resumed_env_steps = 0
        return runner, 0, config.learning_starts
    fresh, (runner, record, start) = runner, restored
    # the hyperparameters are this call's (a forced config's new values take effect)
    agents = runner.seeds.agent.replace(hparams=fresh.seeds.agent.hparams)
    runner = runner._replace(seeds=runner.seeds._replace(agent=agents))
    if not fns.run.env.state_saved:
        runner = _restart_envs(fns, runner, fresh)
        tqdm.tqdm.write(
            f"resume: the {config.env.name} envs' state cannot be saved (envpool's emulators), "
            f"so the envs start new games; the replay is kept (its newest {config.replay.n_step} "
            "row(s) per env leave sampling: their next observations were never stored)",
            file=sys.stderr,
        )
    log.history, env_steps = list(record["history"]), record["env_steps"]
    # the replay's counters at the checkpoint: the next chunk reports its own interval
    log.resume_counters(parallel.to_host(fns.buffer.counters(runner.seeds.replay)))
    if metrics is not None:
        metrics.keep_chunks_before(start)
    bar.update(env_steps)
    if parallel.is_main():  # with or without the progress bar: where the run goes on from
        tqdm.tqdm.write(
            f"resumed from the checkpoint after {start} of {config.chunks} chunks "
            f"({env_steps:,} env steps per seed): {saver.directory}/{start}",
            file=sys.stderr,
        )
    log.resumed_env_steps = env_steps
    return runner, start, env_steps


def _run_chunks(fns, compiled, evaluator, runner, log, saver, start, env_steps):
    """Run chunks `start ..` and record them: `(runner, env steps, the last chunk's evaluation
    or None, evaluations run)`.

    Chunk k+1 is dispatched before chunk k's metrics are read, so the device never waits on the
    host (except after a chunk that is checkpointed: the next chunk donates the saved buffers).
    An evaluation is dispatched after the chunk it evaluates and before the next one, which
    donates the runner it reads (the runtime orders the two).
    """
    config = fns.run.config
    steps_per_chunk = config.blocks_per_chunk * config.train_frequency
    pending, final, evaluations = None, None, 0
    for chunk in range(start, config.chunks):
        runner, metrics = compiled.run_chunk(runner)
        due = _eval_due(config, env_steps, env_steps + steps_per_chunk)
        env_steps += steps_per_chunk
        evaluation = evaluator(runner) if due else None
        evaluations += due and config.eval_episodes > 0
        if chunk + 1 == config.chunks:
            final = evaluation
        if pending is not None:
            log.record(*pending)
        pending = (chunk, metrics, env_steps, evaluation)
        if saver is not None:

            def record(pending=pending, env_steps=env_steps):
                log.record(*pending)  # the saved chunk log includes this chunk
                return {"env_steps": env_steps, "history": log.history}

            if saver.after_chunk(chunk + 1, runner, record):
                pending = None
    if pending is not None:
        log.record(*pending)
    return runner, env_steps, final, evaluations
