"""Spill directories of the disk L3 (`l3="disk"`, `replay/spill.py`): making them, who owns them,
and reclaiming those of runs that are gone.

Spill directories are `spill_dir/jaxrl_fast-l3-<pid>-<random>/` and hold an `owner.json` naming
the process that made them: host, machine and boot ids, pid namespace, pid and the pid's start
time (/proc/<pid>/stat field 22), so a reused pid is not taken for the owner. `HostStore.close()`
(or the store's garbage collection, or a normal exit) removes the directory; a run killed with
SIGKILL cannot. So every new disk store first reclaims, in its `spill_dir`, the directories whose
owner is certainly gone (`reclaim_spill_dirs`) and warns in one line how many and how many bytes
(apparent and on disk) it removed. Never touched: directories of live processes, of processes
this machine cannot check (another host, another pid namespace, another user), those kept by
`keep_spill=True`, and directories without `owner.json` (made before owner files existed: they
are only reported, with their paths, sizes and the `rm -rf` that removes them, since nothing
tells whether their run is still live).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
import warnings
from typing import NamedTuple


def check_spill_dir(spill_dir: str, needed_bytes: int) -> None:
    """Raise a clear `ValueError` unless `spill_dir` exists, is writable and has room.

    Args:
      spill_dir: the directory the L3 files go under.
      needed_bytes: bytes the L3 files will take.
    """
    if not os.path.isdir(spill_dir):
        raise ValueError(
            f"ReplayConfig.spill_dir={spill_dir!r} is not allowed; expected an existing "
            f"directory (create it first)."
        )
    try:
        with tempfile.TemporaryFile(dir=spill_dir):
            pass
    except OSError as e:
        raise ValueError(
            f"ReplayConfig.spill_dir={spill_dir!r} is not allowed; expected a writable "
            f"directory ({e.strerror})."
        ) from None
    free = shutil.disk_usage(spill_dir).free
    if free < needed_bytes:
        raise ValueError(
            f"ReplayConfig.spill_dir={spill_dir!r} has {free / 2**30:.2f} GiB free; the "
            f"configured L3 (l3_capacity x seeds) needs {needed_bytes / 2**30:.2f} GiB. Lower "
            f"ReplayConfig.l3_capacity or choose another spill_dir."
        )


def remove_spill_dir(path: str) -> None:
    """Remove a spill directory and everything in it; a missing one is no error."""
    shutil.rmtree(path, ignore_errors=True)


def format_bytes(n: float) -> str:
    """`n` bytes with an SI unit: "512 B", "30.27 kB", "1.61 GB"."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


# ---- spill directories: who owns them, and reclaiming those of runs that are gone ------------
SPILL_PREFIX = "jaxrl_fast-l3-"
OWNER_FILE = "owner.json"
_RECLAIMING = ".reclaiming"  # suffix of a directory being removed (still matches the prefix)
_GRACE_S = 60.0  # an ownerless directory this young may be a store writing its owner file
_UNKNOWN_START = -1  # the process runs, but no /proc says since when


class SpillDirUsage(NamedTuple):
    """A spill directory and its size: `apparent_bytes` (file sizes; the memory-mapped files
    are sparse) and `disk_bytes` (blocks allocated)."""

    path: str
    apparent_bytes: int
    disk_bytes: int


class StaleSpillDirs(NamedTuple):
    """Spill directories in a `spill_dir` that no live run owns.

    Attributes:
      gone: directories whose owner process is certainly gone (`reclaim_spill_dirs` removes
        them); after a reclaim, those it removed.
      unowned: directories without owner information (older jaxrl_fast): reported, never removed.
    """

    gone: list[SpillDirUsage]
    unowned: list[SpillDirUsage]


def _read_text(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _machine() -> dict:
    """What identifies this machine, its boot and this process's pid namespace."""
    machine = _read_text("/etc/machine-id") or _read_text("/var/lib/dbus/machine-id")
    boot = _read_text("/proc/sys/kernel/random/boot_id")
    try:
        pid_ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pid_ns = None
    return {
        "host": socket.gethostname(),
        "machine_id": machine.strip() if machine else None,
        "boot_id": boot.strip() if boot else None,
        "pid_ns": pid_ns,
    }


def process_start(pid: int) -> int | None:
    """When process `pid` started, in clock ticks after boot (/proc/<pid>/stat field 22).

    Returns:
      The start time; None when no such process runs (a zombie counts as gone); -1 when it runs
      but there is no /proc to say when it started (not Linux).
    """
    if pid <= 0:
        return None
    stat = _read_text(f"/proc/{pid}/stat")
    if stat is not None:
        # Field 2 (comm) may hold spaces and ")": the fields after its last ")" are 3, 4, ...
        rest = stat[stat.rindex(")") + 2 :].split()
        return None if rest[0] in ("Z", "X") else int(rest[22 - 3])
    if os.path.isdir("/proc/self"):
        return None  # Linux, and no /proc/<pid>: not running
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:  # e.g. another user's process: it runs
        pass
    return _UNKNOWN_START


def _owner(keep: bool) -> dict:
    pid = os.getpid()
    return {
        "pid": pid,
        "start": process_start(pid),
        **_machine(),
        "keep": keep,
        "made": time.time(),
    }


def _owner_gone(owner: dict, here: dict) -> bool:
    """True only when the process that made a spill directory is certainly not running."""
    if any(owner.get(k) != here[k] for k in ("host", "machine_id")):
        return False  # another machine's run (a shared file system): it cannot be checked here
    if owner.get("boot_id") and here["boot_id"] and owner["boot_id"] != here["boot_id"]:
        return True  # this machine rebooted since: no process of the earlier boot runs
    if owner.get("pid_ns") != here["pid_ns"]:
        return False  # another container's pids: the same number is another process here
    pid, started = owner.get("pid"), owner.get("start")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return False
    now = process_start(pid)
    if now is None:
        return True
    # The pid runs: it is the owner unless it started at another time (the pid was reused).
    return isinstance(started, int) and started >= 0 and now >= 0 and now != started


def _usage(path: str) -> SpillDirUsage:
    apparent = disk = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            apparent += st.st_size
            disk += getattr(st, "st_blocks", 0) * 512  # st_blocks counts 512-byte units
    return SpillDirUsage(path, apparent, disk)


def make_spill_dir(spill_dir: str, *, keep: bool = False) -> str:
    """Make a fresh spill directory in `spill_dir`, its `owner.json` naming this process.

    Args:
      spill_dir: an existing, writable directory.
      keep: the run keeps its L3 files (`keep_spill`): never reclaimed, even once it ends.

    Returns:
      The new directory's path.
    """
    path = tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{os.getpid()}-", dir=spill_dir)
    tmp = os.path.join(path, OWNER_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(_owner(keep), f)
    os.replace(tmp, os.path.join(path, OWNER_FILE))  # readers see the whole file or none
    return path


def find_stale_spill_dirs(spill_dir: str) -> StaleSpillDirs:
    """List the spill directories in `spill_dir` that no live run owns; removes nothing.

    Returns:
      `StaleSpillDirs`: `gone`, the directories of this user whose owner process is certainly
      not running (dead pid, or the pid now runs a process that started at another time, or the
      machine rebooted since) and not kept; `unowned`, directories without a readable
      `owner.json` (older than a minute, so a store still writing its owner file is not one).
    """
    gone, unowned = [], []
    try:
        entries = [e for e in os.scandir(spill_dir) if e.name.startswith(SPILL_PREFIX)]
    except OSError:
        return StaleSpillDirs(gone, unowned)
    here, uid = _machine(), os.getuid()
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        text = _read_text(os.path.join(entry.path, OWNER_FILE))
        try:
            owner = json.loads(text) if text is not None else None
        except ValueError:
            owner = None
        if not isinstance(owner, dict):
            if time.time() - st.st_mtime >= _GRACE_S:
                unowned.append(_usage(entry.path))
        elif st.st_uid == uid and not owner.get("keep") and _owner_gone(owner, here):
            gone.append(_usage(entry.path))
    return StaleSpillDirs(gone, unowned)


def _remove_owner_last(path: str) -> None:
    """Remove a spill directory, its owner file last: a removal cut short is reclaimed later."""
    try:
        for entry in os.scandir(path):
            if entry.name != OWNER_FILE:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
    except OSError:
        pass
    remove_spill_dir(path)


def reclaim_spill_dirs(spill_dir: str) -> StaleSpillDirs:
    """Remove the spill directories in `spill_dir` of runs that are gone, and say so.

    Warns (`UserWarning`, one line each) with how many directories were reclaimed and their bytes
    (apparent and on disk), and with the paths, sizes and removal command of directories without
    owner information, which are left alone. Directories of live runs are not touched.

    Args:
      spill_dir: a directory holding `jaxrl_fast-l3-*` spill directories.

    Returns:
      `StaleSpillDirs`: `gone` the directories removed, `unowned` those reported.

    Examples:
      >>> import tempfile
      >>> d = tempfile.mkdtemp()
      >>> path = make_spill_dir(d)  # this process's: alive, so not reclaimed
      >>> reclaim_spill_dirs(d).gone, os.path.isdir(path)
      ([], True)
      >>> shutil.rmtree(d)
    """
    found = find_stale_spill_dirs(spill_dir)
    removed = []
    for usage in found.gone:
        path = usage.path
        if not path.endswith(_RECLAIMING):  # claim it: of two runs reclaiming, one renames it
            try:
                os.rename(path, path + _RECLAIMING)
            except OSError:
                continue
            path += _RECLAIMING
        _remove_owner_last(path)
        if not os.path.exists(path):
            removed.append(usage)
    if removed:
        apparent = sum(u.apparent_bytes for u in removed)
        disk = sum(u.disk_bytes for u in removed)
        warnings.warn(
            f"reclaimed {len(removed)} L3 spill dir(s) in {spill_dir} left by runs that are gone "
            f"(killed before they could remove them): {format_bytes(apparent)} apparent, "
            f"{format_bytes(disk)} on disk.",
            UserWarning,
            stacklevel=2,
        )
    if found.unowned:
        apparent = sum(u.apparent_bytes for u in found.unowned)
        disk = sum(u.disk_bytes for u in found.unowned)
        paths = " ".join(u.path for u in found.unowned)
        warnings.warn(
            f"{spill_dir} holds {len(found.unowned)} L3 spill dir(s) with no {OWNER_FILE} (made "
            f"by an older jaxrl_fast), {format_bytes(apparent)} apparent, {format_bytes(disk)} on "
            f"disk; they are never removed automatically, as their run may still be live. Once "
            f"no run uses them: rm -rf {paths}",
            UserWarning,
            stacklevel=2,
        )
    return StaleSpillDirs(removed, found.unowned)
