"""Shared tiny configs and compiled functions (compile time dominates on CPU)."""

from __future__ import annotations

import collections
import os
import tempfile

# The tests check behaviour, not speed: XLA compiles them without most of its optimisations
# (JAX's `jax_disable_most_optimizations`: XLA:CPU's LLVM level 0, no expensive passes), which
# takes 0.71-0.79 of the time on 2 cores (benchmarks/experiments/tests-xla-level.md).
# Subprocesses inherit it. `JAXRL_FAST_TEST_OPTIMIZED=1` runs the suite at the default level.
# XLA:CPU's older fusion emitters (not the MLIR ones) and one LLVM module per program compile
# the tests' programs in 0.40-0.50 of the time (benchmarks/compile_flags.py; the full suite
# 12.3 -> 7.9 min on 2 cores, benchmarks/results/suite_profile). Subprocesses inherit them.
if os.environ.get("JAXRL_FAST_TEST_OPTIMIZED") != "1":
    os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"
    os.environ["XLA_FLAGS"] = " ".join(
        dict.fromkeys(
            os.environ.get("XLA_FLAGS", "").split()
            + ["--xla_cpu_use_fusion_emitters=false", "--xla_cpu_parallel_codegen_split_count=1"]
        )
    )

import pytest

from jaxrl_fast.config import DQNConfig, EnvConfig, NetworkConfig, ReplayConfig, TrainConfig
from jaxrl_fast.run import compile_cache

# A test's own algorithm module registers its names (a loss, a config section, a preset) when
# imported: only its test imports it, in a fresh process, never the collection of doctests
# (`--doctest-modules` imports every module under tests/), so that no other test's registries
# (and no config a test writes for a child process) hold its names.
collect_ignore = ["loop/toy_algorithm.py"]


def tiny_config(**changes) -> TrainConfig:
    """A probe-chain run small enough to compile and run in a few seconds."""
    base = TrainConfig(
        env=EnvConfig(name="probe-chain", num_envs=4),
        network=NetworkConfig(hidden_sizes=(32,)),
        replay=ReplayConfig(capacity=400, batch_size=16),
        dqn=DQNConfig(learning_rate=1e-3, target_period=40, gamma=0.9),
        total_env_steps=880,
        learning_starts=80,
        train_frequency=4,
        num_seeds=2,
        num_chunks=4,
        eval_episodes=0,  # no evaluation program to compile: tests that read returns ask for it
    )
    return base.replace(**changes)


# The same tiny programs are compiled by many tests: share them through an on-disk compilation
# cache private to this test session (a cache hit returns the identical executable); with
# pytest-xdist (`pytest -n auto`) the workers of one session share it.
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")
if _RUN:
    _CACHE = os.path.join(tempfile.gettempdir(), f"jaxrl_fast_test_xla_{_RUN}")
    os.makedirs(_CACHE, exist_ok=True)
else:
    _CACHE = tempfile.mkdtemp(prefix="jaxrl_fast_test_xla_")
compile_cache.enable(_CACHE)


def child_env(*, cache: bool = True, **extra: str) -> dict[str, str]:
    """The environment of a child Python process a test starts: the CPU platform
    (`JAX_PLATFORMS=cpu`: the children set CPU device counts, `use_cpu_cores(2)`, and build
    meshes of them, which on a GPU machine would otherwise land on its one GPU; `extra` may
    say otherwise), the session's XLA flags (its optimisation level; a forced CPU device count
    dropped, as the child sets its own devices), the session's compilation cache unless
    `cache=False` (a child compiling a program the session already compiled loads it), and
    `extra`."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", **extra}
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f]
    env["XLA_FLAGS"] = " ".join(flags)
    if cache:  # JAX reads its config options from upper-case environment variables
        env["JAX_COMPILATION_CACHE_DIR"] = _CACHE
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.5"
        env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
    return env


def assert_learned_probe_chain(result, cfg) -> None:
    """Every seed's Q-network gives probe-chain's optimal Q-values (to 0.01: a discount of 0.81
    or 1.0 instead of gamma = 0.9 fails)."""
    import jax
    import numpy as np

    from jaxrl_fast.agent.network import QNetwork
    from jaxrl_fast.envs import make_probe_env, optimal_q

    net = QNetwork.for_run(cfg, make_probe_env("probe-chain", 1).spec)
    expected = optimal_q("probe-chain", cfg.dqn.gamma)
    for s in range(cfg.num_seeds):
        params = jax.tree.map(lambda x, s=s: x[s], result.runner.seeds.agent.params)
        q = np.asarray(net.value_head.q_values(net.apply(params, np.eye(2, dtype=np.float32))))
        np.testing.assert_allclose(q, [expected[0], expected[1]], atol=0.01)


def stack_stream(steps, num_envs, starts, *, frame=(2, 3), k=4, seed=0):
    """`[steps, num_envs, *frame, k]` uint8 frame stacks: a new episode (at `(t, e)` in
    `starts`, and at t = 0) shows k copies of its first frame, later steps shift one new frame
    in, as envpool does."""
    import numpy as np

    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, (steps, num_envs, *frame), dtype=np.uint8)
    out = np.zeros((steps, num_envs, *frame, k), np.uint8)
    for e in range(num_envs):
        for t in range(steps):
            if t == 0 or (t, e) in starts:
                out[t, e] = np.repeat(frames[t, e][..., None], k, axis=-1)
            else:
                out[t, e] = np.concatenate([out[t - 1, e][..., 1:], frames[t, e][..., None]], -1)
    return out


# Doctests that compile a training program: outside the fast tier (`pytest -m "not slow"`).
SLOW_DOCTESTS = {
    "jaxrl_fast.loop.loop.make_train",
    "jaxrl_fast.baseline.run.train_unfused",
    "jaxrl_fast.replay.sequence.make_sequence_buffer",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if isinstance(item, pytest.DoctestItem) and item.name in SLOW_DOCTESTS:
            item.add_marker(pytest.mark.slow)
    # The longest files first (`LONGEST`, then by their number of slow tests), each file's tests
    # together and in order: xdist's `--dist loadfile` then hands the long files out first and
    # ends on short ones, and a module's shared fixtures are built once.
    weight = collections.Counter(
        item.path.name for item in items if item.get_closest_marker("slow") is not None
    )
    first = {}
    for i, item in enumerate(items):
        first.setdefault(str(item.path), i)

    def order(item):
        name = item.path.name
        rank = LONGEST.index(name) if name in LONGEST else len(LONGEST)
        return rank, -weight[name], first[str(item.path)]

    items.sort(key=order)


# Files whose tests take the longest on 2 cores (`pytest -n auto --durations=0`, summed per
# file), longest first. xdist keeps this order (`--no-loadscope-reorder` in pyproject.toml; by
# default it would hand out the files with the most tests first and end on the long ones).
LONGEST = (
    "test_gpu_kit.py",  # its rehearsal is the longest single test: started first, it overlaps
    "test_docs_examples.py",
    "test_suites.py",
    "test_suite_training.py",
    "test_recurrent.py",
    "test_envpool.py",
    "test_multiprocess.py",
    "test_claims.py",
    "test_variation.py",
    "test_checkpoint.py",
    "test_cli.py",
    "test_demos.py",
    "test_xla_report.py",
    "test_loop.py",
    "test_data_parallel.py",
    "test_train.py",
    "test_precision.py",
    "test_prioritised.py",
)


@pytest.fixture(scope="session")
def tiny():
    return tiny_config()


class StopRun(Exception):
    """Raised from `on_chunk` to stop a run mid-way (as a dead process would)."""


def stop_at(chunk: int):
    """An `on_chunk` that raises `StopRun` while chunk `chunk` is being logged."""

    def on_chunk(rec):
        if rec["chunk"] == chunk:
            raise StopRun

    return on_chunk


def params_hashes(run_dir) -> list[str]:
    """Each seed's `params_sha256` from a run directory's summary.json."""
    import json
    import os

    with open(os.path.join(run_dir, "summary.json")) as f:
        return [s["params_sha256"] for s in json.load(f)["seeds"]]
