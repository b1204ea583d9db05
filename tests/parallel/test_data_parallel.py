"""Data replicas (`ParallelConfig`, `jaxrl_fast.parallel`): config checks, the 1-bit exchange and
1-bit Adam (replicas emulated by `vmap(axis_name="data")`), and, in a fresh process with 2 CPU
devices, the mean gradient, the collectives' bytes and whole runs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from conftest import child_env, tiny_config

from jaxrl_fast.config import ParallelConfig
from jaxrl_fast.parallel import make_exchange, onebit
from jaxrl_fast.run.train import train


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"data": 0}, r"ParallelConfig.data=0"),
        ({"data": 2, "sync": "every:0"}, r"ParallelConfig.sync='every:0'.*every:K"),
        ({"data": 2, "sync": "sometimes"}, r"ParallelConfig.sync='sometimes'"),
        ({"data": 2, "compression": "int8"}, r"ParallelConfig.compression='int8'.*onebit"),
        ({"data": 2, "warmup_fraction": 0.0}, r"ParallelConfig.warmup_fraction=0.0"),
        ({"data": 1, "compression": "onebit"}, r"ParallelConfig.data is 1"),
        ({"data": 2, "compression": "onebit", "sync": "every:5"}, r"needs sync='every_step'"),
    ],
)
def test_parallel_config_rejects(fields, match):
    with pytest.raises(ValueError, match=match):
        ParallelConfig(**fields)


def test_parallel_config_period_and_cross_checks():
    assert ParallelConfig(data=2, sync="every:50").sync_period == 50
    assert ParallelConfig(data=2).sync_period is None
    with pytest.raises(ValueError, match=r"data=2 is not allowed with ReplayConfig.l3='host'"):
        tiny_config(parallel={"data": 2}, replay={"l3": "host", "l3_capacity": 400})
    with pytest.raises(ValueError, match=r"data=2 is not allowed with an envpool env"):
        tiny_config(parallel={"data": 2}, env={"name": "envpool:Pong-v5", "num_envs": 4})


def test_too_few_devices_is_refused_before_compiling():
    cfg = tiny_config(parallel={"data": 2})
    with pytest.raises(ValueError, match=r"data=2 needs 2 devices.*use_cpu_cores\(2\)"):
        train(cfg, progress=False, devices=jax.local_devices()[:1])


def test_pack_unpack_signs_odd_sizes():
    x = jnp.asarray([[0.5, -2.0, 0.0, 3.0, -0.25], [1.0, 1.0, -1.0, 0.0, 7.0], [-3.0] * 5])
    packed, scale = onebit.pack_signs(x)
    assert packed.dtype == jnp.uint8 and packed.shape == (2,)  # 15 signs in 2 bytes
    np.testing.assert_allclose(scale, np.mean(np.abs(np.asarray(x))), rtol=1e-6)
    back = onebit.unpack_signs(packed, scale, x)
    want = np.where(np.asarray(x) >= 0, 1.0, -1.0) * float(scale)
    np.testing.assert_allclose(back, want, rtol=1e-6)


def _replicas(fn, d=3):
    return jax.vmap(fn, axis_name="data")


@pytest.mark.slow
def test_exchange_signs_mean_and_own():
    rng = np.random.default_rng(0)
    xs = {
        "w": jnp.asarray(rng.normal(size=(3, 4, 5)), jnp.float32),
        "b": jnp.asarray(rng.normal(size=(3, 9)), jnp.float32),
    }
    mean, own = _replicas(lambda x: onebit.exchange_signs(x, "data"))(xs)
    for k, x in xs.items():
        x = np.asarray(x)
        scale = np.mean(np.abs(x.reshape(3, -1)), axis=1)
        comp = np.where(x >= 0, 1.0, -1.0) * scale.reshape((3,) + (1,) * (x.ndim - 1))
        np.testing.assert_allclose(own[k], comp, rtol=1e-6)
        for r in range(3):  # every replica gets the same mean of the 3 compressed values
            np.testing.assert_allclose(mean[k][r], comp.mean(axis=0), rtol=1e-5, atol=1e-7)


def test_error_feedback_loses_nothing():
    """Residual carried: the compressed values sent over T steps sum to T x the input, up to the
    last residual (what compression dropped is delayed, not lost)."""
    v = jnp.asarray([0.9, -0.1, 0.3, 0.05, -0.7, 2.0, 0.0, -0.02, 0.4], jnp.float32)
    err, sent = jnp.zeros_like(v), jnp.zeros_like(v)
    step = jax.jit(lambda e: _replicas(lambda x: onebit.exchange_signs(x, "data"))(e[None])[1][0])
    for _ in range(200):
        x = v + err
        c = step(x)
        sent, err = sent + c, x - c
    np.testing.assert_allclose(sent + err, 200 * v, rtol=1e-4, atol=1e-4)
    # and without the residual the sum would be far off (signs only keep one magnitude)
    assert np.max(np.abs(200 * step(v) - 200 * v)) > 50


@pytest.mark.slow
def test_onebit_adam_warmup_is_adam_on_the_mean_then_freezes_nu():
    rng = np.random.default_rng(1)
    params = {"w": jnp.asarray(rng.normal(size=(4, 3)), jnp.float32)}
    grads = [{"w": jnp.asarray(rng.normal(size=(3, 4, 3)), jnp.float32)} for _ in range(4)]
    tx = onebit.onebit_adam(1e-2, axis="data", warmup_updates=2, eps=1e-8)
    ref = optax.adam(1e-2, eps=1e-8)

    def step(state, g, p, i):
        upd, state = tx.update(g, state, p, step=i)
        return optax.apply_updates(p, upd), state

    run = jax.jit(_replicas(step), static_argnums=())
    p = jax.tree.map(lambda x: jnp.stack([x] * 3), params)
    state = jax.vmap(tx.init)(p)
    rp, rstate = params, ref.init(params)
    for i in range(2):  # warm-up: Adam on the replicas' mean gradient
        p, state = jax.vmap(step, axis_name="data", in_axes=(0, 0, 0, None))(state, grads[i], p, i)
        mean_g = jax.tree.map(lambda g: g.mean(axis=0), grads[i])
        upd, rstate = ref.update(mean_g, rstate, rp)
        rp = optax.apply_updates(rp, upd)
        np.testing.assert_allclose(p["w"][0], rp["w"], rtol=1e-6, atol=1e-7)
    nu = np.asarray(state.nu["w"])
    for i in range(2, 4):  # compressed: nu frozen, replicas keep one momentum and one params
        p, state = jax.vmap(step, axis_name="data", in_axes=(0, 0, 0, None))(state, grads[i], p, i)
        np.testing.assert_array_equal(state.nu["w"], nu)
        np.testing.assert_array_equal(state.mu["w"][0], state.mu["w"][2])
        np.testing.assert_array_equal(p["w"][0], p["w"][1])
        assert not np.array_equal(state.error["w"][0], state.error["w"][1])
    del run


def test_bytes_per_update():
    params = {"w": jnp.zeros((120, 84)), "b": jnp.zeros((84,))}
    full = 4 * (120 * 84 + 84)
    assert onebit.full_bytes(params) == full
    assert onebit.compressed_bytes(params) == (120 * 84) // 8 + 4 + 84 // 8 + 1 + 4
    ex = make_exchange(ParallelConfig(data=2, sync="every:50"), total_updates=1000)
    assert ex.bytes_per_update(params) == pytest.approx(2 * full / 50)
    ex = make_exchange(ParallelConfig(data=2, compression="onebit"), total_updates=1000)
    assert ex.warmup_updates == 150
    assert full / ex.bytes_per_update(params) > 30


SCRIPT = textwrap.dedent(
    """
    import json, re, sys
    import jaxrl_fast.parallel as par
    assert par.use_cpu_cores(2)
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import PartitionSpec as P
    sys.path.insert(0, "tests")
    from conftest import tiny_config
    from jaxrl_fast.config import ParallelConfig
    from jaxrl_fast.parallel import onebit
    from jaxrl_fast.run.train import train
    out = {}
    mesh = par.lane_mesh(1, 2, jax.devices())
    lanes = P(par.DATA_AXIS)
    ex = par.make_exchange(ParallelConfig(data=2), 100)
    w = jnp.asarray(np.random.default_rng(0).normal(size=(5, 3)), jnp.float32)
    xs = jnp.asarray(np.random.default_rng(1).normal(size=(2, 7, 5)), jnp.float32)
    loss = lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2)
    local = lambda w, x: ex.grads(jax.grad(loss)(w, x[0]))
    g = jax.jit(par.shard_over_seeds(local, mesh, (P(), lanes), P()))(w, xs)
    want = (jax.grad(loss)(w, xs[0]) + jax.grad(loss)(w, xs[1])) / 2
    out["grad_ratio"] = float(jnp.sum(g * want) / jnp.sum(want * want))
    out["grad_err"] = float(jnp.max(jnp.abs(g - want)))
    params = {"a": jnp.zeros((2, 120, 84)), "b": jnp.zeros((2, 84))}
    def hlo(fn):
        f = jax.jit(par.shard_over_seeds(fn, mesh, (lanes,), lanes))
        return f.lower(params).compile().as_text()
    def collectives(text):
        pattern = r"= (\\w+)\\[([\\d,]*)\\][^=]*? (all-reduce|all-gather)(?:-start)?\\("
        return re.findall(pattern, text)
    out["none_hlo"] = collectives(hlo(lambda p: ex.grads(p)))
    out["onebit_hlo"] = collectives(hlo(lambda p: onebit.exchange_signs(p, "data")[0]))
    out["onebit_bytes"] = onebit.compressed_bytes({"a": params["a"][0], "b": params["b"][0]})
    def params_of(r):
        return [np.asarray(x) for x in jax.tree.leaves(r.runner.seeds.agent.params)]
    cfg = tiny_config(num_seeds=2, num_chunks=2, eval_episodes=2)
    updates = cfg.total_updates
    runs = {
        "one": cfg,
        "every_step": cfg.replace(parallel={"data": 2}),
        "onebit": cfg.replace(parallel={"data": 2, "compression": "onebit"}),
        "sync_end": cfg.replace(parallel={"data": 2, "sync": f"every:{updates // 2}"}),
        "sync_before_end": cfg.replace(parallel={"data": 2, "sync": f"every:{updates - 1}"}),
        # a head and layers that draw their own randomness (IQN's levels, noisy weights)
        "iqn_noisy": cfg.replace(parallel={"data": 2}, dqn={"loss": "iqn"},
                                 network={"head": "iqn", "dense": "noisy"},
                                 algo={"iqn": {"samples": (8, 8, 8), "embedding": 16}}),
        # the rollout learner (PQN): each replica learns from its own rollouts
        "pqn": cfg.replace(parallel={"data": 2}, learner="rollout", learning_starts=0,
                           train_frequency=16, updates_per_block=4, total_env_steps=800,
                           algo={"rollout": {"num_minibatches": 2}},
                           dqn={"loss": "regression", "double_q": False, "target_period": 16}),
    }
    for name, c in runs.items():
        r = train(c, progress=False)
        ps = params_of(r)
        rec = {"devices": r.num_devices, "lanes": ps[0].shape[0],
               "finite": all(np.isfinite(h["loss"]).all() for h in r.history),
               "returns": r.final_return.tolist(), "p": ps}
        if ps[0].shape[0] == 4:  # lanes d * S + s: replica 0 and 1 of each seed
            rec["replicas_equal"] = all(np.array_equal(p[s], p[2 + s]) for p in ps for s in (0, 1))
            rec["seeds_differ"] = not np.array_equal(ps[0][0], ps[0][1])
        out[name] = rec
    def gap(a, b):
        return max(float(np.max(np.abs(x[:2] - y[:2]))) for x, y in zip(out[a]["p"], out[b]["p"]))
    out["gap_one_every_step"] = gap("one", "every_step")
    for rec in out.values():
        if isinstance(rec, dict):
            rec.pop("p", None)
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def two_devices():
    env = child_env()
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_mean_gradient_not_summed(two_devices):
    """The shard_map trap: a gradient summed over the replicas would give a ratio of 2."""
    assert two_devices["grad_ratio"] == pytest.approx(1.0, abs=1e-5)
    assert two_devices["grad_err"] < 1e-5


@pytest.mark.slow
def test_exchange_bytes_on_the_wire(two_devices):
    none = two_devices["none_hlo"]
    assert len(none) == 1 and none[0][0] == "f32" and none[0][2] == "all-reduce"
    assert int(none[0][1]) == 120 * 84 + 84  # one flat fp32 all-reduce of every tensor
    ob = two_devices["onebit_hlo"]
    assert [c[0] for c in ob] == ["u8"] and ob[0][2] == "all-gather"  # one uint8 all-gather
    dims = [int(x) for x in ob[0][1].split(",")]
    assert dims == [2, two_devices["onebit_bytes"]]  # each replica's signs + scales


@pytest.mark.slow
def test_data_replicas_runs(two_devices):
    one = two_devices["one"]
    assert one["lanes"] == 2
    for name in ("every_step", "onebit", "sync_end", "sync_before_end", "iqn_noisy", "pqn"):
        rec = two_devices[name]
        assert rec["devices"] == 2 and rec["lanes"] == 4 and rec["finite"], name
        assert rec["seeds_differ"], name
        assert np.isfinite(rec["returns"]).all() and len(rec["returns"]) == 2, name
    # fp32 gradient averaging and 1-bit Adam keep the replicas bitwise equal
    assert two_devices["every_step"]["replicas_equal"]
    assert two_devices["onebit"]["replicas_equal"]
    assert two_devices["iqn_noisy"]["replicas_equal"]  # the replicas draw the same levels/noise
    assert two_devices["pqn"]["replicas_equal"]  # own rollouts, the mean gradient
    # local SGD: equal right after a sync, apart after a local update
    assert two_devices["sync_end"]["replicas_equal"]
    assert not two_devices["sync_before_end"]["replicas_equal"]
    # the replicas' mean gradient (a batch twice as large) is not the one-replica run's
    assert two_devices["gap_one_every_step"] > 1e-4
