"""Replay sizing: bytes per row by hand, share -> rows by hand, presets, errors, the plan's tiers,
and the byte model against the buffer's real state shapes (`jax.eval_shape`, nothing compiled)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.config import CAPACITY_PRESETS, TrainConfig
from jaxrl_fast.envs import EnvSpec
from jaxrl_fast.replay import make_buffer
from jaxrl_fast.replay.memory import available_memory, parse_bytes
from jaxrl_fast.replay.sizing import MAX_ROWS, plan, resolve_capacity, seed_device_bytes
from jaxrl_fast.replay.spill import HostStore
from jaxrl_fast.types import Transition

# CartPole: 4 float32 obs -> L2 row = 16 (obs) + 4 action + 4 reward + 4 discount + 1 offset
# + 1 valid = 30 bytes; an L1 step = 16 + 4 + 4 + 3 bools = 27 bytes.
CARTPOLE_ROW = 30
CARTPOLE_STEP = 27
IMAGE = EnvSpec(
    name="image", obs_shape=(84, 84, 4), obs_dtype=np.uint8, num_actions=4, num_envs=10,
    max_episode_steps=1000,
)  # fmt: skip
IMAGE_ROW = 84 * 84 * 4 + 14  # uint8 frames stored once, 1 byte per pixel


def _cartpole(capacity, **changes) -> TrainConfig:
    replay = {"capacity": capacity, **changes.pop("replay", {})}
    return TrainConfig().replace(replay=replay, **changes)  # CartPole-v1, 10 envs, batch 128


def _image(capacity, **replay) -> TrainConfig:
    return TrainConfig().replace(replay={"capacity": capacity, "batch_size": 32, **replay})


# ---- bytes per row -------------------------------------------------------------------------


def test_bytes_per_row_cartpole():
    p = plan(_cartpole(10_000), device_memory=10**9)
    assert p.row_bytes == CARTPOLE_ROW
    assert p.bytes_per_transition == CARTPOLE_ROW
    assert p.naive_row_bytes == 2 * 16 + 9  # obs + next_obs + action + reward + done
    assert p.l2_bytes == 10_000 * CARTPOLE_ROW
    assert p.l1_rows == 10 and p.l1_bytes == 10 * CARTPOLE_STEP
    assert p.sampler is None


def test_bytes_per_row_cartpole_with_priorities():
    auto = plan(_cartpole(10_000, replay={"prioritised": True}), device_memory=10**9)
    assert auto.sampler == "sum_tree"  # "auto" from AUTO_SUM_TREE_FROM (1,000) rows on
    small = plan(_cartpole(500, replay={"prioritised": True}), device_memory=10**9)
    assert small.sampler == "cumsum"  # below it
    cumsum = plan(
        _cartpole(10_000, replay={"prioritised": True, "sampler": "cumsum"}), device_memory=10**9
    )
    assert cumsum.bytes_per_transition == CARTPOLE_ROW + 4
    tree = plan(
        _cartpole(10_000, replay={"prioritised": True, "sampler": "sum_tree"}),
        device_memory=10**9,
    )
    # 10,000 rows -> 16,384 leaves -> 2 x 16,384 float32 nodes.
    assert tree.l2_bytes == 10_000 * CARTPOLE_ROW + 2 * 16_384 * 4
    assert tree.bytes_per_transition == pytest.approx(CARTPOLE_ROW + 131_072 / 10_000)


def test_bytes_per_row_uint8_image():
    p = plan(_image(8_000), device_memory=10**10, spec=IMAGE)
    assert p.obs_dtype == "uint8" and p.row_bytes == IMAGE_ROW == 28_238
    assert p.naive_row_bytes == 2 * 28_224 + 9
    assert p.l2_bytes == 8_000 * IMAGE_ROW
    assert p.l1_bytes == 10 * (28_224 + 11)  # n_step 1 x 10 envs


@pytest.mark.parametrize(
    "sampler, n_step, rows, want",
    [
        (None, 1, 1000, 1000 * 30 + 10 * 27),
        ("cumsum", 1, 1000, 1000 * 34 + 10 * 27),
        ("sum_tree", 3, 1000, 1000 * 30 + 2 * 1024 * 4 + 3 * 10 * 27),
        ("auto", 1, 40_000, 40_000 * 30 + 2 * 65_536 * 4 + 10 * 27),  # auto -> sum tree
    ],
    ids=["uniform", "cumsum", "sum_tree_nstep3", "auto_large"],
)
def test_seed_device_bytes_by_hand(sampler, n_step, rows, want):
    got = seed_device_bytes(
        rows, (4,), np.float32, num_envs=10, n_step=n_step, prioritised_sampler=sampler
    )
    assert got == want


@pytest.mark.parametrize(
    "replay",
    [{}, {"prioritised": True, "sampler": "sum_tree", "n_step": 3}],
    ids=["uniform", "per"],
)
def test_plan_bytes_match_buffer_state(replay):
    # The byte model against the real ReplayState: its leaves' bytes, less 4 int32/float32
    # scalars (ring insert_pos and size, max_priority, updates), are exactly L1 + L2.
    cfg = _cartpole(1_000, replay=replay)
    p = plan(cfg, device_memory=10**9)
    e = cfg.env.num_envs
    example = Transition(
        jnp.zeros((e, 4)), jnp.zeros(e, jnp.int32), jnp.zeros(e), *[jnp.zeros(e, bool)] * 3
    )
    buf = make_buffer(cfg.replay, example)
    state = jax.eval_shape(buf.init)
    leaves = jax.tree.leaves(state)
    nbytes = sum(math.prod(x.shape) * x.dtype.itemsize for x in leaves)
    assert nbytes - 4 * 4 == p.l1_bytes + p.l2_bytes == p.device_bytes


# ---- share -> rows -------------------------------------------------------------------------


def test_share_resolves_to_rows_by_hand():
    # budget 0.5 x 1e6 = 500,000 bytes; 270 for L1; (500,000 - 270) / 30 = 16,657.7 -> 16,650.
    cfg = resolve_capacity(_cartpole("auto:0.5"), device_memory=10**6)
    assert cfg.replay.capacity == 16_650
    # PER cumsum: (500,000 - 270) / 34 = 14,698.0 -> 14,690.
    per = resolve_capacity(
        _cartpole("auto:0.5", replay={"prioritised": True, "sampler": "cumsum"}),
        device_memory=10**6,
    )
    assert per.replay.capacity == 14_690
    # n_step 3: L1 = 3 x 10 x 27 = 810; (500,000 - 810) / 30 = 16,639.6 -> 16,630.
    n3 = resolve_capacity(_cartpole("auto:0.5", replay={"n_step": 3}), device_memory=10**6)
    assert n3.replay.capacity == 16_630
    # Sum tree: with 16,384 leaves (131,072 bytes) 30 x rows <= 368,658 -> 12,280 rows; more
    # rows only add leaves.
    tree = resolve_capacity(
        _cartpole("auto:0.5", replay={"prioritised": True, "sampler": "sum_tree"}),
        device_memory=10**6,
    )
    assert tree.replay.capacity == 12_280


@pytest.mark.parametrize("memory", [10**6, 3_333_333, 10**8, 123_456_789])
@pytest.mark.parametrize("per", [False, True], ids=["uniform", "per"])
def test_share_rows_are_the_largest_multiple_of_num_envs_that_fits(memory, per):
    cfg = _cartpole("auto:0.3", replay={"prioritised": per, "n_step": 2})
    rows = resolve_capacity(cfg, device_memory=memory).replay.capacity
    sampler = "auto" if per else None

    def need(r):
        return seed_device_bytes(
            r, (4,), np.float32, num_envs=10, n_step=2, prioritised_sampler=sampler
        )

    budget = int(0.3 * memory)
    assert rows % 10 == 0
    assert need(rows) <= budget < need(rows + 10)


def test_share_rows_scale_with_one_over_num_seeds():
    one = resolve_capacity(_cartpole("auto:0.5"), device_memory=10**7).replay.capacity
    two_half = resolve_capacity(_cartpole("auto:0.5", num_seeds=2), device_memory=2 * 10**7)
    assert two_half.replay.capacity == one  # same memory per seed, same rows
    four = resolve_capacity(_cartpole("auto:0.5", num_seeds=4), device_memory=10**7)
    assert four.replay.capacity == (5 * 10**6 // 4 - 270) // 300 * 10  # 41,650
    # 1/4 of the rows, give or take the rounding down to whole slots and L1's fixed bytes.
    assert abs(four.replay.capacity - one / 4) <= 2 * 10


@pytest.mark.parametrize("preset, share", [("small", 0.3), ("medium", 0.5), ("large", 0.7)])
def test_capacity_presets_are_shares(preset, share):
    assert CAPACITY_PRESETS[preset] == share
    by_name = plan(_cartpole(preset), device_memory=10**8)
    by_share = plan(_cartpole(f"auto:{share}"), device_memory=10**8)
    assert by_name.share == share
    assert by_name.l2_rows == by_share.l2_rows == (int(share * 10**8) - 270) // 300 * 10


def test_int_capacity_is_returned_unchanged():
    cfg = _cartpole(10_000)
    assert resolve_capacity(cfg, device_memory=1) is cfg


def test_share_respects_batch_size_and_n_step_minimum():
    # 130 rows (batch 128 rounded up to 10 envs) need 130 x 30 + 270 = 4,170 bytes.
    cfg = resolve_capacity(_cartpole("auto:0.5"), device_memory=8_340)
    assert cfg.replay.capacity == 130
    few = _cartpole("auto:0.5", replay={"batch_size": 8, "n_step": 4})
    assert resolve_capacity(few, device_memory=2 * (50 * 30 + 4 * 270)).replay.capacity == 50


def test_share_too_small_raises_naming_field_share_memory_and_bytes():
    with pytest.raises(ValueError) as err:
        resolve_capacity(_cartpole("auto:0.3"), device_memory=1_000)
    msg = str(err.value)
    assert "ReplayConfig.capacity='auto:0.3'" in msg
    assert "0.3 x 1.00 kB" in msg and "(given)" in msg
    assert "130 rows" in msg and "4,170 bytes" in msg


def test_share_is_capped_at_max_rows():
    cfg = resolve_capacity(_cartpole("auto:0.9"), device_memory=10**15)
    assert cfg.replay.capacity == MAX_ROWS // 10 * 10


def test_resolved_config_builds_the_buffer():
    cfg = resolve_capacity(_cartpole("large", replay={"n_step": 3}), device_memory=10**6)
    example = Transition(
        jnp.zeros((10, 4)), jnp.zeros(10, jnp.int32), jnp.zeros(10), *[jnp.zeros(10, bool)] * 3
    )
    buf = make_buffer(cfg.replay, example)  # builds closures only
    assert jax.eval_shape(buf.init).ring.obs.shape == (cfg.replay.capacity // 10, 10, 4)


# ---- free memory -------------------------------------------------------------------------


class _FakeGpu:
    platform = "gpu"

    def __init__(self, stats):
        self.stats = stats

    def memory_stats(self):
        return self.stats

    def __str__(self):
        return "cuda:0"


def test_available_memory_reads_accelerator_stats():
    gpu = _FakeGpu({"bytes_limit": 16 * 10**9, "bytes_in_use": 10**9})
    assert available_memory(gpu) == (15 * 10**9, "cuda:0 memory_stats")
    cfg = resolve_capacity(_cartpole("auto:0.5"), device=gpu)
    assert cfg.replay.capacity == (int(0.5 * 15 * 10**9) - 270) // 300 * 10


def test_available_memory_without_stats_raises():
    with pytest.raises(ValueError, match=r"cuda:0.*ReplayConfig\.capacity"):
        available_memory(_FakeGpu(None))


def test_available_memory_on_cpu_is_host_ram():
    memory, source = available_memory(jax.devices("cpu")[0])
    assert memory > 0 and source == "host RAM (MemAvailable)"


# ---- plan: L3 and fit ----------------------------------------------------------------------


def test_plan_l3_host_bytes_and_spill_block():
    cfg = _cartpole(8_000, num_seeds=2, replay={"l3": "host", "l3_capacity": 16_000})
    p = plan(cfg, device_memory=10**9)
    assert p.l3 == "host" and p.l3_where == "host RAM" and p.l3_rows == 16_000
    assert p.l3_bytes == 16_000 * 2 * CARTPOLE_ROW
    store = HostStore(
        "host", num_seeds=2, slots=1_600, num_envs=10, obs_shape=(4,), obs_dtype=np.float32
    )
    assert p.l3_bytes == store.nbytes
    store.close()
    # plan_l3: 4 MiB / (2 seeds x 10 envs x 30 B) = 6,990 slots, capped by (800 - 1 - 1) // 2
    # = 399 and by the largest divisor of gcd(800, 1600) = 800 below it: 200.
    assert p.spill_block_slots == 200
    assert p.spill_block_bytes == 200 * 10 * 2 * CARTPOLE_ROW
    assert "spill block: 200 slots" in p.render()


def test_plan_l3_disk_names_the_directory(tmp_path):
    cfg = _cartpole(8_000, replay={"l3": "disk", "l3_capacity": 8_000, "spill_dir": str(tmp_path)})
    p = plan(cfg, device_memory=10**9)
    assert p.l3_where == f"disk ({tmp_path})" and p.l3_available > 0
    assert p.l3_bytes == 8_000 * CARTPOLE_ROW


def test_plan_says_whether_it_fits():
    cfg = _cartpole(10_000, num_seeds=4)  # 4 x (300,000 + 270) = 1,201,080 bytes
    fits = plan(cfg, device_memory=1_201_080)
    assert fits.fits and fits.device_bytes == 1_201_080
    assert "fits (100.0% used)" in fits.render()
    short = plan(cfg, device_memory=1_201_079)
    assert not short.fits and "does NOT fit (1 B short)" in short.render()


# ---- byte sizes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, want",
    [
        ("16GB", 16 * 10**9),
        ("16GiB", 16 * 2**30),
        ("16 gib", 16 * 2**30),
        ("512MB", 512 * 10**6),
        ("1.5kB", 1500),
        ("1e9", 10**9),
        ("4096", 4096),
        ("2TiB", 2 * 2**40),
        (80, 80),
    ],
)
def test_parse_bytes(text, want):
    assert parse_bytes(text) == want


@pytest.mark.parametrize("text", ["16XB", "GB", "", "-1GB", "0", "0.5", "16 G", "nan", 0, True])
def test_parse_bytes_rejects(text):
    with pytest.raises(ValueError, match="byte size .* is not allowed; expected"):
        parse_bytes(text)
