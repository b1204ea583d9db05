"""A smaller agent: magnitude pruning and distillation (`jaxrl_fast.trained.compress`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.config import NetworkConfig
from jaxrl_fast.envs import make_env
from jaxrl_fast.trained import compress

SPEC = make_env("CartPole-v1").spec


def _net(hidden):
    return QNetwork.from_config(NetworkConfig(kind="mlp", hidden_sizes=hidden), SPEC)


def _params(hidden, seed=0):
    return _net(hidden).init(jax.random.key(seed), jnp.zeros((1, 4)))


@pytest.mark.slow
def test_global_pruning_zeroes_exactly_the_smallest_kernel_entries():
    params = _params((16, 8))
    pruned = compress.prune_by_magnitude(params, 0.3)
    kernels = lambda p: [x for path, x in jax.tree_util.tree_leaves_with_path(p)  # noqa: E731
                         if path[-1].key == "kernel"]  # fmt: skip
    before = np.concatenate([np.abs(np.asarray(k)).ravel() for k in kernels(params)])
    after = np.concatenate([np.asarray(k).ravel() for k in kernels(pruned)])
    k = round(0.3 * before.size)
    assert np.sum(after == 0) == k
    # every zeroed entry was no larger than every kept one
    assert np.max(before[after == 0]) <= np.min(before[after != 0])
    biases = [
        x for path, x in jax.tree_util.tree_leaves_with_path(pruned) if path[-1].key == "bias"
    ]
    originals = [
        x for path, x in jax.tree_util.tree_leaves_with_path(params) if path[-1].key == "bias"
    ]
    for b, o in zip(biases, originals, strict=True):
        np.testing.assert_array_equal(np.asarray(b), np.asarray(o))


@pytest.mark.slow
def test_layer_pruning_prunes_each_kernel_by_the_fraction():
    pruned = compress.prune_by_magnitude(_params((16, 8)), 0.25, scope="layer")
    for path, x in jax.tree_util.tree_leaves_with_path(pruned):
        if path[-1].key == "kernel":
            assert int(np.sum(np.asarray(x) == 0)) == round(0.25 * x.size)
    total, nonzero = compress.count_params(pruned)
    assert total == 4 * 16 + 16 + 16 * 8 + 8 + 8 * 2 + 2 and nonzero < total


@pytest.mark.parametrize(
    "kwargs, match",
    [(dict(fraction=1.0), r"fraction=1\.0"), (dict(fraction=0.3, scope="row"), r"scope='row'")],
)
def test_bad_pruning_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        compress.prune_by_magnitude(_params((8,)), **kwargs)


@pytest.mark.slow
def test_distillation_matches_the_teacher_and_keeps_pruned_zeros():
    """A small student learns a random teacher's advantages on its states; a pruned copy
    fine-tuned with `keep` keeps its zeros."""
    teacher, tp = _net((32, 32)), _params((32, 32), seed=1)
    obs = jax.random.normal(jax.random.key(2), (2048, 4))
    student, sp0 = _net((16,)), _params((16,), seed=3)
    sp, losses = compress.distil(teacher.apply, tp, student.apply, sp0, obs, steps=2000)
    assert losses[-1] < 0.1 * losses[0]
    q_t, q_s = teacher.apply(tp, obs), student.apply(sp, obs)
    agree = np.mean(np.argmax(np.asarray(q_t), -1) == np.argmax(np.asarray(q_s), -1))
    assert agree > 0.9
    pruned = compress.prune_by_magnitude(tp, 0.5)
    keep = jax.tree.map(lambda x: (x != 0).astype(x.dtype), pruned)
    tuned, _ = compress.distil(teacher.apply, tp, teacher.apply, pruned, obs, steps=200, keep=keep)
    assert compress.count_params(tuned)[1] == compress.count_params(pruned)[1]


@pytest.mark.slow
def test_greedy_return_and_collected_states():
    """A network that always pushes left scores the short episodes of that policy; the
    collected observations have the env's shape."""
    net, params = _net((8,)), _params((8,))
    left = jax.tree.map(jnp.zeros_like, params)
    left["params"]["Dense_1"]["bias"] = jnp.array([1.0, 0.0])  # Q(left) > Q(right) everywhere
    ret = compress.greedy_return(net.apply, left, "CartPole-v1", episodes=16)
    assert 5.0 <= ret <= 15.0  # always-left topples the pole in about 9 steps
    obs = compress.collect_observations(net.apply, params, "CartPole-v1", envs=4, steps=10)
    assert obs.shape == (40, 4)
