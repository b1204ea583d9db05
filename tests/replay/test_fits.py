"""`replay.fits.check_fits` refuses what cannot fit, by hand: the device tiers (seeds split over
accelerators, a CPU's shared RAM), a host L3 in host RAM (less a CPU's device tiers), a disk L3
in its spill directory counting the killed runs' directories it may reclaim; each message names
the fields, the bytes and values that fit."""

from __future__ import annotations

import os
import shutil

import jax
import numpy as np
import pytest

from jaxrl_fast.config import TrainConfig
from jaxrl_fast.envs import EnvSpec
from jaxrl_fast.replay.fits import check_fits
from jaxrl_fast.replay.sizing import plan
from jaxrl_fast.replay.spill_dirs import find_stale_spill_dirs, make_spill_dir

IMAGE = EnvSpec(
    name="image", obs_shape=(84, 84, 4), obs_dtype=np.uint8, num_actions=4, num_envs=10,
    max_episode_steps=1000,
)  # fmt: skip


def _cartpole(capacity, **changes) -> TrainConfig:
    replay = {"capacity": capacity, **changes.pop("replay", {})}
    return TrainConfig().replace(replay=replay, **changes)  # CartPole-v1, 10 envs, batch 128


def _image(capacity, **replay) -> TrainConfig:
    return TrainConfig().replace(replay={"capacity": capacity, "batch_size": 32, **replay})


# ---- check_fits: refuse what cannot fit -------------------------------------------------------


def test_check_fits_device_by_hand():
    cfg = _cartpole(10_000, num_seeds=4)  # 4 x (300,000 + 270) = 1,201,080 bytes
    assert check_fits(cfg, device_memory=1_201_080).device_bytes == 1_201_080
    with pytest.raises(ValueError) as err:
        check_fits(cfg, device_memory=1_201_079)
    msg = str(err.value)
    assert msg.startswith("ReplayConfig.capacity=10000 rows per seed x TrainConfig.num_seeds=4 ")
    assert "needs 1.20 MB (1,201,080 bytes" in msg and "1,201,079 bytes) is free (given)" in msg
    # 1,201,079 // 4 = 300,269 per seed: 30 B x rows + 270 fits 9,999 rows -> 9,990 (10 envs);
    # 1,201,079 // 300,270 = 3 seeds of 10,000 rows.
    assert "ReplayConfig.capacity=9990 or less" in msg and 'capacity="auto:0.3"' in msg
    assert "TrainConfig.num_seeds=3 or fewer" in msg and "\n" not in msg
    check_fits(_cartpole(9_990, num_seeds=4), device_memory=1_201_079)  # the suggestion fits


def test_check_fits_splits_seeds_over_accelerators():
    cfg = _cartpole(10_000, num_seeds=4)  # 2 seeds a device: 600,540 bytes each
    check_fits(cfg, device_memory=600_540, seed_devices=2)
    with pytest.raises(ValueError, match="each of 2 devices holding 2 seed.*600,540 bytes"):
        check_fits(cfg, device_memory=600_539, seed_devices=2)
    cpu = jax.devices("cpu")[0]  # CPU devices share host RAM: no split
    with pytest.raises(ValueError, match="1,201,080 bytes"):
        check_fits(cfg, device=cpu, device_memory=600_540, seed_devices=2)


def test_check_fits_without_even_one_seed_names_no_share():
    cfg = _image(1_000)  # 1,000 x (84 x 84 x 4 + 14) bytes ~ 28 MB a seed; the smallest
    with pytest.raises(ValueError) as err:  # L2, 40 rows, 1.13 MB
        check_fits(cfg, device_memory=10**5, spec=IMAGE)
    msg = str(err.value)
    assert "auto:0.3" not in msg and "or fewer" not in msg and "Use fewer envs" in msg


def test_check_fits_l3_host_by_hand():
    cfg = _cartpole(8_000, num_seeds=2, replay={"l3": "host", "l3_capacity": 16_000})
    # L3: 16,000 x 2 x 30 = 960,000 bytes of host RAM (a GPU's L2 is elsewhere).
    check_fits(cfg, device_memory=10**9, host_memory=960_000)
    with pytest.raises(ValueError) as err:
        check_fits(cfg, device_memory=10**9, host_memory=959_999)
    msg = str(err.value)
    assert msg.startswith("ReplayConfig.l3_capacity=16000 rows per seed x TrainConfig.num_seeds=2")
    assert "960,000 bytes" in msg and "959,999 bytes) is free (host RAM" in msg
    assert "ReplayConfig.l3_capacity=15990 or less" in msg  # 959,999 // 60 -> 15,999 -> 15,990
    # On a CPU, L2 (2 x (240,000 + 270) bytes, plus the L3 prefetch) takes host RAM first.
    cpu = jax.devices("cpu")[0]
    p = plan(cfg, device_memory=10**9)
    host = p.device_bytes + 960_000
    check_fits(cfg, device=cpu, device_memory=10**9, host_memory=host)
    with pytest.raises(ValueError, match="less the device tiers a CPU keeps there too"):
        check_fits(cfg, device=cpu, device_memory=10**9, host_memory=host - 1)


def test_check_fits_l3_disk_counts_reclaimable_spill_dirs(tmp_path, monkeypatch):
    replay = {"l3": "disk", "l3_capacity": 16_000, "spill_dir": str(tmp_path)}
    cfg = _cartpole(8_000, replay=replay)  # L3 480,000 bytes
    dead = make_spill_dir(str(tmp_path))
    with open(os.path.join(dead, "obs.bin"), "wb") as f:
        f.write(b"\1" * 64 * 1024)
    owner = os.path.join(dead, "owner.json")
    with open(owner) as f:
        text = f.read().replace(f'"pid": {os.getpid()}', f'"pid": {2**22 + 12345}')
    with open(owner, "w") as f:
        f.write(text)
    (stale,) = find_stale_spill_dirs(str(tmp_path)).gone
    reclaim = stale.disk_bytes
    assert reclaim >= 64 * 1024

    def free(bytes_free):
        usage = type("Usage", (), {"free": bytes_free})
        monkeypatch.setattr(shutil, "disk_usage", lambda path: usage)

    free(480_000 - reclaim)  # fits once the killed run's directory is reclaimed
    check_fits(cfg, device_memory=10**9)
    free(480_000 - reclaim - 1)
    with pytest.raises(ValueError) as err:
        check_fits(cfg, device_memory=10**9)
    msg = str(err.value)
    assert "ReplayConfig.l3_capacity=16000" in msg and "480,000 bytes" in msg
    assert f"{480_000 - 1:,} bytes) is free (disk of spill_dir={str(tmp_path)!r}, counting" in msg
    assert os.path.isdir(dead)  # checking removes nothing
