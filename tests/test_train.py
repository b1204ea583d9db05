"""The fused loop: compile once, carry invariance, chunking, seeds, learning, key reuse."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_learned_probe_chain, tiny_config

from jaxrl_fast import presets
from jaxrl_fast.envs import make_probe_env
from jaxrl_fast.train import make_train, train


def _keys(n, seed=0):
    return jax.random.split(jax.random.key(seed), n)


def test_run_chunk_traces_env_step_once(tiny):
    traces = []
    env = make_probe_env("probe-chain", tiny.env.num_envs, on_step=lambda: traces.append(1))
    fns = make_train(tiny, env=env)
    runner = jax.jit(fns.init)(_keys(tiny.num_seeds))
    run = jax.jit(fns.run_chunk, donate_argnums=0)
    runner, _ = run(runner)
    traced = len(traces)
    assert traced > 0
    runner, _ = run(runner)
    runner, _ = run(runner)
    assert len(traces) == traced, "run_chunk retraced: a carry dtype/shape changed between calls"


def test_run_chunk_keeps_carry_types(tiny):
    fns = make_train(tiny)
    runner = jax.eval_shape(fns.init, _keys(tiny.num_seeds))
    out, metrics = jax.eval_shape(fns.run_chunk, runner)
    spec = lambda t: jax.tree.map(lambda x: (x.shape, x.dtype), t)  # noqa: E731
    assert jax.tree.structure(out) == jax.tree.structure(runner)
    assert spec(out) == spec(runner)
    assert metrics.loss.shape == (tiny.num_seeds,)


def _params(result):
    return [np.asarray(x) for x in jax.tree.leaves(result.runner.seeds.agent.params)]


def test_chunked_equals_unchunked_bitwise():
    one = train(tiny_config(num_chunks=1), progress=False)
    many = train(tiny_config(num_chunks=4), progress=False)
    assert one.env_steps == many.env_steps == 880
    for a, b in zip(_params(one), _params(many), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(one.final_return, many.final_return)


def test_prime_block_count_warns_with_a_better_total():
    cfg = tiny_config(total_env_steps=80 + 211 * 4, num_chunks=None, num_seeds=1)  # prime
    assert cfg.chunks == 1
    with pytest.warns(UserWarning, match=r"211 training blocks.*total_env_steps=960 \(220 b"):
        result = train(cfg, progress=False)
    assert len(result.history) == 1
    better = cfg.replace(total_env_steps=960)
    assert better.chunks == 20


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


def test_run_chunk_has_no_key_reuse(tiny):
    fns = make_train(tiny)
    with jax.debug_key_reuse(True):
        runner = jax.jit(fns.init)(_keys(tiny.num_seeds))
        runner, metrics = jax.jit(fns.run_chunk)(runner)
        jax.block_until_ready(metrics)
    assert np.all(np.isfinite(np.asarray(metrics.loss)))


def test_metrics_report_episodes(tiny):
    result = train(tiny, progress=False)
    assert len(result.history) == tiny.chunks
    last = result.history[-1]
    # probe-chain episodes are exactly 2 steps long
    np.testing.assert_allclose(last["episode_length"], [2.0, 2.0])
    assert all(e > 0 for e in last["episodes"])


@pytest.mark.learning
def test_fused_loop_learns_probe_chain_q_values():
    cfg = tiny_config(total_env_steps=8_080, num_chunks=1, eval_episodes=4)
    result = train(cfg, progress=False)
    assert_learned_probe_chain(result, cfg)
    np.testing.assert_allclose(result.final_return, [1.0, 1.0])
    # The same agents evaluated with eval_epsilon=1 act uniformly: return 1 half the time.
    explore = make_train(cfg.replace(eval_epsilon=1.0, eval_episodes=400))
    returns = np.asarray(jax.jit(explore.evaluate)(result.runner, _keys(2)))
    assert np.all(np.abs(returns - 0.5) < 0.1), returns


@pytest.mark.learning
def test_fused_loop_learns_cartpole():
    cfg = presets.get("cartpole").replace(total_env_steps=100_000, num_seeds=1, eval_episodes=5)
    result = train(cfg, progress=False)
    assert result.final_return[0] >= 150.0, result.final_return


def test_seed_map_matches_vmap_with_shared_leaves():
    from typing import NamedTuple

    from jaxrl_fast.train import _seed_map

    class State(NamedTuple):
        w: jax.Array  # per seed
        count: jax.Array  # shared by the seeds

    def fn(state, x, scale):
        w = state.w * scale + jnp.sum(x)
        return State(w, state.count + 1), {"norm": jnp.sum(w**2)}

    state = State(jnp.arange(6.0).reshape(3, 2), jnp.array(7))
    x = jnp.arange(12.0).reshape(3, 4)
    axes = (State(0, None), 0, None)
    out_axes = (State(0, None), 0)
    want = jax.vmap(fn, in_axes=axes, out_axes=out_axes)(state, x, 2.0)
    got = _seed_map(fn, axes, out_axes)(state, x, 2.0)
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
        np.testing.assert_array_equal(a, b)
    assert got[0].count.shape == ()


def test_seed_loop_map_agrees_with_vmap():
    cfg = tiny_config(total_env_steps=400, num_chunks=1)
    runs = {loop: train(cfg.replace(seed_loop=loop), progress=False) for loop in ("vmap", "map")}
    a, b = (jax.tree.leaves(r.runner.seeds.agent.params) for r in runs.values())
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(runs["vmap"].final_return, runs["map"].final_return)
