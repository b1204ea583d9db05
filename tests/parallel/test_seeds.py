"""Seeds as a batch axis: seed_map against vmap, the choices resolved once, key derivation."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.config import TrainConfig
from jaxrl_fast.parallel.seeds import eval_keys, resolve_choices, seed_map, train_keys


class _State(NamedTuple):
    w: jax.Array  # per seed
    count: jax.Array  # shared by the seeds


def test_seed_map_matches_vmap_with_shared_leaves():
    def fn(state, x, scale):
        w = state.w * scale + jnp.sum(x)
        return _State(w, state.count + 1), {"norm": jnp.sum(w**2)}

    state = _State(jnp.arange(6.0).reshape(3, 2), jnp.array(7))
    x = jnp.arange(12.0).reshape(3, 4)
    axes = (_State(0, None), 0, None)
    out_axes = (_State(0, None), 0)
    want = jax.vmap(fn, in_axes=axes, out_axes=out_axes)(state, x, 2.0)
    got = seed_map(fn, axes, out_axes)(state, x, 2.0)
    # small integers in float32: both forms are exact, so they agree bitwise
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
        np.testing.assert_array_equal(a, b)
    assert got[0].count.shape == () and int(got[0].count) == 8
    np.testing.assert_array_equal(got[0].w[:, 0], [6 * 1 + 0, 22 + 4, 38 + 8])


def test_seed_map_rejects_axes_of_the_wrong_structure():
    with pytest.raises(ValueError, match="in_axes"):
        seed_map(lambda a, b: a, (0,), 0)(jnp.zeros(2), jnp.zeros(2))


def test_cpu_auto_maps_nature_seeds_and_picks_canonical_grads():
    nature = TrainConfig().replace(network={"kind": "nature"}, num_seeds=2)
    assert tuple(resolve_choices(nature, "cpu")) == ("map", "conv_canonical_grads")
    one = nature.replace(num_seeds=1)
    assert tuple(resolve_choices(one, "cpu")) == ("vmap", "conv_canonical_grads")
    vmapped = nature.replace(seed_loop="vmap")
    assert tuple(resolve_choices(vmapped, "cpu")) == ("vmap", "patches")
    assert resolve_choices(nature.replace(network={"conv_impl": "conv"}), "cpu").conv_impl == "conv"
    assert resolve_choices(TrainConfig().replace(num_seeds=2), "cpu").seed_loop == "vmap"  # MLP


def test_choices_off_the_cpu_and_for_the_unfused_loop():
    nature = TrainConfig().replace(network={"kind": "nature"}, num_seeds=4)
    assert tuple(resolve_choices(nature, "gpu")) == ("vmap", "conv")
    assert tuple(resolve_choices(nature, "cpu", fused=False)) == ("vmap", "conv")


def test_keys_are_per_seed_and_evaluation_keys_differ():
    cfg = TrainConfig().replace(num_seeds=3, seed=5)
    keys, ev = jax.random.key_data(train_keys(cfg)), jax.random.key_data(eval_keys(cfg))
    assert keys.shape[0] == 3 and ev.shape[0] == 3
    assert len({tuple(k) for k in np.asarray(keys)} | {tuple(k) for k in np.asarray(ev)}) == 6
    # the documented derivation, which the fused loop and the baseline both use
    want = jax.random.key_data(jax.random.split(jax.random.key(5), 3))
    np.testing.assert_array_equal(keys, want)
