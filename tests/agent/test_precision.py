"""Mixed precision: policy per device, loss-scale dynamics, skipped steps, fallback, learning."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from conftest import assert_learned_probe_chain, tiny_config

from jaxrl_fast import train
from jaxrl_fast.agent import precision as mp
from jaxrl_fast.agent.dqn import make_agent
from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.config import DQNConfig, NetworkConfig, PrecisionConfig
from jaxrl_fast.envs import Env, make_env
from jaxrl_fast.envs.base import EnvSpec
from jaxrl_fast.types import Batch


def _bits(tree):
    """Every leaf's raw bytes, so equality is bitwise (NaN and -0.0 included)."""
    return [np.asarray(x).tobytes() for x in jax.tree.leaves(tree)]


# ---- config and policy ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "field, value, needle",
    [
        ("compute", "fp64", "one of ('auto', 'fp32', 'bf16', 'fp16')"),
        ("loss_scale", "static:abc", "static:<value>"),
        ("loss_scale", "static:-2", "static:<value>"),
        ("loss_scale", "big", "'dynamic'"),
        ("matmul_precision", "tf32", "one of ('default', 'high', 'highest')"),
        ("fallback", 1, "True or False"),
        ("initial_scale", 0.5, "a float >= 1"),
        ("min_scale", 1e9, "a float in (0, initial_scale="),
        ("growth_interval", 0, "a positive int"),
        ("fallback_overflows", -1, "a positive int"),
        ("fallback_window", 2.5, "a positive int"),
    ],
)
def test_precision_config_errors_name_the_field(field, value, needle):
    with pytest.raises(ValueError, match=rf"PrecisionConfig\.{field}=") as err:
        PrecisionConfig(**{field: value})
    assert needle in str(err.value)


def test_static_scale_parses_value():
    assert PrecisionConfig(loss_scale="static:1024").static_scale == 1024.0
    assert PrecisionConfig(loss_scale="dynamic").static_scale is None
    policy = mp.resolve_precision(PrecisionConfig(compute="fp16", loss_scale="static:128"))
    assert (policy.loss_scale, policy.scale) == ("static", 128.0)


def _device(platform, kind, capability=None):
    return types.SimpleNamespace(platform=platform, device_kind=kind, compute_capability=capability)


@pytest.mark.parametrize(
    "device, compute, loss_scale, matmuls",
    [
        (_device("cpu", "cpu"), "fp32", "none", "fp32"),
        (_device("gpu", "Tesla P100-PCIE-16GB", "6.0"), "fp32", "none", "fp32"),
        (_device("gpu", "Tesla T4", "7.5"), "fp16", "dynamic", "fp16"),
        (_device("gpu", "Tesla V100-SXM2-16GB", "7.0"), "fp16", "dynamic", "fp16"),
        (_device("gpu", "NVIDIA A100-SXM4-40GB", "8.0"), "bf16", "none", "bf16"),
        (_device("gpu", "NVIDIA H100 80GB HBM3", "9.0"), "bf16", "none", "bf16"),
        (_device("tpu", "TPU v4"), "bf16", "none", "bf16"),
        (_device("gpu", "mystery GPU", None), "fp32", "none", "fp32"),
    ],
)
def test_auto_policy_for_the_nature_cnn_per_device_kind(device, compute, loss_scale, matmuls):
    policy = mp.resolve_precision(PrecisionConfig(), device, torso="nature")
    assert (policy.compute, policy.loss_scale, policy.matmuls) == (compute, loss_scale, matmuls)
    assert policy.fallback is False  # opt-in
    assert policy.skip_nonfinite == (compute != "fp32")
    assert repr(device.device_kind) in policy.describe()
    assert f"matmuls {matmuls}" in policy.describe()
    opted = mp.resolve_precision(PrecisionConfig(fallback=True), device, torso="nature")
    assert opted.fallback == (compute != "fp32")


@pytest.mark.parametrize("torso", ["mlp", "cnn"])
@pytest.mark.parametrize(
    "device, matmuls",
    [
        (_device("cpu", "cpu"), "fp32"),
        (_device("gpu", "Tesla T4", "7.5"), "fp32"),
        (_device("gpu", "NVIDIA H100 80GB HBM3", "9.0"), "TF32"),
        (_device("tpu", "TPU v4"), "bf16 passes"),
    ],
)
def test_auto_policy_keeps_small_networks_in_fp32_and_names_tf32(torso, device, matmuls):
    policy = mp.resolve_precision(PrecisionConfig(), device, torso=torso)
    assert (policy.compute, policy.loss_scale, policy.fallback) == ("fp32", "none", False)
    assert policy.matmuls == matmuls
    text = policy.describe()
    assert f"compute fp32 (params fp32), matmuls {matmuls}" in text
    if matmuls != "fp32":  # TF32 is not called fp32: the line says how to get fp32
        assert "matmul precision 'default'; 'highest' for fp32" in text
    exact = PrecisionConfig(matmul_precision="highest")
    assert mp.resolve_precision(exact, device, torso=torso).matmuls == "fp32"


def test_resolved_run_picks_the_policy_of_its_torso():
    from jaxrl_fast import presets
    from jaxrl_fast.loop.resolve import resolve

    run = resolve(presets.get("cartpole"))
    assert "matmuls " in run.describe()[0] and run.precision.compute == "fp32"
    assert presets.get("cartpole").network.torso((4,)) == "mlp"
    assert presets.get("minatar-breakout").network.torso((10, 10, 4)) == "cnn"
    assert presets.get("atari-pong").network.torso((84, 84, 4)) == "nature"


def test_auto_policy_on_this_machine_cpu_is_fp32():
    if jax.local_devices()[0].platform != "cpu":
        pytest.skip("checks the CPU choice")
    policy = mp.resolve_precision(PrecisionConfig())
    assert policy.compute == "fp32" and not policy.skip_nonfinite


def test_explicit_compute_overrides_auto_and_fp32_never_falls_back():
    t4 = _device("gpu", "Tesla T4", "7.5")
    assert mp.resolve_precision(PrecisionConfig(compute="bf16"), t4).compute == "bf16"
    fp32 = mp.resolve_precision(PrecisionConfig(compute="fp32", loss_scale="dynamic"), t4)
    assert fp32.fallback is False and fp32.skip_nonfinite and fp32.loss_scale == "dynamic"


# ---- loss-scale dynamics, by hand --------------------------------------------------------------
def _policy(**kw):
    base = dict(compute="fp16", initial_scale=8.0, growth_interval=3, min_scale=2.0, fallback=True)
    base.update(kw)
    return mp.resolve_precision(PrecisionConfig(**base))


def _run(scale, state, finite_flags):
    for f in finite_flags:
        state = scale.adjust(state, jnp.bool_(f))
    return state


def test_dynamic_scale_halves_grows_and_stops_at_floor():
    scale = mp.make_loss_scale(_policy(fallback=False))
    s = scale.init()
    assert float(s.scale) == 8.0
    s = _run(scale, s, [False])  # overflow: halve
    assert (float(s.scale), int(s.good_steps), int(s.skipped)) == (4.0, 0, 1)
    s = _run(scale, s, [True, True])  # two finite steps: no growth yet
    assert (float(s.scale), int(s.good_steps)) == (4.0, 2)
    s = _run(scale, s, [True])  # third finite step in a row: double, restart the count
    assert (float(s.scale), int(s.good_steps)) == (8.0, 0)
    s = _run(scale, s, [True, False])  # an overflow resets the run of good steps
    assert (float(s.scale), int(s.good_steps), int(s.skipped)) == (4.0, 0, 2)
    s = _run(scale, s, [False, False, False])  # 4 -> 2 (floor) -> stays 2
    assert float(s.scale) == 2.0 and int(s.skipped) == 5
    assert not bool(s.fallback)  # fallback disabled


def test_traced_loss_scale_settings_replace_the_policys():
    # the policy says start 8, grow after 3, floor 2; the seed's HParams say 64, 1 and 16
    from jaxrl_fast.config import DQNConfig, ReplayConfig, ScheduleConfig
    from jaxrl_fast.config.hparams import hparams_from_parts

    knobs = hparams_from_parts(
        DQNConfig(),
        ScheduleConfig(),
        ReplayConfig(),
        PrecisionConfig(compute="fp16", initial_scale=64.0, growth_interval=1, min_scale=16.0),
    )
    scale = mp.make_loss_scale(_policy())
    s = scale.init(knobs)
    assert float(s.scale) == 64.0
    s = scale.adjust(s, jnp.bool_(True), knobs)  # one finite step: double
    assert float(s.scale) == 128.0
    for _ in range(3):
        s = scale.adjust(s, jnp.bool_(False), knobs)  # 64, 32, 16 (the seed's floor)
    assert float(s.scale) == 16.0 and not bool(s.fallback)
    s = scale.adjust(s, jnp.bool_(False), knobs)  # would fall below 16: fallback
    assert float(s.scale) == 16.0 and bool(s.fallback)
    # a static scale stays the policy's
    static = mp.make_loss_scale(_policy(loss_scale="static:4"))
    assert float(static.init(knobs).scale) == 4.0


def test_scale_below_floor_triggers_fallback():
    scale = mp.make_loss_scale(_policy())
    s = _run(scale, scale.init(), [False, False])  # 8 -> 4 -> 2 (= floor)
    assert float(s.scale) == 2.0 and not bool(s.fallback)
    s = _run(scale, s, [False])  # would fall to 1 < 2
    assert float(s.scale) == 2.0 and bool(s.fallback)
    s = _run(scale, s, [True] * 10)  # the switch is sticky
    assert bool(s.fallback)


def test_fallback_after_m_overflows_within_one_window_only():
    policy = _policy(min_scale=2.0**-20, fallback_overflows=3, fallback_window=5)
    scale = mp.make_loss_scale(policy)
    # 2 overflows, then the window of 5 steps ends: the count restarts.
    s = _run(scale, scale.init(), [False, False, True, True, True])
    assert (int(s.overflows), int(s.window_steps), bool(s.fallback)) == (0, 0, False)
    s = _run(scale, s, [False, True, False])
    assert int(s.overflows) == 2 and not bool(s.fallback)
    s = _run(scale, s, [False])  # third overflow inside the window
    assert bool(s.fallback) and int(s.skipped) == 5


def test_static_and_no_scale_never_change_the_scale():
    for loss_scale, value in (("static:64", 64.0), ("none", 1.0)):
        scale = mp.make_loss_scale(_policy(loss_scale=loss_scale, fallback=False))
        s = _run(scale, scale.init(), [False, True, True, True, False])
        assert float(s.scale) == value and int(s.skipped) == 2


# ---- skipping non-finite steps ------------------------------------------------------------------
def test_skip_nonfinite_keeps_params_and_state_bitwise():
    params = {"w": jnp.array([1.5, -0.0, 0.0, -2.0]), "b": jnp.array([0.25])}
    tx = mp.skip_nonfinite(optax.adam(1e-2))
    state = tx.init(params)
    good = {"w": jnp.ones(4), "b": jnp.ones(1)}
    updates, state = tx.update(good, state, params)
    params = optax.apply_updates(params, updates)
    bad = {"w": jnp.array([1.0, jnp.inf, 0.0, 1.0]), "b": jnp.array([jnp.nan])}
    updates, new_state = tx.update(bad, state, params)
    assert _bits(new_state) == _bits(state)
    assert _bits(optax.apply_updates(params, updates)) == _bits(params)
    # A finite step still equals plain Adam's.
    plain = optax.adam(1e-2)
    want, _ = plain.update(good, state, params)
    got, _ = tx.update(good, state, params)
    np.testing.assert_array_equal(got["w"], want["w"])


_SPEC = EnvSpec(
    name="vec4", obs_shape=(4,), obs_dtype=jnp.float32, num_actions=2, num_envs=1,
    max_episode_steps=10,
)  # fmt: skip


def _agent(compute="fp16", **precision):
    precision = {"fallback": True, **precision}
    policy = mp.resolve_precision(PrecisionConfig(compute=compute, **precision))
    net = QNetwork.for_precision(NetworkConfig(kind="mlp", hidden_sizes=(16,)), _SPEC, policy)
    return make_agent(DQNConfig(learning_rate=1e-2), net, 2, precision=policy)


def _batch(reward=1.0, b=8):
    obs = jax.random.normal(jax.random.key(3), (b, 4))
    return Batch(
        obs=obs,
        action=jnp.arange(b, dtype=jnp.int32) % 2,
        reward=jnp.full((b,), reward, jnp.float32),
        discount=jnp.full((b,), 0.9, jnp.float32),
        next_obs=obs[::-1],
        weight=jnp.ones((b,), jnp.float32),
        index=jnp.arange(b, dtype=jnp.int32),
    )


@pytest.mark.slow
@pytest.mark.gpu
def test_nonfinite_gradient_leaves_agent_bitwise_unchanged():
    agent = _agent()
    update = jax.jit(agent.update)
    state = agent.init(jax.random.key(0), jnp.zeros((1, 4)))
    state, _, m = update(state, _batch())  # one real step, so Adam's moments are non-zero
    assert float(m.applied) == 1.0
    new, td, m = update(state, _batch(reward=jnp.inf))
    assert _bits(new.params) == _bits(state.params)
    assert _bits(new.opt_state) == _bits(state.opt_state)
    assert float(m.applied) == 0.0 and float(m.loss) == 0.0
    assert not np.all(np.isfinite(td))
    assert float(new.loss_scale.scale) == float(state.loss_scale.scale) / 2
    assert int(new.loss_scale.skipped) == 1


@pytest.mark.slow
def test_fallback_on_injected_overflows_then_updates_in_fp32():
    agent = _agent(fallback_overflows=3, min_scale=2.0**-20)
    update = jax.jit(agent.update)
    state = agent.init(jax.random.key(0), jnp.zeros((1, 4)))
    for i in range(3):
        assert not bool(state.loss_scale.fallback), i
        state, _, _ = update(state, _batch(reward=jnp.nan))
    assert bool(state.loss_scale.fallback) and int(state.loss_scale.skipped) == 3
    # The next step computes in fp32: it equals an fp32 agent's step from the same state.
    new, _, m = update(state, _batch())
    assert float(m.applied) == 1.0
    fp32 = _agent(compute="fp32", loss_scale="dynamic")
    ref, _, _ = jax.jit(fp32.update)(state, _batch())
    for a, b in zip(jax.tree.leaves(new.params), jax.tree.leaves(ref.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    low, _, _ = update(state, _batch(), jnp.bool_(False))  # forcing fp16 gives other numbers
    assert _bits(low.params) != _bits(new.params)


def test_fp16_underflow_without_scaling_recovered_by_dynamic_scale():
    """Gradients of ~1e-8 flush to zero in fp16; a loss scale of 2^15 brings them back."""
    x = jnp.full((1024,), 1e-5, jnp.float32)

    def fn(params, x):
        y = params["w"].astype(jnp.float16) * x.astype(jnp.float16)  # fp16 compute
        return jnp.mean(y.astype(jnp.float32)), None  # loss in fp32

    params = {"w": jnp.ones((1024,), jnp.float32)}
    want = np.full(1024, 1e-5 / 1024)  # d mean(w x) / dw
    none = mp.make_loss_scale(_policy(loss_scale="none"))
    (_, _), g_none = mp.scaled_value_and_grad(fn, none)(none.init(), params, x)
    assert np.all(np.asarray(g_none["w"]) == 0.0)  # underflowed
    dyn = mp.make_loss_scale(mp.resolve_precision(PrecisionConfig(compute="fp16")))
    (loss, _), g_dyn = mp.scaled_value_and_grad(fn, dyn)(dyn.init(), params, x)
    assert g_dyn["w"].dtype == jnp.float32
    np.testing.assert_allclose(g_dyn["w"], want, rtol=2e-3)
    np.testing.assert_allclose(loss, 1e-5, rtol=2e-3)  # the loss is reported unscaled


def test_matmul_precision_reaches_every_dot():
    policy = mp.resolve_precision(PrecisionConfig(compute="fp32", matmul_precision="highest"))
    net = QNetwork.for_precision(NetworkConfig(kind="mlp", hidden_sizes=(8,)), _SPEC, policy)
    params = net.init(jax.random.key(0), jnp.zeros((1, 4)))
    jaxpr = jax.make_jaxpr(net.apply)(params, jnp.zeros((2, 4)))
    dots = [e for e in jaxpr.eqns if e.primitive.name == "dot_general"]
    assert len(dots) == 2
    assert all(e.params["precision"] == (jax.lax.Precision.HIGHEST,) * 2 for e in dots)


@pytest.mark.parametrize("compute, dtype", [("bf16", jnp.bfloat16), ("fp16", jnp.float16)])
def test_network_computes_in_policy_dtype_with_fp32_params_and_q(compute, dtype):
    policy = mp.resolve_precision(PrecisionConfig(compute=compute))
    net = QNetwork.for_precision(NetworkConfig(kind="mlp", hidden_sizes=(8,)), _SPEC, policy)
    params = net.init(jax.random.key(0), jnp.zeros((1, 4)))
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(params))
    jaxpr = jax.make_jaxpr(net.apply)(params, jnp.zeros((2, 4)))
    dots = [e for e in jaxpr.eqns if e.primitive.name == "dot_general"]
    assert all(v.aval.dtype == dtype for e in dots for v in e.invars)
    assert net.apply(params, jnp.ones((2, 4))).dtype == jnp.float32


# ---- in the fused loop ------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.gpu
@pytest.mark.parametrize("compute", ["bf16", "fp16"])
def test_low_precision_learns_probe_chain(compute):
    cfg = tiny_config(precision=PrecisionConfig(compute=compute))
    result = train(cfg, progress=False)
    assert_learned_probe_chain(result, cfg)
    assert compute in result.precision
    assert result.fp32_fallback_env_steps is None
    assert all(sum(h["skipped"]) == 0 for h in result.history)
    scale = 2.0**15 if compute == "fp16" else 1.0
    assert result.history[-1]["loss_scale"] == [scale, scale]


def _huge_rewards(env: Env, offset: float) -> Env:
    """Every reward raised by `offset`."""

    def step(key, state, action):
        state, obs, reward, done, info = env.step(key, state, action)
        return state, obs, reward + offset, done, info

    return env._replace(step=step)


@pytest.mark.slow
@pytest.mark.gpu
def test_fused_run_falls_back_to_fp32_and_continues():
    """Rewards of 1e7 overflow fp16 gradients at any scale: after 3 skipped updates the run
    switches to fp32 (compiled once), and every later update is applied."""
    cfg = tiny_config(
        precision=PrecisionConfig(
            compute="fp16",
            initial_scale=4.0,
            min_scale=2.0**-20,
            fallback_overflows=3,
            fallback=True,
        )
    )
    env = _huge_rewards(make_env("probe-chain", cfg.env.num_envs), 1e7)
    with pytest.warns(RuntimeWarning, match="switched to fp32"):
        result = train(cfg, progress=False, env=env)
    skipped = np.sum([h["skipped"] for h in result.history], axis=0)
    np.testing.assert_array_equal(skipped, [3, 3])
    assert result.history[0]["fp32_fallback"] == [True, True]
    assert result.fp32_fallback_env_steps == result.history[0]["env_steps"]
    assert all(np.all(np.isfinite(h["loss"])) for h in result.history)
    agent = result.runner.seeds.agent
    np.testing.assert_array_equal(agent.grad_steps, [cfg.total_updates] * 2)
    np.testing.assert_array_equal(agent.loss_scale.skipped, [3, 3])
    assert np.all(np.isfinite(np.asarray(jax.tree.leaves(agent.params)[0])))


@pytest.mark.slow
def test_all_updates_skipped_without_fallback_raises_clear_error():
    cfg = tiny_config(precision=PrecisionConfig(compute="fp16", fallback=False))
    env = _huge_rewards(make_env("probe-chain", cfg.env.num_envs), 1e7)
    with pytest.raises(FloatingPointError, match="skipped for non-finite gradients"):
        train(cfg, progress=False, env=env)
