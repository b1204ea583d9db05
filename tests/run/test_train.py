"""The host shell (`train`): chunking changes no numbers, seeds, the chunk log, warnings."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from conftest import tiny_config

from jaxrl_fast.run.train import train


def _params(result):
    return [np.asarray(x) for x in jax.tree.leaves(result.runner.seeds.agent.params)]


@pytest.mark.slow
@pytest.mark.gpu
def test_chunked_equals_unchunked_bitwise():
    one = train(tiny_config(num_chunks=1), progress=False)
    many = train(tiny_config(num_chunks=4), progress=False)
    assert one.env_steps == many.env_steps == 880
    for a, b in zip(_params(one), _params(many), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(one.final_return, many.final_return)


@pytest.mark.slow
def test_prime_block_count_warns_with_a_better_total():
    cfg = tiny_config(total_env_steps=80 + 211 * 4, num_chunks=None, num_seeds=1)  # prime
    assert cfg.chunks == 1
    with pytest.warns(UserWarning, match=r"211 training blocks.*total_env_steps=960 \(220 b"):
        result = train(cfg, progress=False)
    assert len(result.history) == 1
    better = cfg.replace(total_env_steps=960)
    assert better.chunks == 20


@pytest.mark.slow
@pytest.mark.gpu
def test_seeds_are_independent_and_reproducible():
    a = train(tiny_config(num_chunks=2), progress=False)
    b = train(tiny_config(num_chunks=2), progress=False)
    c = train(tiny_config(num_chunks=2, seed=1), progress=False)
    pa, pb, pc = _params(a), _params(b), _params(c)
    for x, y in zip(pa, pb, strict=True):
        np.testing.assert_array_equal(x, y)  # same seed, same numbers
    # the two vmapped seeds of one run differ (own init, exploration and sampling)
    assert any(not np.array_equal(x[0], x[1]) for x in pa)
    assert any(not np.array_equal(x, z) for x, z in zip(pa, pc, strict=True))


@pytest.mark.slow
@pytest.mark.learning
def test_unsafe_rbg_runs_are_reproducible_other_streams_and_still_learn():
    from conftest import assert_learned_probe_chain

    cfg = tiny_config(total_env_steps=8_080, num_chunks=1, eval_episodes=4, prng_impl="unsafe_rbg")
    a, b = train(cfg, progress=False), train(cfg, progress=False)
    for x, y in zip(_params(a), _params(b), strict=True):
        np.testing.assert_array_equal(x, y)  # same program, same inputs
    assert str(jax.random.key_impl(a.runner.seeds.key)) == "unsafe_rbg"
    threefry = train(cfg.replace(prng_impl="threefry2x32"), progress=False)
    assert any(not np.array_equal(x, y) for x, y in zip(_params(a), _params(threefry), strict=True))
    assert_learned_probe_chain(a, cfg)
    np.testing.assert_allclose(a.final_return, [1.0, 1.0])


def test_metrics_report_episodes(tiny):
    result = train(tiny, progress=False)
    assert len(result.history) == tiny.chunks
    last = result.history[-1]
    # probe-chain episodes are exactly 2 steps long
    np.testing.assert_allclose(last["episode_length"], [2.0, 2.0])
    assert all(e > 0 for e in last["episodes"])


@pytest.mark.slow
def test_init_compiled_for_speed_gives_the_default_builds_state():
    from jaxrl_fast.loop import make_train
    from jaxrl_fast.parallel.seeds import train_keys
    from jaxrl_fast.run.programs import init_compiler_options

    flag = "jax_disable_most_optimizations"  # on as the tests compile (conftest)
    was = jax.config.values[flag]
    try:
        jax.config.update(flag, False)
        assert init_compiler_options("cpu") == {"xla_backend_optimization_level": 1}
        jax.config.update(flag, True)  # least optimisation asked for: not raised to level 1
        assert init_compiler_options("cpu") is None
    finally:
        jax.config.update(flag, was)

    cfg = tiny_config(num_seeds=2)
    fns = make_train(cfg)
    keys = train_keys(cfg)
    lowered = jax.jit(fns.init).lower(keys)
    level_1 = {"xla_backend_optimization_level": 1}  # what a CPU run at the default level uses
    fast = lowered.compile(compiler_options=level_1)(keys)
    default = lowered.compile()(keys)

    def leaves(runner):
        is_key = lambda x: jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)  # noqa: E731
        return [
            np.asarray(jax.random.key_data(x) if is_key(x) else x) for x in jax.tree.leaves(runner)
        ]

    floats = 0
    for a, b in zip(leaves(fast), leaves(default), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        if np.issubdtype(a.dtype, np.floating):
            floats += a.size
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
        else:  # keys, counters, flags: integer work, exact under any build
            np.testing.assert_array_equal(a, b)
    assert floats > 1000  # the parameters were compared
