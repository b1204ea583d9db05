"""The host shell: `train(config)` compiles the fused loop once, runs it in chunks, shows
progress, keeps the chunk log, checks the loss for NaN/inf between chunks, and returns a
`TrainResult`. It never changes the numbers: any `num_chunks` gives bitwise the same parameters
for the same seed. The loop itself is `jaxrl_fast.loop`.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import sys
import time
import warnings
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import jax
import numpy as np
import tqdm
from jax.sharding import PartitionSpec as P

from jaxrl_fast import checkpoint, parallel, seeds
from jaxrl_fast import hparams as hparams_mod
from jaxrl_fast.chunk_log import ChunkLog, check_finite  # noqa: F401 (check_finite: re-exported)
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.envs import Env
from jaxrl_fast.loop import RunnerState, TrainFns, make_train
from jaxrl_fast.metrics import MetricsWriter
from jaxrl_fast.resolve import ResolvedRun, resolve
from jaxrl_fast.result import TrainResult
from jaxrl_fast.seeds import SEED_AXIS
from jaxrl_fast.sweep import SweepPlan, SweepResult
from jaxrl_fast.sweep import plan as sweep_plan


def train(
    config: TrainConfig | ResolvedRun,
    *,
    progress: bool = True,
    on_chunk: Callable[[dict], None] | None = None,
    env: Env | None = None,
    devices: Sequence[jax.Device] | None = None,
    run_dir: str | os.PathLike | None = None,
    resume: bool = False,
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
      config: the run, or a `ResolvedRun` of it (`jaxrl_fast.resolve.resolve`).
      progress: show a live progress bar (env steps, env-steps/s, mean episode return).
      on_chunk: called after each chunk with that chunk's record (a dict).
      env: optional env to train on instead of `config.env.name` (with a `TrainConfig`).
      devices: devices to spread the seeds over (default: all local devices); the most that
        divide `num_seeds` are used, with no communication between them. On a CPU call
        `jaxrl_fast.parallel.use_cpu_cores()` first to get one device per core. A seed's
        numbers match a one-device run to float rounding (XLA vectorises the smaller per-device
        batch differently), not bitwise; learning amplifies such differences over a long run.
      run_dir: a new directory for the run's files (`jaxrl_fast.metrics`): config.json with
        the library versions, metrics.jsonl / metrics.csv (a row per chunk per seed, written as
        chunks end), summary.json with each seed's `params_sha256`, and `checkpoints/`
        (orbax) of the whole train state. In a multi-process run every process passes the
        same `run_dir` (a directory they all see): each saves and restores its own shards,
        and process 0 writes the other files.
      resume: continue the run in `run_dir` from its newest checkpoint (same config, else a
        `ValueError` naming the differing fields); the remaining chunks give bitwise the
        parameters of a run that never stopped (gymnax envs). Without a checkpoint it starts.
      checkpoint_every: env steps per seed between checkpoints (rounded to whole chunks;
        default: about 10% of the run); the last chunk is always saved.
      keep: checkpoints kept (the newest).
      force_config: when resuming, accept a config that differs from the run's in fields of
        `config.RESUME_OVERRIDABLE` only (no shape changes); config.json then records the change
        under "forced", and the run is no longer bitwise the uninterrupted one.
      sweep: dotted field names to lists of values, crossed as a grid (a tuple of names takes
        zipped tuples): `{"dqn.learning_rate": [1e-4, 3e-4], "dqn.gamma": [0.95, 0.99]}`. Only
        fields that change no shape or code path (`hparams.SWEEPABLE`); all points run as one
        program, compiled once (`jaxrl_fast.sweep`). `config.num_seeds` is then ignored.
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
    plan = None
    if sweep is not None:  # before anything compiles: every point's config is validated
        if isinstance(config, ResolvedRun):
            raise ValueError("train(sweep=...) takes a TrainConfig, not a ResolvedRun")
        plan = sweep_plan(config, sweep, seeds_per_point)
        config = plan.config
    if devices is None:  # every process's devices in a multi-process run
        devices = jax.devices() if jax.process_count() > 1 else jax.local_devices()
    devices = list(devices)
    run = config if isinstance(config, ResolvedRun) else resolve(config, env=env, device=devices[0])
    _warn_if_few_chunks(run.config)
    progress = progress and parallel.is_main()
    if run_dir is None and resume:
        raise ValueError("resume=True needs run_dir: the directory of the run to continue.")
    saver = None
    if run_dir is not None:
        saver = checkpoint.Checkpointer(
            os.path.join(os.fspath(run_dir), "checkpoints"),
            run.config,
            every_env_steps=checkpoint_every,
            keep=keep,
            resume=resume,
        )
    directory = _metrics_writer(run_dir, run.config, resume, force_config)
    if directory is not None and plan is not None:
        directory.hparams = plan.hparams
    if directory is not None:
        user_on_chunk = on_chunk

        def on_chunk(rec: dict) -> None:
            directory.log_chunk(rec)
            if user_on_chunk is not None:
                user_on_chunk(rec)

    if plan is not None:
        _check_sweep_run(run.config, plan, run_dir, resume)
    kinds = None if plan is None else hparams_mod.kinds_of(plan.hparams)
    fns = make_train(run, kinds=kinds, extensions=extensions)
    if saver is not None:  # the L3 tier's host arrays go into the checkpoints too
        saver.host_state = fns.buffer.host_state
        saver.load_host_state = lambda arrays, runner: fns.buffer.load_host_state(
            arrays, runner.seeds.replay
        )
    try:
        compiled = _compile(fns, devices, plan)
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


def _check_sweep_run(config: TrainConfig, plan: SweepPlan, run_dir: Any, resume: bool) -> None:
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
        stacklevel=3,
    )


class _Compiled(NamedTuple):
    """The three compiled programs, the keys placed for them, and what compiling took."""

    init: Any
    run_chunk: Any
    evaluate: concurrent.futures.Future  # the evaluation, compiling in a background thread
    keys: Any  # [S] training keys
    seed_ids: Any  # [S] int32 global seed indices (each seed's env variant)
    eval_keys: Any  # [S] evaluation keys
    num_devices: int
    compile_time_s: float
    hparams: Any  # [S] HParams, placed like the keys


def init_compiler_options(platform: str) -> dict[str, Any] | None:
    """XLA options for the `init` program, which runs once per run.

    On CPU, LLVM's optimisation level 1 compiles it in about half the time of the default
    level 2 (`benchmarks/results/ab-quick-init-o1.md`); its run time is a few milliseconds
    either way. Its output matched the default build's bit for bit on every preset tried;
    `tests/test_train.py` checks it to a tolerance, as two builds need not agree in the last
    bit. Level 0 would save more but changes the last bits of the initial parameters. Other
    platforms keep their defaults.

      >>> init_compiler_options("cpu")
      {'xla_backend_optimization_level': 1}
      >>> init_compiler_options("gpu") is None
      True
    """
    return {"xla_backend_optimization_level": 1} if platform == "cpu" else None


def _compile(fns: TrainFns, devices: Sequence[Any], plan: SweepPlan | None = None) -> _Compiled:
    """Compile init and run_chunk (donating the runner), and start compiling evaluate in a
    background thread; spread over the devices that divide the seeds (one device where the
    seeds cannot be spread). The seeds' `HParams` are an argument of `init` (a sweep's, else
    the config's for every seed), so their values are never compiled in."""
    config = fns.run.config
    keys, eval_keys = seeds.train_keys(config), seeds.eval_keys(config)
    if plan is None:
        hparams = hparams_mod.stack([hparams_mod.hparams_of(config)] * config.num_seeds)
    else:  # seed k of every point starts from the key of seed k of a K-seed run
        hparams = plan.hparams
        keys = seeds.train_keys(config.replace(num_seeds=plan.seeds_per_point))[plan.key_index]
        eval_keys = seeds.eval_keys(config.replace(num_seeds=plan.seeds_per_point))[plan.key_index]
    init_fn, run_fn, eval_fn = fns.init, fns.run_chunk, fns.evaluate
    used = parallel.seed_devices(config.num_seeds, devices)
    if fns.single_device:
        used = used[:1]
    if fns.exchange.active:  # a seed x data mesh; the program's leaves are lanes [D * S]
        mesh = parallel.lane_mesh(config.num_seeds, config.parallel.data, devices)
        used = list(mesh.devices.flat)
        lanes = P((parallel.DATA_AXIS, SEED_AXIS))
        spec = RunnerState(seeds=parallel.lane_specs(fns.seed_axes), block=P())
        init_fn = parallel.shard_over_seeds(fns.init, mesh, (lanes, lanes, lanes), spec)
        run_fn = parallel.shard_over_seeds(fns.run_chunk, mesh, (spec,), (spec, P(SEED_AXIS)))
        eval_fn = parallel.shard_over_seeds(fns.evaluate, mesh, (spec, P(SEED_AXIS)), P(SEED_AXIS))
        # replica d of seed s is lane d * S + s: it starts from seed s's key (and variant)
        ids = np.tile(np.arange(config.num_seeds, dtype=np.int32), config.parallel.data)
        hparams = jax.tree.map(lambda x: parallel.put_global(x[ids], mesh, lanes), hparams)
        keys, ids = keys[ids], parallel.put_global(ids, mesh, lanes)
        keys = parallel.put_global(keys, mesh, lanes)
        eval_keys = parallel.put_global(eval_keys, mesh, P(SEED_AXIS))
    elif len(used) > 1:
        mesh = parallel.seed_mesh(used)
        spec = RunnerState(seeds=parallel.seed_specs(fns.seed_axes), block=P())
        init_fn = parallel.shard_over_seeds(fns.init, mesh, (P(SEED_AXIS),) * 3, spec)
        run_fn = parallel.shard_over_seeds(fns.run_chunk, mesh, (spec,), (spec, P(SEED_AXIS)))
        eval_fn = parallel.shard_over_seeds(fns.evaluate, mesh, (spec, P(SEED_AXIS)), P(SEED_AXIS))
        keys, eval_keys = parallel.put_seeds(keys, mesh), parallel.put_seeds(eval_keys, mesh)
        ids = parallel.put_seeds(np.arange(config.num_seeds, dtype=np.int32), mesh)
        hparams = parallel.put_seeds(hparams, mesh)
    else:
        keys, eval_keys, hparams = jax.device_put((keys, eval_keys, hparams), used[0])
        ids = jax.device_put(np.arange(config.num_seeds, dtype=np.int32), used[0])
    t = time.perf_counter()
    init_jit = jax.jit(init_fn)
    init = init_jit.lower(keys, ids, hparams).compile(
        compiler_options=init_compiler_options(used[0].platform)
    )
    abstract = init_jit.eval_shape(keys, ids, hparams)
    run_chunk = jax.jit(run_fn, donate_argnums=0).lower(abstract).compile()
    compile_s = time.perf_counter() - t
    if config.eval_episodes == 0:  # no evaluation: nothing to compile
        evaluate = concurrent.futures.Future()
        evaluate.set_result(lambda runner, keys: np.full(config.num_seeds, np.nan, np.float32))
    else:  # needed after the first evaluated chunk: compile it while the chunks run
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jaxrl_fast-compile")
        evaluate = pool.submit(lambda: jax.jit(eval_fn).lower(abstract, eval_keys).compile())
        pool.shutdown(wait=False)
    return _Compiled(init, run_chunk, evaluate, keys, ids, eval_keys, len(used), compile_s, hparams)


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


class _Evaluator:
    """Calls the evaluation (compiling in the background) on a runner; counts the time spent
    waiting for its compile."""

    def __init__(self, compiled: _Compiled) -> None:
        self.compiled, self.compile_wait_s, self._fn = compiled, 0.0, None

    def __call__(self, runner: RunnerState):
        if self._fn is None:
            t = time.perf_counter()
            self._fn = self.compiled.evaluate.result()
            self.compile_wait_s += time.perf_counter() - t
        return self._fn(runner, self.compiled.eval_keys)


def _run(
    fns: TrainFns,
    compiled: _Compiled,
    wall: float,
    *,
    progress: bool,
    on_chunk,
    saver: checkpoint.Checkpointer | None = None,
    metrics: MetricsWriter | None = None,
) -> TrainResult:
    """Run init and every chunk, log them, evaluate, and gather the `TrainResult`."""
    config = fns.run.config
    seeds_word = "seeds" if config.num_seeds > 1 else "seed"
    bar = tqdm.tqdm(
        total=config.total_env_steps,
        desc=f"{config.env.name} x{config.num_seeds} {seeds_word}",
        unit="step",
        unit_scale=True,
        disable=not progress,
        dynamic_ncols=True,
    )
    t = time.perf_counter()
    runner = compiled.init(compiled.keys, compiled.seed_ids, compiled.hparams)
    if progress:
        for line in fns.run.describe():
            bar.write(line)
    log = ChunkLog(fns, bar, on_chunk, t)
    steps_per_chunk = config.blocks_per_chunk * config.train_frequency
    env_steps, pending, start = config.learning_starts, None, 0
    restored = None if saver is None else saver.restore_latest(runner)
    if restored is not None:
        fresh, (runner, record, start) = runner, restored
        # the hyperparameters are this call's (a forced config's new values take effect)
        agents = runner.seeds.agent.replace(hparams=fresh.seeds.agent.hparams)
        runner = runner._replace(seeds=runner.seeds._replace(agent=agents))
        if config.env.is_envpool:
            runner = _restart_envs(fns, runner, fresh)
            tqdm.tqdm.write(
                f"resume: envpool cannot save its emulators, so the {config.env.name} envs start "
                f"new games; the replay is kept (its newest {config.replay.n_step} row(s) per "
                "env leave sampling: their next observations were never stored)",
                file=sys.stderr,
            )
        log.history, env_steps = list(record["history"]), record["env_steps"]
        # the replay's counters at the checkpoint: the next chunk reports its own interval
        log.resume_counters(parallel.to_host(fns.buffer.counters(runner.seeds.replay)))
        if metrics is not None:
            metrics.keep_chunks_before(start)
        bar.update(env_steps)
        if progress:
            bar.write(
                f"resumed from the checkpoint after {start} of {config.chunks} chunks "
                f"({env_steps:,} env steps per seed)"
            )
    # Dispatch chunk k+1 before reading chunk k's metrics, so the device never waits on the host
    # (except after a chunk that is checkpointed: the next chunk donates the saved buffers).
    # An evaluation is dispatched after the chunk it evaluates and before the next one, which
    # donates the runner it reads (the runtime orders the two).
    evaluator = _Evaluator(compiled)
    final = None
    for chunk in range(start, config.chunks):
        runner, metrics = compiled.run_chunk(runner)
        due = _eval_due(config, env_steps, env_steps + steps_per_chunk)
        env_steps += steps_per_chunk
        evaluation = evaluator(runner) if due else None
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
    jax.block_until_ready(runner)
    run_time = time.perf_counter() - t
    first_chunk_time = log.history[0]["elapsed_s"]
    bar.close()

    t, waited = time.perf_counter(), evaluator.compile_wait_s
    final_return = np.asarray(parallel.to_host(evaluator(runner) if final is None else final))
    eval_time = time.perf_counter() - t - (evaluator.compile_wait_s - waited)
    compile_time = compiled.compile_time_s + evaluator.compile_wait_s
    return TrainResult(
        config=config,
        runner=runner,
        final_return=final_return,
        train_return=np.asarray(log.history[-1]["episode_return"], dtype=np.float64),
        history=log.history,
        env_steps=env_steps,
        compile_time_s=compile_time,
        run_time_s=run_time,
        first_chunk_time_s=first_chunk_time,
        eval_time_s=eval_time,
        wall_time_s=time.perf_counter() - wall,
        num_devices=compiled.num_devices,
        precision=fns.run.precision.describe(),
        fp32_fallback_env_steps=log.fallback_at,
    )
