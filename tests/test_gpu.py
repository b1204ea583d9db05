"""What must hold on the device the tests run on, checked there against the CPU: envs, one update
and the precision policies. Marked `gpu`: the GPU kit (`benchmarks/gpu/run.sh`) runs every
`gpu`-marked test on a lent GPU; here, on a CPU-only machine, "the device" is the CPU itself, so
these run the same code and the comparisons hold exactly.

Tolerances: a program that XLA compiles for another backend is a different program (other
fusions, fused multiply-adds, other reduction orders), so floats agree to a tolerance; integer
and boolean results (MinAtar's grids, `done`), and threefry's random bits, agree exactly."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.agent import make_agent
from jaxrl_fast.agent import precision as mp
from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.config import DQNConfig, NetworkConfig, PrecisionConfig
from jaxrl_fast.envs import make_env
from jaxrl_fast.types import Batch

pytestmark = pytest.mark.gpu

DEVICE = jax.devices()[0]
CPU = jax.devices("cpu")[0]


def _on(device, fn, *args):
    """`fn(*args)` compiled for `device` (its inputs placed there), read back to the host."""
    with jax.default_device(device):
        out = jax.jit(fn)(*jax.device_put(args, device))
    return jax.device_get(out)


def _rollout(name: str, steps: int):
    env = make_env(name, 8)

    def run(key):
        state, obs = env.reset(key)

        def step(carry, k):
            state, obs = carry
            ka, ks = jax.random.split(k)
            action = jax.random.randint(ka, (8,), 0, env.spec.num_actions)
            state, obs, reward, done, _ = env.step(ks, state, action)
            return (state, obs), (obs, reward, done)

        return jax.lax.scan(step, (state, obs), jax.random.split(key, steps))[1]

    return run


def test_random_bits_are_the_same_on_this_device_and_the_cpu():
    def draw(key):
        return jax.random.bits(key, (1024,)), jax.random.uniform(key, (1024,))

    key = jax.random.key(7)
    (bits_d, u_d), (bits_c, u_c) = _on(DEVICE, draw, key), _on(CPU, draw, key)
    np.testing.assert_array_equal(bits_d, bits_c)  # threefry: integer ops, the same by design
    np.testing.assert_allclose(u_d, u_c, rtol=0, atol=1e-7)


@pytest.mark.parametrize("name", ["CartPole-v1", "Breakout-MinAtar"])
def test_env_rollouts_agree_on_this_device_and_the_cpu(name):
    run = _rollout(name, 60)
    key = jax.random.key(3)
    (obs_d, rew_d, done_d), (obs_c, rew_c, done_c) = _on(DEVICE, run, key), _on(CPU, run, key)
    assert obs_d.shape == obs_c.shape and obs_d.dtype == obs_c.dtype
    np.testing.assert_array_equal(done_d, done_c)
    assert done_c.any(), "the rollout must cross an episode end"
    if np.issubdtype(obs_c.dtype, np.floating) and name == "CartPole-v1":
        # 60 Euler steps of a float32 ODE: a few ulps a step, grown by the unstable pole
        np.testing.assert_allclose(obs_d, obs_c, rtol=0, atol=1e-4)
    else:  # MinAtar: boolean grids from integer logic
        np.testing.assert_array_equal(obs_d, obs_c)
    np.testing.assert_array_equal(rew_d, rew_c)


def _minatar_update(compute: str, matmul_precision: str = "highest"):
    spec = make_env("Breakout-MinAtar", 1).spec
    policy = mp.resolve_precision(
        PrecisionConfig(compute=compute, matmul_precision=matmul_precision, fallback=False),
        DEVICE,
    )
    net = QNetwork.for_precision(NetworkConfig(), spec, policy)
    agent = make_agent(DQNConfig(learning_rate=1e-3), net, spec.num_actions, precision=policy)
    k = jax.random.split(jax.random.key(11), 4)
    b = 32
    obs = jax.random.bernoulli(k[0], 0.2, (b, *spec.obs_shape)).astype(spec.obs_dtype)
    batch = Batch(
        obs=obs,
        action=jax.random.randint(k[1], (b,), 0, spec.num_actions),
        reward=jax.random.uniform(k[2], (b,)),
        discount=jnp.full((b,), 0.99, jnp.float32),
        next_obs=obs[::-1],
        weight=jnp.ones((b,), jnp.float32),
        index=jnp.arange(b, dtype=jnp.int32),
    )

    def one(key, batch):
        state = agent.init(key, batch.obs[:1])
        new, td, m = agent.update(state, batch)
        return state.params, new.params, td, m.loss, net.apply(new.params, batch.obs)

    return one, k[3], batch


def test_one_fp32_update_agrees_on_this_device_and_the_cpu():
    one, key, batch = _minatar_update("fp32", "highest")
    d, c = _on(DEVICE, one, key, batch), _on(CPU, one, key, batch)
    for a, b in zip(jax.tree.leaves(d[0]), jax.tree.leaves(c[0]), strict=True):
        # the init: the same random bits through the same float maths (erfinv, scaling), which
        # a GPU may contract into fused multiply-adds: equal to a few ulps
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(d[3], c[3], rtol=1e-5)  # loss
    np.testing.assert_allclose(d[2], c[2], rtol=1e-4, atol=1e-5)  # TD errors
    for a, b in zip(jax.tree.leaves(d[1]), jax.tree.leaves(c[1]), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)  # one Adam step from the same init
    np.testing.assert_allclose(d[4], c[4], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("compute, rtol", [("bf16", 3e-2), ("fp16", 5e-3)])
def test_low_precision_updates_on_this_device_stay_near_fp32(compute, rtol):
    """The same update in bf16 or fp16 on this device: parameters stay fp32, the loss and the
    Q-values near the fp32 ones (bf16 keeps 8 bits of mantissa, fp16 11)."""
    ref, key, batch = _minatar_update("fp32", "highest")
    low, _, _ = _minatar_update(compute)
    r, lo = _on(DEVICE, ref, key, batch), _on(DEVICE, low, key, batch)
    assert all(x.dtype == np.float32 for x in jax.tree.leaves(lo[1]))
    assert lo[4].dtype == np.float32 and np.all(np.isfinite(lo[4]))
    np.testing.assert_allclose(lo[3], r[3], rtol=10 * rtol)  # a mean of squares: looser
    scale = np.abs(r[4]).max()
    np.testing.assert_allclose(lo[4], r[4], rtol=0, atol=rtol * scale)


def test_the_auto_policy_reads_this_devices_kind():
    """`compute="auto"` asks the real device object (its platform, kind and compute capability,
    which the other tests fake): fp32 on a CPU, bf16 from Ampere on, fp16 before it, for the
    Nature CNN."""
    policy = mp.resolve_precision(PrecisionConfig(), DEVICE, torso="nature")
    if DEVICE.platform == "cpu":
        assert policy.compute == "fp32"
    elif DEVICE.platform == "gpu":
        cc = getattr(DEVICE, "compute_capability", None)
        assert cc is not None, f"{DEVICE.device_kind}: no compute capability read"
        major = int(str(cc).split(".")[0])
        assert policy.compute == ("bf16" if major >= 8 else "fp16" if major >= 7 else "fp32")
    small = mp.resolve_precision(PrecisionConfig(), DEVICE, torso="mlp")
    assert small.compute == "fp32"
