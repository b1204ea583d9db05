"""Spill directories (`jaxrl_fast.replay.spill_dirs`): a SIGKILLed run's is reclaimed by the next
disk store, a live run's survives, a reused pid is not taken for its owner, kept, foreign and
ownerless directories are left alone, an interrupted reclaim is finished later."""

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

from jaxrl_fast.replay.spill import HostStore
from jaxrl_fast.replay.spill_dirs import (
    OWNER_FILE,
    find_stale_spill_dirs,
    format_bytes,
    make_spill_dir,
    process_start,
    reclaim_spill_dirs,
)

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


@pytest.mark.slow
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
    assert format_bytes(14 * 10**9) == "14.00 GB"
