"""The composed buffer (`jaxrl_fast.replay.tiered.make_buffer`): the `Buffer` fields with and
without L3, the `l3_tier` hand-over, and a tiered training run through the fused loop."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from conftest import assert_learned_probe_chain, tiny_config

from jaxrl_fast.config import ReplayConfig
from jaxrl_fast.loop import make_train
from jaxrl_fast.replay import make_buffer, make_l3
from jaxrl_fast.run.train import train
from jaxrl_fast.types import Transition

E = 2


def _example(obs_shape=(1,)):
    z = lambda dt: jnp.zeros((E,), dt)  # noqa: E731
    return Transition(
        jnp.zeros((E, *obs_shape), jnp.float32), z(jnp.int32), z(jnp.float32), z(bool), z(bool),
        z(bool),
    )  # fmt: skip


L3_ON = dict(l3="host", l3_capacity=160 * E, l3_share=0.5)


def test_buffer_holds_functions_and_axes_only():
    """No host object (store, layout) rides on `Buffer`: an L3 buffer's fields are functions,
    the seed axes (0 / None leaves) and the single-device flag."""
    config = ReplayConfig(capacity=40 * E, batch_size=8, **L3_ON)
    buf = make_buffer(config, _example(), num_seeds=2, sync_every=2)
    try:
        for name, value in buf._asdict().items():
            if name == "seed_axes":
                leaves = jax.tree.leaves(value, is_leaf=lambda x: x is None)
                assert leaves and set(leaves) <= {0, None}, name
            elif name == "single_device":
                assert value is True
            else:
                assert callable(value), name
    finally:
        buf.close()


def test_without_l3_spill_is_identity_and_host_side_is_empty():
    buf = make_buffer(ReplayConfig(capacity=8 * E, batch_size=4), _example())
    state = buf.add(buf.init(), _example())
    assert buf.spill(state) is state and state.l3 is None
    assert buf.counters(state) == {} and buf.report({}, None) == {}
    assert buf.close() is None and not buf.single_device


def test_with_l3_buffer_holds_no_host_state_but_closes_its_store():
    config = ReplayConfig(capacity=40 * E, batch_size=8, **L3_ON)
    tier = make_l3(config, _example(), num_seeds=2, sync_every=2)
    buf = make_buffer(config, _example(), num_seeds=2, sync_every=2, l3_tier=tier)
    assert buf.single_device and not tier.store.closed
    state = jax.eval_shape(buf.init)
    assert set(jax.eval_shape(buf.counters, state)) >= {"rows_sampled", "l3_rows_sampled"}
    buf.close()
    assert tier.store.closed


def test_l3_tier_built_for_other_arguments_is_rejected():
    config = ReplayConfig(capacity=40 * E, batch_size=8, **L3_ON)
    tier = make_l3(config, _example(), num_seeds=2, sync_every=2)
    with pytest.raises(ValueError, match=r"l3_tier was built for .*\(2, 2, \(1,\)"):
        make_buffer(config, _example(), num_seeds=3, sync_every=2, l3_tier=tier)
    with pytest.raises(ValueError, match="l3_tier was built for"):
        make_buffer(config, _example((2,)), num_seeds=2, sync_every=2, l3_tier=tier)
    tier.store.close()


@pytest.mark.slow
@pytest.mark.learning
def test_tiered_run_compiles_once_and_learns_probe_chain():
    cfg = tiny_config(
        total_env_steps=8_080,
        num_chunks=4,
        eval_episodes=4,
        replay=dict(capacity=160, l3="host", l3_capacity=800, l3_share=0.25, spill_block=4096),
    )
    fns = make_train(cfg)
    run = jax.jit(fns.run_chunk, donate_argnums=0)
    runner = jax.jit(fns.init)(jax.random.split(jax.random.key(0), 2))
    for _ in range(2):
        runner, m = run(runner)
    assert run._cache_size() == 1
    fns.buffer.close()

    result = train(cfg, progress=False)
    rec = result.history[-1]["replay"]
    assert rec["blocks_spilled"] > 0 and rec["l3_read_calls"] > 0
    # 25% of each batch is asked of L3; reset rows drawn there are not transitions and are
    # replaced by L2 rows (probe-chain episodes are short, so about a third of rows are resets).
    assert all(0.75 <= h < 0.9 for h in rec["l2_hit_rate"])
    assert_learned_probe_chain(result, cfg)
