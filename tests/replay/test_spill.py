"""The host side of L3 (`jaxrl_fast.replay.spill.HostStore`): prefetched reads equal synchronous
ones, seeded uniform reads, the stored fields (`layout.stored_fields`) and frame-stack errors;
spill directories: a SIGKILLed run's is reclaimed by the next store, a live run's survives, a
reused pid is not taken for its owner, kept and ownerless directories are left alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

from jaxrl_fast.replay import spill
from jaxrl_fast.replay.layout import stored_fields
from jaxrl_fast.replay.spill import (
    OWNER_FILE,
    HostStore,
    find_stale_spill_dirs,
    make_spill_dir,
    process_start,
    reclaim_spill_dirs,
)


def test_prefetch_returns_what_a_synchronous_read_returns():
    kw = dict(num_seeds=2, slots=8, num_envs=2, obs_shape=(3,), obs_dtype=np.uint8)
    sync, pre = HostStore("host", prefetch=False, **kw), HostStore("host", prefetch=True, **kw)
    rng = np.random.default_rng(0)
    requests, got_sync, got_pre = [], [], []
    for b in range(6):  # write 4-slot blocks, read after each: reads see the FIFO move
        block = dict(
            obs=rng.integers(0, 255, (2, 4, 2, 3), np.uint8),
            action=rng.integers(0, 4, (2, 4, 2), np.int32),
            reward=rng.normal(size=(2, 4, 2)).astype(np.float32),
            discount=np.full((2, 4, 2), 0.9, np.float32),
            offset=np.ones((2, 4, 2), np.int8),
            valid=rng.random((2, 4, 2)) > 0.2,
        )
        for store in (sync, pre):
            store.write(4 * b, **block)
        lo = max(0, 4 * b + 4 - 8)
        req = (
            rng.integers(lo, 4 * b + 3, (2, 5, 3)),
            rng.integers(0, 2, (2, 5, 3)),
            np.ones((2, 5, 3), bool),
        )
        requests.append(req)
        got_sync.append(sync.read(*req))
        got_pre.append(pre.read(*req))
    assert got_pre[0].weight.sum() == 0  # nothing was requested before the first call
    for a, b in zip(got_sync[:-1], got_pre[1:], strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    sync.close(), pre.close()


def test_read_uniform_is_seeded_and_in_range():
    kw = dict(num_seeds=2, slots=8, num_envs=2, obs_shape=(1,), obs_dtype=np.float32)
    a, b, c = (HostStore("host", prefetch=False, seed=s, **kw) for s in (3, 3, 4))
    for store in (a, b, c):
        obs = np.arange(2 * 8 * 2, dtype=np.float32).reshape(2, 8, 2, 1)
        ones = np.ones((2, 8, 2))
        store.write(0, obs, ones.astype(np.int32), ones, ones, ones.astype(np.int8), ones > 0)
    ra, rb, rc = (s.read_uniform(5, 2, 8, shape=(3, 4)) for s in (a, b, c))
    np.testing.assert_array_equal(ra.obs, rb.obs)  # same seed and read count: same rows
    assert not np.array_equal(ra.obs, rc.obs)
    slot = (ra.obs[..., 0] % 16) // 2  # obs value = seed * 16 + slot * 2 + env
    assert ((slot >= 2) & (slot < 6)).all() and ra.weight.all()  # 8 rows = slots 2..5
    assert not a.read_uniform(6, 0, 0, shape=(3, 4)).weight.any()  # nothing to read yet
    for s in (a, b, c):
        s.close()


def test_host_store_frame_stack_errors():
    kw = dict(num_seeds=1, slots=4, num_envs=1, obs_dtype=np.uint8)
    with pytest.raises(ValueError, match="last axis stacks 4 frames"):
        HostStore("host", obs_shape=(2, 3, 3), frame_stack=4, **kw)
    store = HostStore("host", obs_shape=(2, 3, 4), frame_stack=4, **kw)
    assert store.arrays["obs"].shape == (1, 4, 1, 2, 3)
    ones = np.ones((1, 2, 1))
    block = (np.zeros((1, 2, 1, 2, 3), np.uint8), ones.astype(np.int32), ones, ones)
    with pytest.raises(ValueError, match="`fresh` flags are required"):
        store.write(0, *block, ones.astype(np.int8), ones > 0)
    store.write(0, *block, ones.astype(np.int8), ones > 0, fresh=ones > 0)
    assert store.slots_written == 2
    store.close()


def test_store_holds_the_layout_fields_positionally_or_by_name():
    kw = dict(num_seeds=1, slots=4, num_envs=1, obs_shape=(2, 3, 4), obs_dtype=np.uint8)
    store = HostStore("host", frame_stack=4, **kw)
    fields = stored_fields((2, 3, 4), np.uint8, 4)
    assert store.fields == tuple(fields)
    for name, (shape, dtype) in fields.items():
        assert store.arrays[name].shape == (1, 4, 1, *shape) and store.arrays[name].dtype == dtype
    assert store.nbytes == 4 * (6 + 1 + 14)  # layout.row_bytes per row
    block = {
        name: np.full((1, 2, 1, *shape), i + 1, dtype) for i, (name, (shape, dtype)) in
        enumerate(fields.items())
    }  # fmt: skip
    store.write(0, *block.values())
    store.write(2, **block)
    for name, value in block.items():
        np.testing.assert_array_equal(
            store.slot_rows(0, 0, 4)[name], np.concatenate([value[0]] * 2)
        )
    with pytest.raises(ValueError, match="expected fields"):
        store.write(0, **{k: v for k, v in block.items() if k != "obs"}, frames=block["obs"])
    store.close()


# ---- spill directories ---------------------------------------------------------------------

_STORE = dict(num_seeds=1, slots=64, num_envs=4, obs_shape=(84, 84), obs_dtype=np.uint8)
_CHILD = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from jaxrl_fast.replay.spill import HostStore
    store = HostStore("disk", spill_dir=sys.argv[1], **%r)
    store.arrays["obs"][:] = 7  # real blocks on disk, not only a sparse file
    store.arrays["obs"].flush()
    print(store.path, store.nbytes, flush=True)
    time.sleep(600)
    """
)


def _start_store_process(spill_dir) -> tuple[subprocess.Popen, str, int]:
    """A python process holding a disk HostStore in `spill_dir`; its path and bytes."""
    src = _CHILD % (dict(_STORE, obs_dtype="uint8"),)
    proc = subprocess.Popen(
        [sys.executable, "-c", src, str(spill_dir)], stdout=subprocess.PIPE, text=True
    )
    line = proc.stdout.readline().split()
    assert line, f"the store process failed (rc {proc.poll()})"
    return proc, line[0], int(line[1])


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)  # reaped: no zombie left holding the pid


def test_sigkilled_runs_spill_dir_is_reclaimed_and_a_live_ones_survives(tmp_path):
    killed, killed_path, nbytes = _start_store_process(tmp_path)
    live, live_path, _ = _start_store_process(tmp_path)
    try:
        with open(os.path.join(killed_path, OWNER_FILE)) as f:
            owner = json.load(f)
        assert owner["pid"] == killed.pid and owner["start"] == process_start(killed.pid)
        assert os.path.basename(killed_path).startswith(f"jaxrl_fast-l3-{killed.pid}-")
        _kill(killed)  # SIGKILL: no close(), no finalizer, no atexit
        assert os.path.isdir(killed_path)
        with pytest.warns(
            UserWarning, match=r"reclaimed 1 L3 spill dir\(s\) in .* apparent.*on disk"
        ):
            store = HostStore("disk", spill_dir=str(tmp_path), **_STORE)
        assert not os.path.exists(killed_path)
        assert os.path.isdir(live_path) and live.poll() is None  # a live run's dir: untouched
        assert os.path.isdir(store.path)
        store.close()
        assert not os.path.exists(store.path)
    finally:
        _kill(live)
    with pytest.warns(UserWarning, match="reclaimed 1 L3 spill dir"):
        gone = reclaim_spill_dirs(str(tmp_path)).gone
    assert [u.path for u in gone] == [live_path] and not os.path.exists(live_path)
    assert gone[0].apparent_bytes >= nbytes  # the memmaps, and the owner file
    assert gone[0].disk_bytes >= 64 * 4 * 84 * 84  # the obs frames written
    assert os.listdir(tmp_path) == []


def _fake_owner(path: str, **changes) -> None:
    owner_path = os.path.join(path, OWNER_FILE)
    with open(owner_path) as f:
        owner = json.load(f) | changes
    with open(owner_path, "w") as f:
        json.dump(owner, f)


def test_reused_pid_is_not_taken_for_the_owner(tmp_path):
    mine = make_spill_dir(str(tmp_path))  # this process: running, same start time
    reused = make_spill_dir(str(tmp_path))
    _fake_owner(reused, start=process_start(os.getpid()) + 1)  # same pid, another process
    rebooted = make_spill_dir(str(tmp_path))
    _fake_owner(rebooted, boot_id="00000000-0000-0000-0000-000000000000")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing else is reported
        with pytest.warns(UserWarning, match="reclaimed 2 L3 spill dir"):
            gone = reclaim_spill_dirs(str(tmp_path)).gone
    assert sorted(u.path for u in gone) == sorted([reused, rebooted])
    assert os.listdir(tmp_path) == [os.path.basename(mine)]


def test_kept_other_machines_and_other_namespaces_dirs_are_not_reclaimed(tmp_path):
    dead = 2**22 + 12345  # above the default pid_max: no such process
    assert process_start(dead) is None
    kept = make_spill_dir(str(tmp_path), keep=True)
    _fake_owner(kept, pid=dead)
    elsewhere = make_spill_dir(str(tmp_path))
    _fake_owner(elsewhere, pid=dead, host="another-host")
    container = make_spill_dir(str(tmp_path))
    _fake_owner(container, pid=dead, pid_ns="pid:[1]")
    stale = find_stale_spill_dirs(str(tmp_path))
    assert stale.gone == [] and stale.unowned == []
    dead_dir = make_spill_dir(str(tmp_path))
    _fake_owner(dead_dir, pid=dead)
    assert [u.path for u in find_stale_spill_dirs(str(tmp_path)).gone] == [dead_dir]


def test_dirs_without_owner_are_reported_not_removed(tmp_path):
    old = tmp_path / "jaxrl_fast-l3-abc123"  # the format before owner files
    old.mkdir()
    (old / "obs.bin").write_bytes(b"x" * 5000)
    young = tmp_path / "jaxrl_fast-l3-def456"  # may be a store still writing its owner file
    young.mkdir()
    past = time.time() - 3600
    os.utime(old, (past, past))
    with pytest.warns(UserWarning) as record:
        found = reclaim_spill_dirs(str(tmp_path))
    assert found.gone == [] and [u.path for u in found.unowned] == [str(old)]
    assert found.unowned[0].apparent_bytes == 5000
    (message,) = [str(w.message) for w in record]
    assert "1 L3 spill dir(s) with no owner.json" in message and "5.00 kB apparent" in message
    assert f"rm -rf {old}" in message and "\n" not in message
    assert old.is_dir() and young.is_dir()


def test_interrupted_reclaim_is_finished_later(tmp_path):
    path = make_spill_dir(str(tmp_path))
    (open(os.path.join(path, "obs.bin"), "wb")).close()
    _fake_owner(path, pid=2**22 + 12345)
    half = path + ".reclaiming"  # renamed, then killed before the owner file went
    os.rename(path, half)
    os.unlink(os.path.join(half, "obs.bin"))
    with pytest.warns(UserWarning, match="reclaimed 1"):
        assert [u.path for u in reclaim_spill_dirs(str(tmp_path)).gone] == [half]
    assert os.listdir(tmp_path) == []


def test_process_start_reads_proc_stat_field_22():
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc")
    with open("/proc/self/stat") as f:
        stat = f.read()
    assert process_start(os.getpid()) == int(stat.rsplit(")", 1)[1].split()[19])
    assert process_start(0) is None and process_start(2**22 + 12345) is None
    assert spill.format_bytes(14 * 10**9) == "14.00 GB"
