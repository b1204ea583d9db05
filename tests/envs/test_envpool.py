"""Atari through envpool's XLA interface inside jit/scan (skipped without the `atari` extra)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

envpool = pytest.importorskip("envpool")

from jaxrl_fast import train  # noqa: E402
from jaxrl_fast.config import (  # noqa: E402
    AtariConfig,
    DQNConfig,
    EnvConfig,
    NetworkConfig,
    ReplayConfig,
    TrainConfig,
)
from jaxrl_fast.envs import list_envs, make_env  # noqa: E402
from jaxrl_fast.replay import make_buffer, make_ring, row_bytes  # noqa: E402
from jaxrl_fast.types import Transition  # noqa: E402

STEPS, N, SEED = 400, 3, 5
WRAPPED_SLOTS = 50


@pytest.fixture(scope="module")
def breakout_rollout():
    """400 random-action steps of 3 Breakout envs through the adapter, inside one jitted scan
    that also adds every step to an n=1 replay buffer."""
    env = make_env("envpool:Breakout-v5", N, seed=SEED)
    actions = jnp.asarray(np.random.default_rng(0).integers(0, 4, (STEPS, N)), jnp.int32)
    example = Transition(
        obs=jax.ShapeDtypeStruct((N, 84, 84, 4), jnp.uint8),
        action=jax.ShapeDtypeStruct((N,), jnp.int32),
        reward=jax.ShapeDtypeStruct((N,), jnp.float32),
        terminated=jax.ShapeDtypeStruct((N,), bool),
        truncated=jax.ShapeDtypeStruct((N,), bool),
        reset=jax.ShapeDtypeStruct((N,), bool),
    )
    buffers = {
        "whole": make_buffer(ReplayConfig(capacity=(STEPS + 10) * N, batch_size=4), example),
        "dedup": make_buffer(
            ReplayConfig(capacity=(STEPS + 10) * N, batch_size=4), example, frame_stack=4
        ),
        "dedup-wrapped": make_buffer(
            ReplayConfig(capacity=WRAPPED_SLOTS * N, batch_size=4, n_step=3),
            example,
            frame_stack=4,
        ),
    }

    @jax.jit
    def run(key, actions):
        state, obs = env.reset(key)

        def body(carry, action):
            state, obs, replays = carry
            state, next_obs, reward, done, info = env.step(key, state, action)
            t = Transition(
                obs, action, reward, info["terminated"], info["truncated"], info["reset"]
            )
            replays = {k: buffers[k].add(r, t) for k, r in replays.items()}
            return (state, next_obs, replays), (next_obs, reward, done, info)

        init = {k: b.init() for k, b in buffers.items()}
        (_, _, replays), out = jax.lax.scan(body, (state, obs, init), actions)
        return obs, out, replays

    obs0, (obs, reward, done, info), replays = run(jax.random.key(0), actions)
    return jax.device_get((actions, obs0, obs, reward, done, info, replays))


@pytest.mark.slow
def test_adapter_matches_envpools_own_stacks_bitwise(breakout_rollout):
    """Same seed, same actions: the adapter's observations are envpool's own stacked frames
    (channel-last), over episodes with life losses and game resets."""
    actions, obs0, obs, reward, done, info, _ = breakout_rollout
    ref = envpool.make(
        "Breakout-v5", env_type="gym", num_envs=N, batch_size=N, seed=SEED,
        episodic_life=True, reward_clip=True, noop_max=30, repeat_action_probability=0.0,
        max_episode_steps=27_000,
    )  # fmt: skip
    o, _ = ref.reset()
    np.testing.assert_array_equal(obs0, np.transpose(o, (0, 2, 3, 1)))
    resets_seen = 0
    for t in range(STEPS):
        o, r, te, tr, ref_info = ref.step(np.asarray(actions[t]))
        np.testing.assert_array_equal(obs[t], np.transpose(o, (0, 2, 3, 1)), err_msg=str(t))
        real = ~info["reset"][t]
        np.testing.assert_array_equal(reward[t], np.where(real, r, 0.0))
        np.testing.assert_array_equal(info["terminated"][t], te & real)
        # a game's length counts agent steps, not the reset steps envpool inserts
        ended = done[t]
        np.testing.assert_array_equal(
            info["episode_length"][t][ended], ref_info["elapsed_step"][ended]
        )
        resets_seen += int(info["reset"][t].sum())
    assert resets_seen >= 10 and done.sum() >= 2  # life losses and whole games happened


def test_reset_steps_follow_every_end_and_never_enter_replay(breakout_rollout):
    _, _, _, reward, _, info, replays = breakout_rollout
    replay = replays["whole"]
    ended = info["terminated"] | info["truncated"]
    np.testing.assert_array_equal(info["reset"][1:], ended[:-1])  # the step after an end
    assert np.all(reward[info["reset"]] == 0.0)
    # n=1 ring: row t holds step t; a row is a sampleable transition iff it is no reset step
    # (the newest row waits for its successor).
    valid = replay.ring.valid[: STEPS - 1]
    np.testing.assert_array_equal(valid, ~info["reset"][: STEPS - 1])


def test_unknown_game_suggests_names():
    with pytest.raises(ValueError, match=r"EnvConfig\.name='envpool:Pongg-v5'.*envpool:Pong-v5"):
        make_env("envpool:Pongg-v5", 2)
    assert "envpool:Pong-v5" in list_envs()


def _pong_config(**changes) -> TrainConfig:
    base = TrainConfig(
        env=EnvConfig(name="envpool:Pong-v5", num_envs=4, atari=AtariConfig(noop_max=10)),
        network=NetworkConfig(kind="nature", hidden_sizes=(32,)),
        replay=ReplayConfig(capacity=400, batch_size=8),
        dqn=DQNConfig(target_period=80, loss="huber"),
        total_env_steps=400,
        learning_starts=80,
        train_frequency=16,
        num_seeds=2,
        num_chunks=2,
        eval_episodes=1,
    )
    return base.replace(**changes)


@pytest.mark.slow
def test_two_seeds_over_one_pool_run_fused_pong():
    """A few hundred fused Pong steps, 2 seeds sharing one pool of 8 emulators: compiled once,
    each seed with its own agent, actions and replay."""
    cfg = _pong_config()
    result = train(cfg, progress=False)
    assert result.num_devices == 1
    seeds = result.runner.seeds
    assert seeds.obs.shape == (2, 4, 84, 84, 4) and seeds.obs.dtype == jnp.uint8
    assert seeds.replay.ring.obs.shape == (2, 100, 4, 84, 84)  # one frame per row
    assert np.all(np.asarray(seeds.replay.ring.stack_mismatches) == 0)
    np.testing.assert_array_equal(seeds.agent.grad_steps, [cfg.total_updates] * 2)
    p = np.asarray(jax.tree.leaves(seeds.agent.params)[0])
    assert not np.array_equal(p[0], p[1])  # different inits, different trajectories
    r = seeds.replay.ring
    assert not np.array_equal(np.asarray(r.action[:, 0]), np.asarray(r.action[:, 1]))
    assert all(np.all(np.isfinite(h["loss"])) for h in result.history)
    # evaluation plays whole Pong games: a score in [-21, 21]
    assert np.all((result.final_return >= -21) & (result.final_return <= 21))


@pytest.mark.slow
def test_fused_pong_with_l3_spills_and_samples_one_frame_rows():
    """Frame deduplication with the host L3 tier: L3 rows hold one frame too, and batches mix
    in rows read back from L3 (their stacks rebuilt on the host)."""
    cfg = _pong_config(
        num_seeds=1,
        replay=dict(capacity=160, l3="host", l3_capacity=400, l3_share=0.25),
        eval_episodes=0,  # whole Pong games that this test never reads
    )
    result = train(cfg, progress=False)
    rec = result.history[-1]["replay"]
    assert rec["blocks_spilled"] > 0 and rec["l3_read_calls"] > 0
    assert 0 < rec["l3_rows_sampled"][0] and min(rec["l2_hit_rate"]) < 1.0
    rows_written = rec["blocks_spilled"] * 4 * cfg.env.num_envs  # 4-slot spill blocks
    assert rec["l3_bytes_written"] == rows_written * row_bytes((84, 84, 4), np.uint8, 4)
    assert np.all(np.asarray(result.runner.seeds.replay.ring.stack_mismatches) == 0)
    assert all(np.all(np.isfinite(h["loss"])) for h in result.history)


@pytest.mark.slow
def test_pool_seeds_mapped_or_vmapped_agree():
    """The seed loop on a pool env: one seed after another (lax.map, CPU's default for the
    Nature CNN) or batched (vmap). The two are different programs, so only what is equal by
    construction is compared exactly: the first collect step's actions (epsilon is 1 there, so
    they are drawn from the keys alone). Later greedy actions are argmaxes over Q-values that
    float rounding may order differently (4 of 800 differed on an AVX-512 machine), so the
    actions agree to a share and the parameters to a tolerance."""
    runs = [
        train(
            _pong_config(  # no evaluation: whole Pong games that this test never reads
                seed_loop=loop, network=dict(conv_impl="conv_canonical_grads"), eval_episodes=0
            ),
            progress=False,
        )
        for loop in ("vmap", "map")
    ]
    a, b = (r.runner.seeds for r in runs)
    act_a, act_b = np.asarray(a.replay.ring.action), np.asarray(b.replay.ring.action)
    np.testing.assert_array_equal(act_a[:, 0], act_b[:, 0])  # ring slot t: collect step t
    assert np.mean(act_a != act_b) <= 0.02, np.mean(act_a != act_b)
    # parameters: the two runs' difference is small next to what training moved them by
    from jaxrl_fast.loop import make_train
    from jaxrl_fast.parallel.seeds import train_keys

    cfg = runs[0].config
    start = jax.jit(make_train(cfg).init)(train_keys(cfg)).seeds.agent.params
    trees = (start, a.agent.params, b.agent.params)
    leaves = zip(*(jax.tree.leaves(p) for p in trees), strict=True)
    for x0, x, y in leaves:
        x0, x, y = np.asarray(x0), np.asarray(x), np.asarray(y)
        moved = np.linalg.norm(x - x0)
        assert moved > 0 and np.linalg.norm(x - y) <= 0.05 * moved, (moved, np.linalg.norm(x - y))
    assert np.all(np.asarray(a.agent.grad_steps) > 0)


def test_pool_env_with_wrong_size_is_a_clear_error():
    from jaxrl_fast.loop import make_train

    cfg = _pong_config()
    env = make_env("envpool:Pong-v5", 4)  # one seed's worth, but 2 seeds configured
    with pytest.raises(ValueError, match=r"EnvConfig\.num_envs=4 .*num_seeds x num_envs"):
        make_train(cfg, env=env)


def _observations(breakout_rollout):
    """`[STEPS + 1, N, 84, 84, 4]`: the observation each step's action was taken in, then the
    last one."""
    _, obs0, obs, *_ = breakout_rollout
    return np.concatenate([obs0[None], obs], axis=0)


@pytest.mark.slow
def test_frame_dedup_rebuilds_envpool_stacks_bitwise(breakout_rollout):
    """One 84x84 frame per row; every rebuilt obs and next_obs stack equals the stack envpool
    returned, across life losses and new games (fresh stacks repeat their first frame)."""
    seq = _observations(breakout_rollout)
    replay = breakout_rollout[-1]["dedup"]
    assert replay.ring.obs.shape == (STEPS + 10, N, 84, 84)
    assert int(replay.ring.stack_mismatches) == 0
    ring = make_ring((STEPS + 10) * N, N, (84, 84, 4), jnp.uint8, 1, frame_stack=4)
    flat = jnp.arange((STEPS - 1) * N, dtype=jnp.int32)  # every row with its successor written
    batch = jax.jit(ring.gather)(replay.ring, flat)
    np.testing.assert_array_equal(batch.obs, seq[: STEPS - 1].reshape(-1, 84, 84, 4))
    np.testing.assert_array_equal(batch.next_obs, seq[1:STEPS].reshape(-1, 84, 84, 4))
    assert int(replay.ring.fresh.sum()) >= 3  # the first stacks and the new games


def test_frame_dedup_after_wraparound_samples_only_rebuildable_rows(breakout_rollout):
    """A 50-slot ring after 400 steps (n_step 3): the sampleable rows are the ones whose frames
    are all still in the ring, and they rebuild bitwise; the 3 oldest slots are never drawn."""
    seq = _observations(breakout_rollout)
    replay = breakout_rollout[-1]["dedup-wrapped"]
    ring = make_ring(WRAPPED_SLOTS * N, N, (84, 84, 4), jnp.uint8, 3, frame_stack=4)
    sampleable = int(ring.sampleable_slots(replay.ring))
    assert sampleable == WRAPPED_SLOTS - 3 - 3
    # the newest committed row holds step STEPS - 3 (the L1 window holds the last 2 steps)
    newest = STEPS - 3
    back = np.arange(sampleable)
    steps = newest - 3 - back
    slots = (int(replay.ring.insert_pos) - 1 - 3 - back) % WRAPPED_SLOTS
    flat = jnp.asarray((slots[:, None] * N + np.arange(N)).reshape(-1), jnp.int32)
    batch = jax.jit(ring.gather)(replay.ring, flat)
    np.testing.assert_array_equal(batch.obs, seq[steps].reshape(-1, 84, 84, 4))
    offsets = np.asarray(replay.ring.offset)[slots].reshape(-1)
    want_next = seq[np.repeat(steps, N) + offsets, np.tile(np.arange(N), len(steps))]
    np.testing.assert_array_equal(batch.next_obs, want_next)
    # uniform draws never reach the 3 oldest slots
    draw = jax.vmap(lambda r, k: ring.sample_uniform(r, k, 64).index, in_axes=(None, 0))
    draws = jax.jit(draw)(replay.ring, jax.random.split(jax.random.key(0), 50))
    oldest = [(int(replay.ring.insert_pos) + j) % WRAPPED_SLOTS for j in range(3)]
    assert not np.isin(np.asarray(draws) // N, oldest).any()


def test_dedup_bytes_per_transition():
    whole, dedup = row_bytes((84, 84, 4), np.uint8), row_bytes((84, 84, 4), np.uint8, 4)
    assert dedup - 14 <= 1.02 * 84 * 84  # one frame and a flag, + action/reward/flags
    assert whole == 4 * 84 * 84 + 14


@pytest.mark.slow
def test_host_pool_matches_the_xla_adapter(breakout_rollout):
    """The conventional loop's envpool (Python API) gives the adapter's observations, rewards,
    flags and episode statistics for the same seed and actions."""
    from jaxrl_fast.envs.envpool_env import HostPool

    actions, obs0, obs, reward, done, info, _ = breakout_rollout
    host = HostPool("envpool:Breakout-v5", N, seed=SEED)
    assert host.spec.frame_stack == 4 and not host.spec.seed_vmappable
    np.testing.assert_array_equal(host.reset(), obs0)
    for t in range(STEPS):
        _, o, r, d, i = host.step(np.asarray(actions[t]))
        np.testing.assert_array_equal(o, obs[t])
        np.testing.assert_array_equal(r, reward[t])
        np.testing.assert_array_equal(d, done[t])
        for k in ("terminated", "truncated", "reset", "episode_return", "episode_length"):
            np.testing.assert_array_equal(i[k], info[k][t], err_msg=f"{k} at {t}")


@pytest.mark.slow
def test_conventional_atari_loop_runs():
    from jaxrl_fast.baseline import train_unfused

    cfg = _pong_config(num_seeds=1)
    result = train_unfused(cfg, progress=False)
    assert result.env_steps == cfg.total_env_steps
    assert int(result.agent.grad_steps) == cfg.total_updates
    assert -21 <= result.final_return <= 21


def test_cli_plan_counts_one_frame_per_row(capsys):
    from jaxrl_fast.cli import main

    assert main(["plan", "--preset", "atari-pong", "--device-memory", "16GB"]) == 0
    out = capsys.readouterr().out
    assert "7,071 B, one frame per row" in out and "100,000" in out


@pytest.mark.slow
def test_a_resumed_pong_run_restarts_its_games_and_keeps_its_replay(tmp_path, capsys):
    """envpool cannot save emulators: a resumed run starts new games, keeps every stored row,
    and takes the newest n_step rows (whose next observations were never stored) out of
    sampling."""
    from jaxrl_fast import checkpoint

    cfg = _pong_config(
        total_env_steps=80 + 16 * 6, num_chunks=3, replay={"n_step": 3}, eval_episodes=0
    )

    from conftest import StopRun, stop_at

    with pytest.raises(StopRun):  # checkpoints after chunks 1 and 2; stopped logging chunk 3
        train(cfg, progress=False, run_dir=tmp_path, checkpoint_every=1, on_chunk=stop_at(2))
    result = train(cfg, progress=False, run_dir=tmp_path, resume=True)
    assert "envs start new games; the replay is kept" in capsys.readouterr().err
    assert [h["chunk"] for h in result.history] == [0, 1, 2]
    np.testing.assert_array_equal(result.runner.seeds.agent.grad_steps, [cfg.total_updates] * 2)

    mngr = checkpoint.manager(str(tmp_path / "checkpoints"), 3)
    saved, _ = checkpoint.restore(mngr, 2, result.runner)  # the state the resume started from
    before, after = saved.seeds.replay.ring, result.runner.seeds.replay.ring
    pos = int(before.insert_pos)
    assert 0 < pos < int(after.insert_pos) == (80 + 16 * 6) // 4  # one row per env step
    kept = slice(0, pos - 3)
    for name in ("obs", "action", "reward", "discount", "valid"):  # the stored rows, untouched
        a, b = np.asarray(getattr(before, name)), np.asarray(getattr(after, name))
        np.testing.assert_array_equal(a[:, kept], b[:, kept], err_msg=name)
    assert np.asarray(before.valid)[:, pos - 3 : pos].any()  # rows that were valid ...
    assert not np.asarray(after.valid)[:, pos - 3 : pos].any()  # ... now out of sampling
    assert not np.asarray(after.valid)[:, pos : pos + 2].any()  # the new staging's placeholders
