"""The compiled programs of a run: `init` and `run_chunk` compiled once (placed on the devices
that hold the seeds, or on a `seed x data` mesh), and the evaluation compiling in a background
thread while the first chunks run (`Evaluator` waits for it when it is first needed)."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any, NamedTuple, Sequence

import jax
import numpy as np
from jax.sharding import PartitionSpec as P

from jaxrl_fast import parallel
from jaxrl_fast.config import hparams as hparams_mod
from jaxrl_fast.loop import RunnerState, TrainFns
from jaxrl_fast.parallel import seeds
from jaxrl_fast.parallel.seeds import SEED_AXIS
from jaxrl_fast.run.sweep import SweepPlan

__all__ = ["Compiled", "Evaluator", "compile_programs", "init_compiler_options"]


class Compiled(NamedTuple):
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
    level 2 (`benchmarks/experiments/ab-quick-init-o1.md`); its run time is a few milliseconds
    either way. Its output matched the default build's bit for bit on every preset tried;
    `tests/run/test_train.py` checks it to a tolerance, as two builds need not agree in the last
    bit. Level 0 would save more but changes the last bits of the initial parameters. Other
    platforms keep their defaults, and so does a process that asked JAX for the least
    optimisation (`jax_disable_most_optimizations`, level 0, as the tests run): raising it to 1
    there took 2-3x as long to compile `init` (by hand: 0.7 s against 0.2 s for a tiny run,
    3.6 s against 1.2 s for MinAtar).

      >>> init_compiler_options("cpu") == (None if _least_optimised() else
      ...                                  {"xla_backend_optimization_level": 1})
      True
      >>> init_compiler_options("gpu") is None
      True
    """
    if platform != "cpu" or _least_optimised():
        return None
    return {"xla_backend_optimization_level": 1}


def _least_optimised() -> bool:
    """Whether JAX was asked to compile with most optimisations off."""
    return bool(jax.config.values.get("jax_disable_most_optimizations", False))


def compile_programs(
    fns: TrainFns, devices: Sequence[Any], plan: SweepPlan | None = None
) -> Compiled:
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
    return Compiled(init, run_chunk, evaluate, keys, ids, eval_keys, len(used), compile_s, hparams)


class Evaluator:
    """Calls the evaluation (compiling in the background) on a runner; counts the time spent
    waiting for its compile."""

    def __init__(self, compiled: Compiled) -> None:
        self.compiled, self.compile_wait_s, self._fn = compiled, 0.0, None

    def __call__(self, runner: RunnerState):
        if self._fn is None:
            t = time.perf_counter()
            self._fn = self.compiled.evaluate.result()
            self.compile_wait_s += time.perf_counter() - t
        return self._fn(runner, self.compiled.eval_keys)
