"""Q-network shapes, parameter counts and input handling."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.agent.network import Conv, QNetwork
from jaxrl_fast.config import NetworkConfig
from jaxrl_fast.envs.base import EnvSpec


def _spec(shape, dtype=jnp.uint8, actions=6):
    return EnvSpec(
        name="frames", obs_shape=shape, obs_dtype=dtype, num_actions=actions, num_envs=1,
        max_episode_steps=100,
    )  # fmt: skip


def _count(params):
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))


@pytest.mark.slow
def test_nature_cnn_shapes_and_parameter_count():
    net = QNetwork.from_config(
        NetworkConfig(kind="nature", hidden_sizes=(512,)), _spec((84, 84, 4))
    )
    params = net.init(jax.random.key(0), jnp.zeros((1, 84, 84, 4), jnp.uint8))
    # Mnih et al. 2015: 84 -> 20 (8x8/4) -> 9 (4x4/2) -> 7 (3x3/1); 7 * 7 * 64 = 3136 features.
    hand = (
        (8 * 8 * 4 * 32 + 32)
        + (4 * 4 * 32 * 64 + 64)
        + (3 * 3 * 64 * 64 + 64)
        + (3136 * 512 + 512)
        + (512 * 6 + 6)
    )
    assert _count(params) == hand == 1_687_206
    q = net.apply(params, jnp.full((3, 84, 84, 4), 255, jnp.uint8))
    assert q.shape == (3, 6) and q.dtype == jnp.float32


@pytest.mark.slow
def test_uint8_frames_are_scaled_to_unit_range():
    net = QNetwork.from_config(NetworkConfig(kind="nature", hidden_sizes=(16,)), _spec((84, 84, 4)))
    params = net.init(jax.random.key(1), jnp.zeros((1, 84, 84, 4), jnp.uint8))
    frames = jax.random.randint(jax.random.key(2), (2, 84, 84, 4), 0, 256).astype(jnp.uint8)
    np.testing.assert_allclose(
        net.apply(params, frames),
        net.apply(params, frames.astype(jnp.float32) / 255.0),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.slow
def test_dueling_nature_head_has_value_and_advantage():
    cfg = NetworkConfig(kind="nature", hidden_sizes=(32,), dueling=True)
    net = QNetwork.from_config(cfg, _spec((84, 84, 4), actions=4))
    params = net.init(jax.random.key(0), jnp.zeros((1, 84, 84, 4), jnp.uint8))
    plain = QNetwork.from_config(
        NetworkConfig(kind="nature", hidden_sizes=(32,)), _spec((84, 84, 4), actions=4)
    )
    extra = _count(params) - _count(
        plain.init(jax.random.key(0), jnp.zeros((1, 84, 84, 4), jnp.uint8))
    )
    assert extra == 32 + 1  # the value head


@pytest.mark.parametrize(
    "shape, needle",
    [((4,), "needs image observations"), ((10, 10, 4), "at least 36x36")],
)
def test_nature_cnn_rejects_unfit_observations(shape, needle):
    with pytest.raises(ValueError, match=needle):
        QNetwork.from_config(NetworkConfig(kind="nature"), _spec(shape, jnp.float32))


@pytest.mark.slow
@pytest.mark.parametrize("kernel, stride", [(8, 4), (4, 2), (3, 1)])
def test_conv_impls_agree_on_values_and_grads(kernel, stride):
    # 21 x 22: the windows leave 0 or 1 rows/columns over, which get zero gradient
    x = jax.random.normal(jax.random.key(0), (2, 21, 22, 3))
    impls = ("patches", "conv", "conv_patches_grad", "conv_canonical_grads")
    convs = {impl: Conv(5, kernel, stride, impl=impl) for impl in impls}
    params = convs["conv"].init(jax.random.key(1), x)
    assert params["params"]["kernel"].shape == (kernel, kernel, 3, 5)
    out = {i: c.apply(params, x) for i, c in convs.items()}
    for impl in impls[1:]:
        np.testing.assert_allclose(out["patches"], out[impl], rtol=1e-5, atol=1e-5)
    grads = {
        i: jax.grad(lambda p, x, c=c: jnp.sum(jnp.sin(c.apply(p, x))), argnums=(0, 1))(params, x)
        for i, c in convs.items()
    }
    for impl in impls[1:]:
        pairs = zip(jax.tree.leaves(grads["patches"]), jax.tree.leaves(grads[impl]), strict=True)
        for a, b in pairs:
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_canonical_grads_above_the_batch_limit_use_patches_for_the_kernel(monkeypatch):
    from jaxrl_fast.agent import layers as networks

    x = jax.random.normal(jax.random.key(0), (3, 21, 22, 2))
    conv = Conv(4, 4, 2, impl="conv_canonical_grads")
    params = conv.init(jax.random.key(1), x)
    loss = lambda p, x: jnp.sum(jnp.sin(conv.apply(p, x)))  # noqa: E731
    small = jax.grad(loss, argnums=(0, 1))(params, x)
    assert "dot_general" not in str(jax.make_jaxpr(jax.grad(loss))(params, x))  # convs only
    monkeypatch.setattr(networks, "CANONICAL_KERNEL_GRAD_MAX_BATCH", 2)  # batch 3 is above it
    large = jax.grad(loss, argnums=(0, 1))(params, x)
    assert "dot_general" in str(jax.make_jaxpr(jax.grad(loss))(params, x))  # patches x matmul
    for a, b in zip(jax.tree.leaves(small), jax.tree.leaves(large), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
