"""The fused loop (`loop.make_train`): compile once, carry invariance, key reuse, learning,
the seed loop, and one loop for both env kinds."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from conftest import assert_learned_probe_chain, tiny_config

from jaxrl_fast import presets
from jaxrl_fast.envs import make_probe_env
from jaxrl_fast.loop import make_train
from jaxrl_fast.run.train import train


def _keys(n, seed=0):
    return jax.random.split(jax.random.key(seed), n)


@pytest.mark.slow
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


@pytest.mark.slow
def test_run_chunk_has_no_key_reuse(tiny):
    fns = make_train(tiny)
    with jax.debug_key_reuse(True):
        runner = jax.jit(fns.init)(_keys(tiny.num_seeds))
        runner, metrics = jax.jit(fns.run_chunk)(runner)
        jax.block_until_ready(metrics)
    assert np.all(np.isfinite(np.asarray(metrics.loss)))


@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.gpu
def test_fused_loop_learns_probe_chain_q_values():
    cfg = tiny_config(total_env_steps=8_080, num_chunks=1, eval_episodes=4)
    result = train(cfg, progress=False)
    assert_learned_probe_chain(result, cfg)
    np.testing.assert_allclose(result.final_return, [1.0, 1.0])
    # The same agents evaluated with eval_epsilon=1 act uniformly: return 1 half the time.
    explore = make_train(cfg.replace(eval_epsilon=1.0, eval_episodes=400))
    returns = np.asarray(jax.jit(explore.evaluate)(result.runner, _keys(2)))
    assert np.all(np.abs(returns - 0.5) < 0.1), returns


@pytest.mark.slow
@pytest.mark.learning
def test_fused_loop_learns_cartpole():
    cfg = presets.get("cartpole").replace(total_env_steps=100_000, num_seeds=1, eval_episodes=5)
    result = train(cfg, progress=False)
    assert result.final_return[0] >= 150.0, result.final_return


@pytest.mark.slow
def test_seed_loop_map_agrees_with_vmap():
    cfg = tiny_config(total_env_steps=400, num_chunks=1)
    runs = {loop: train(cfg.replace(seed_loop=loop), progress=False) for loop in ("vmap", "map")}
    a, b = (jax.tree.leaves(r.runner.seeds.agent.params) for r in runs.values())
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(runs["vmap"].final_return, runs["map"].final_return)
