"""L3 contents for checkpoints (`Buffer.host_state` / `load_host_state`, `spill.HostStore`): a
tiered buffer (host and disk L3) stopped between chunks, its host state loaded into a fresh
buffer (directly, or through an orbax save and restore), continues with bitwise the batches,
state, store rows and counters of the run that never stopped; the rows waiting in the prefetch
are saved; `copy=True` is a snapshot; states that do not fit are refused, naming what differs."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.config import ReplayConfig
from jaxrl_fast.replay import make_buffer, make_l3
from jaxrl_fast.replay.spill import COUNTERS, HostStore
from jaxrl_fast.types import Transition

E, S = 2, 3  # envs per seed, seeds
T2, T3 = 40, 80  # L2 / L3 slots per seed
SYNC = 2  # slots added between spill calls
CHUNK = 90  # steps per chunk: 4 chunks wrap L3's FIFO (80 slots) several times


def _example(obs_shape=(1,), dtype=jnp.float32):
    z = lambda dt: jnp.zeros((E,), dt)  # noqa: E731
    return Transition(
        jnp.zeros((E, *obs_shape), dtype), z(jnp.int32), z(jnp.float32), z(bool), z(bool), z(bool)
    )


def _config(**changes):
    base = dict(
        capacity=T2 * E,
        batch_size=8,
        l3="host",
        l3_capacity=T3 * E,
        l3_share=0.5,
        spill_block=10 * E * S * 19,  # 10 slots per spill (19 > 18 bytes per row)
    )
    return ReplayConfig(**{**base, **changes})


def _buffer(config, **kw):
    """The buffer and its L3 tier, built with the same arguments."""
    kw = dict(num_seeds=S, sync_every=SYNC, updates_per_sync=SYNC, **kw)
    tier = make_l3(config, _example(), **kw)
    return make_buffer(config, _example(), l3_tier=tier, **kw), tier


def _chunk_fn(buf):
    """One chunk as the fused loop runs it: `CHUNK` steps from step `t0`, each adding a step
    whose obs encodes (seed, step, env), sampling and updating a batch per seed with keys from
    the step, and spilling every SYNC steps. Jitted once per buffer."""
    axes = buf.seed_axes
    ex = _example()

    def step(state, t):
        obs = 1000.0 * jnp.arange(S)[:, None, None] + t + 0.1 * jnp.arange(E)[None, :, None]
        tr = jax.tree.map(lambda x: jnp.broadcast_to(x, (S, *x.shape)), ex)
        tr = tr._replace(obs=obs, action=jnp.full((S, E), t, jnp.int32))
        state = jax.vmap(buf.add, in_axes=(axes, 0), out_axes=axes)(state, tr)

        def learn(st, key):
            b = buf.sample(st, key)
            return buf.update_priorities(st, b.index, jnp.zeros(b.index.shape)), b

        keys = jax.random.split(jax.random.key(t), S)
        state, batch = jax.vmap(learn, in_axes=(axes, 0), out_axes=(axes, 0))(state, keys)
        state = jax.lax.cond(t % SYNC == SYNC - 1, buf.spill, lambda s: s, state)
        return state, batch

    return jax.jit(lambda state, t0: jax.lax.scan(step, state, t0 + jnp.arange(CHUNK)))


def _init(buf):
    return jax.vmap(lambda _: buf.init(), out_axes=buf.seed_axes)(jnp.arange(S))


def _assert_trees_equal(a, b, what):
    def data(x):
        keys = jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key)
        return jax.random.key_data(x) if keys else x

    a, b = jax.tree.map(data, a), jax.tree.map(data, b)
    for path, x, y in zip(
        (jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(a)),
        jax.tree.leaves(a),
        jax.tree.leaves(b),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=f"{what}{path}")


def _orbax_round_trip(state, like, directory):
    """`state` saved with orbax and restored as numpy arrays laid out as `like` (a fresh
    buffer's `host_state()`), as a checkpoint would; synchronous, so the views stay put."""
    import orbax.checkpoint as ocp

    options = ocp.CheckpointManagerOptions(enable_async_checkpointing=False)
    with ocp.CheckpointManager(str(directory), options=options) as mngr:
        mngr.save(1, args=ocp.args.Composite(l3=ocp.args.StandardSave(state)))
        mngr.wait_until_finished()
        out = mngr.restore(1, args=ocp.args.Composite(l3=ocp.args.StandardRestore(like)))
    return dict(out["l3"])


@pytest.mark.slow
@pytest.mark.parametrize("kind, via", [("host", "direct"), ("disk", "orbax")])
def test_resumed_l3_continues_bitwise(kind, via, tmp_path):
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    cfg = _config(l3=kind, spill_dir=str(spill_dir) if kind == "disk" else None)
    (whole, whole_tier), (first, _), (fresh, _) = (_buffer(cfg) for _ in range(3))
    try:
        run_whole, run_first, run_fresh = (_chunk_fn(b) for b in (whole, first, fresh))
        state, batches = _init(whole), []
        for c in range(4):  # the run that never stops
            state, batch = run_whole(state, c * CHUNK)
            batches.append(batch)
        state_whole = jax.device_get(state)

        saved = _init(first)
        for c in range(2):  # the run that is checkpointed after chunk 2
            saved, _ = run_first(saved, c * CHUNK)
        saved = jax.device_get(saved)
        host = first.host_state()
        assert host["prefetched"] and host["prefetched_weight"].sum() > 0  # rows in the prefetch
        assert host["slots_written"] == saved.l3.spilled and host["read_calls"] == saved.l3.fetches
        if via == "orbax":
            host = _orbax_round_trip(host, fresh.host_state(), tmp_path / "ckpt")
        fresh.load_host_state(host, saved)

        for name, buf, run in (("stopped", first, run_first), ("resumed", fresh, run_fresh)):
            state = saved
            for c in range(2, 4):
                state, batch = run(state, c * CHUNK)
                _assert_trees_equal(batch, batches[c], f"{name} chunk {c} batch")
            _assert_trees_equal(jax.device_get(state), state_whole, f"{name} state")
            _assert_trees_equal(buf.counters(state), whole.counters(state_whole), name)
        assert (batches[3].index < 0).any()  # L3 rows in the batches compared
        # host_state waits for the gather in flight (which counts the rows it reads)
        want = whole.host_state()
        assert set(want) >= {*whole_tier.store.fields, *COUNTERS}
        for name, buf in (("stopped", first), ("resumed", fresh)):
            _assert_trees_equal(buf.host_state(), want, f"{name} host state")
    finally:
        for b in (whole, first, fresh):
            b.close()
    assert os.listdir(spill_dir) == []


# ---- the host store alone ------------------------------------------------------------------

_KW = dict(num_seeds=2, slots=8, num_envs=2, obs_shape=(3,), obs_dtype=np.uint8)


def _block(rng, k=4):
    return dict(
        obs=rng.integers(0, 255, (2, k, 2, 3), np.uint8),
        action=rng.integers(0, 4, (2, k, 2), np.int32),
        reward=rng.normal(size=(2, k, 2)).astype(np.float32),
        discount=np.full((2, k, 2), 0.9, np.float32),
        offset=np.ones((2, k, 2), np.int8),
        valid=np.ones((2, k, 2), bool),
    )


def _request(rng, hi):
    return rng.integers(0, hi, (2, 5, 3)), rng.integers(0, 2, (2, 5, 3)), np.ones((2, 5, 3), bool)


@pytest.mark.parametrize("kind", ["host", "disk"])
def test_rows_in_the_prefetch_are_saved(kind, tmp_path):
    """A read hands back the previous request's rows, gathered before the next write changed
    the store: a loaded store hands back those rows, not a regather."""
    kw = dict(_KW, read_shape=(5, 3), spill_dir=str(tmp_path) if kind == "disk" else None)
    rng = np.random.default_rng(0)
    a, b = HostStore(kind, **kw), HostStore(kind, **kw)
    a.write(0, **_block(rng))
    a.write(4, **_block(rng))
    assert not a.host_state()["prefetched"]  # no read yet: the next one hands back nothing
    first = _request(rng, 8)
    assert not a.read(*first).weight.any()
    b.load_host_state(a.host_state())  # the gather of `first` may still be running
    block, second = _block(rng), _request(rng, 8)
    sync = HostStore("host", **dict(_KW, prefetch=False))
    sync.load_host_state({k: v for k, v in a.host_state().items() if "prefetched" not in k})
    want = sync.read(*first)  # `first`, gathered before the next write
    for store in (a, b):
        store.write(8, **block)  # overwrites slots 0..3
        got = store.read(*second)
        for x, y in zip(got, want, strict=True):
            np.testing.assert_array_equal(x, y)
    ha, hb = a.host_state(), b.host_state()  # after the gathers in flight
    assert ha["read_calls"] == hb["read_calls"] == 2 and ha["rows_read"] == hb["rows_read"] == 60
    for store in (a, b, sync):
        store.close()


def test_copy_true_is_a_snapshot_and_views_are_read_only(tmp_path):
    rng = np.random.default_rng(1)
    disk = HostStore("disk", spill_dir=str(tmp_path), **_KW)
    host = HostStore("host", **_KW)
    for store in (disk, host):
        store.write(0, **_block(rng, 8))
        views, snap = store.host_state(), store.host_state(copy=True)
        before = np.array(views["obs"])
        with pytest.raises(ValueError, match="read-only"):
            views["obs"][0, 0, 0, 0] = 1
        store.write(0, **_block(rng, 8))  # the next chunk's writes
        assert not np.array_equal(views["obs"], before)  # views follow the store
        np.testing.assert_array_equal(snap["obs"], before)  # the snapshot does not
        assert not snap["obs"].flags.writeable
    assert isinstance(snap["obs"], np.ndarray)
    first = disk._snapshot
    again = disk.host_state(copy=True)["obs"]
    assert isinstance(again, np.memmap) and os.path.dirname(again.filename) == disk._snapshot
    assert disk._snapshot.startswith(disk.path) and not os.path.exists(first)  # one snapshot
    disk.close(), host.close()
    assert os.listdir(tmp_path) == []
    with pytest.raises(RuntimeError, match="closed"):
        disk.host_state()


def test_load_refuses_a_state_that_does_not_fit(tmp_path):
    rng = np.random.default_rng(2)
    store = HostStore("host", read_shape=(5, 3), **_KW)
    store.write(0, **_block(rng))
    store.read(*_request(rng, 4))
    state = store.host_state(copy=True)
    target = HostStore("disk", spill_dir=str(tmp_path), read_shape=(5, 3), **_KW)
    target.load_host_state(state)  # a host store's state loads into a disk store alike
    np.testing.assert_array_equal(target.arrays["obs"], store.arrays["obs"])

    def refused(other, state, *match):
        before = other.host_state(copy=True)
        with pytest.raises(ValueError) as err:
            other.load_host_state(state)
        msg = str(err.value)
        for m in match:
            assert m in msg, (m, msg)
        assert "\n" not in msg and "Resume with the config" in msg
        _assert_trees_equal(other.host_state(), before, "refused load changed the store")
        other.close()

    longer = HostStore("host", read_shape=(5, 3), **dict(_KW, slots=16))
    refused(longer, state, "'obs' is (2, 8, 2, 3) uint8, expected (2, 16, 2, 3) uint8", "slots")
    floats = HostStore("host", read_shape=(5, 3), **dict(_KW, obs_dtype=np.float32))
    refused(floats, state, "'obs' is (2, 8, 2, 3) uint8, expected (2, 8, 2, 3) float32")
    batches = HostStore("host", read_shape=(4, 3), **_KW)
    refused(batches, state, "'prefetched_obs' is (2, 5, 3, 3) uint8, expected (2, 4, 3, 3)")
    other = HostStore("host", read_shape=(5, 3), **_KW)
    no_obs = {k: v for k, v in state.items() if k != "obs"}
    refused(other, no_obs | {"frames": state["obs"]}, "missing 'obs'", "unexpected 'frames'")
    reseeded = HostStore("host", read_shape=(5, 3), seed=7, **_KW)
    refused(reseeded, state, "'draw_seed' is 0, expected 7 (TrainConfig.seed)")
    unfetched = HostStore("host", prefetch=False, **_KW)
    refused(unfetched, state, "unexpected 'prefetched'")
    for s in (store, target):
        s.close()


def test_buffer_hooks_without_l3_and_with_counters_from_another_chunk():
    buf = make_buffer(ReplayConfig(capacity=8 * E, batch_size=4), _example())
    assert buf.host_state() == {} and buf.load_host_state({}) is None
    with pytest.raises(ValueError, match=r"keeps nothing on the host .*\['obs'\]"):
        buf.load_host_state({"obs": np.zeros(3)})

    tiered, tier = _buffer(_config())
    try:
        arrays = tier.store.arrays
        block = {k: np.zeros((S, 10, E, *a.shape[3:]), a.dtype) for k, a in arrays.items()}
        tier.store.write(0, **block)  # the host state is one spill ahead of the replay state
        host = tiered.host_state()
        state = jax.device_get(_init(tiered))
        with pytest.raises(ValueError, match="L3State.spilled=0 but the host state's slots_"):
            tiered.load_host_state(host, state)
        tiered.load_host_state(host)  # without the replay state: not checked
    finally:
        tiered.close()


def test_load_copies_rows_in_slabs_from_tensorstores(monkeypatch):
    """Rows come in slabs (here 3 slots, the last one short) from anything that slices, such as
    a TensorStore opened on a saved array, so a restore need not hold the rows in RAM."""
    ts = pytest.importorskip("tensorstore")
    from jaxrl_fast.replay import spill as spill_state

    rng = np.random.default_rng(3)
    store = HostStore("host", read_shape=(5, 3), **_KW)
    store.write(0, **_block(rng, 8))
    store.read(*_request(rng, 8))
    state = store.host_state(copy=True)
    lazy = {}
    for name, arr in state.items():
        spec = {"driver": "zarr", "kvstore": "memory://", "dtype": arr.dtype.name}
        lazy[name] = ts.open(spec, create=True, shape=arr.shape).result()
        lazy[name][...] = arr
    monkeypatch.setattr(spill_state, "_SLAB_BYTES", 3 * 2 * 2 * 3)  # 3 slots a slab (of 8)
    fresh = HostStore("host", read_shape=(5, 3), **_KW)
    fresh.load_host_state(lazy)
    _assert_trees_equal(fresh.host_state(), state, "from tensorstores")
    store.close(), fresh.close()


@pytest.mark.slow
def test_fused_loop_resumed_from_host_state_ends_bitwise_equal():
    """Through the real loop (`make_train`): a run with a host L3 stopped after 2 of 4 chunks,
    its runner and host state handed to a freshly built run, ends with the runner (parameters,
    optimiser, replay, envs, keys) and the host tier of the run that went on, bit for bit."""
    from conftest import tiny_config

    from jaxrl_fast.loop import make_train

    cfg = tiny_config(
        total_env_steps=2_480,
        num_chunks=4,
        replay=dict(capacity=160, l3="host", l3_capacity=800, l3_share=0.25, spill_block=4096),
    )
    keys = jax.random.split(jax.random.key(0), cfg.num_seeds)
    ends = []
    a = make_train(cfg)
    run_a = jax.jit(a.run_chunk, donate_argnums=0)
    runner = jax.jit(a.init)(keys)
    for _ in range(2):
        runner, _ = run_a(runner)
    saved = jax.device_get(runner)  # what a checkpoint holds: the device state ...
    host = a.buffer.host_state(copy=True)  # ... and the host tier's
    assert int(host["blocks_written"]) > 0 and host["prefetched"]
    assert np.all(saved.seeds.replay.l3.from_l3 > 0)  # the batches had L3 rows already
    for _ in range(2):
        runner, _ = run_a(runner)
    ends.append(jax.device_get(runner))
    host_end = a.buffer.host_state(copy=True)
    a.buffer.close()

    b = make_train(cfg)
    run_b = jax.jit(b.run_chunk, donate_argnums=0)
    like = jax.jit(b.init)(keys)
    runner = jax.tree.map(lambda x, y: jax.device_put(x, y.sharding), saved, like)
    b.buffer.load_host_state(host, saved.seeds.replay)
    for _ in range(2):
        runner, _ = run_b(runner)
    ends.append(jax.device_get(runner))
    _assert_trees_equal(ends[1], ends[0], "runner")
    _assert_trees_equal(b.buffer.host_state(), host_end, "host state")
    b.buffer.close()
