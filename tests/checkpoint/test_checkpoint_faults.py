"""Checkpoint faults: damaged checkpoints, a full disk, the wall-time schedule, the device count,
and the checksums that catch garbled array bytes."""

from __future__ import annotations

import errno
import glob
import json
import os
import shutil
import subprocess
import sys
import warnings
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import child_env, tiny_config

from jaxrl_fast import checkpoint
from jaxrl_fast.run.train import train

# orbax's failed restores leave tensorstore callbacks that find their asyncio loop closed
# ("Exception ignored ... Event loop is closed"): harmless, and not this library's.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

_ARGS = {"progress": False, "checkpoint_every": 200, "keep": 4}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A finished tiny run keeping all 4 of its checkpoints (steps 1-4, 200 env steps apart)."""
    path = tmp_path_factory.mktemp("saved")
    return train(tiny_config(), run_dir=path, **_ARGS), path


def _hashes(path):
    with open(os.path.join(path, "summary.json")) as f:
        return [s["params_sha256"] for s in json.load(f)["seeds"]]


def _leaves(tree):
    return [np.asarray(checkpoint.store._data(x)) for x in jax.tree.leaves(tree)]


def _saver(where, config, **changes):
    kwargs = {"every_env_steps": 200, "keep": 4, "resume": True, **changes}
    return checkpoint.Checkpointer(str(where), config, **kwargs)


def _data_files(step_dir):
    return sorted(glob.glob(os.path.join(step_dir, "state", "**", "d", "*"), recursive=True))


def _truncate(step_dir):
    for f in _data_files(step_dir):
        os.truncate(f, os.path.getsize(f) // 2)


def _delete(step_dir):
    for f in _data_files(step_dir):
        os.remove(f)


def _garble(step_dir):
    """Flip one byte in the middle of every array data file (the kind of damage orbax reads
    without an error where it hits array bytes: the checksums catch it)."""
    for f in _data_files(step_dir):
        with open(f, "r+b") as fh:
            fh.seek(os.path.getsize(f) // 2)
            byte = fh.read(1)
            fh.seek(-1, os.SEEK_CUR)
            fh.write(bytes([byte[0] ^ 0x10]))


def _no_metadata(step_dir):
    os.remove(os.path.join(step_dir, "state", "_METADATA"))


def _no_record(step_dir):
    shutil.rmtree(os.path.join(step_dir, "record"))


_DAMAGE = {
    "truncated": _truncate,
    "deleted": _delete,
    "garbled": _garble,
    "no-metadata": _no_metadata,
    "no-record": _no_record,
}


@pytest.mark.slow
@pytest.mark.parametrize("damage", list(_DAMAGE))
def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(saved, tmp_path, damage):
    result, path = saved
    where = tmp_path / "checkpoints"
    shutil.copytree(path / "checkpoints", where)
    _DAMAGE[damage](where / "4")
    with pytest.warns(UserWarning) as caught:
        runner, record, step = _saver(where, result.config).restore_latest(result.runner)
    [warning] = [w for w in caught if "cannot be restored" in str(w.message)]
    text = str(warning.message)
    assert text.startswith(f"checkpoint 4 in {where} cannot be restored (")
    assert text.endswith("); trying the one before.") and "\n" not in text
    assert step == 3 and record["env_steps"] == 680
    pristine, _ = checkpoint.restore(checkpoint.manager(path / "checkpoints", 4), 3, result.runner)
    assert all(map(np.array_equal, _leaves(runner), _leaves(pristine)))
    # the damaged one is kept for inspection but never picked again
    assert sorted(os.listdir(where)) == ["1", "2", "3", "4.unreadable"]


@pytest.mark.slow
def test_resume_past_a_garbled_checkpoint_ends_where_the_uninterrupted_run_does(saved, tmp_path):
    result, path = saved
    run = tmp_path / "run"
    shutil.copytree(path, run)
    os.remove(run / "summary.json")
    _garble(run / "checkpoints" / "4")
    with pytest.warns(UserWarning, match=r"checkpoint 4 in .* cannot be restored"):
        train(result.config, run_dir=run, resume=True, **_ARGS)
    assert _hashes(run) == _hashes(path)
    assert sorted(os.listdir(run / "checkpoints")) == ["1", "2", "3", "4", "4.unreadable"]


def test_no_usable_checkpoint_is_an_error_and_changes_nothing(saved, tmp_path):
    result, path = saved
    where = tmp_path / "checkpoints"
    shutil.copytree(path / "checkpoints", where)
    for step in "1234":
        _truncate(where / step)
    with pytest.warns(UserWarning, match="cannot be restored"):
        with pytest.raises(ValueError, match=r"none of the checkpoints in .* \(steps 4, 3, 2, 1\)"):
            _saver(where, result.config).restore_latest(result.runner)
    assert sorted(os.listdir(where)) == ["1", "2", "3", "4"]


def test_resume_with_no_checkpoint_yet_starts_fresh(saved, tmp_path):
    result, _ = saved
    assert _saver(tmp_path / "none", result.config).restore_latest(result.runner) is None
    # killed during the first save: only an unfinished directory, which the manager removes
    (tmp_path / "first" / f"1{checkpoint.TMP_SUFFIX}" / "state").mkdir(parents=True)
    saver = _saver(tmp_path / "first", result.config)
    assert saver.restore_latest(result.runner) is None
    assert os.listdir(tmp_path / "first") == []


def test_garbled_array_bytes_are_caught_by_the_checksums(tmp_path):
    """A byte flipped inside an incompressible array: orbax restores it without an error, the
    record's CRC-32 does not match."""
    tree = {"bits": jax.random.bits(jax.random.key(0), (1 << 18,)), "k": jax.random.key(1)}
    mngr = checkpoint.manager(tmp_path, 1)
    checkpoint.save(mngr, 1, tree, {})
    biggest = max(_data_files(tmp_path / "1"), key=os.path.getsize)
    with open(biggest, "r+b") as f:
        f.seek(os.path.getsize(biggest) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(ValueError, match=r"checkpoint 1: leaf \['bits'\] does not match the CRC"):
        checkpoint.restore(mngr, 1, tree)


def _fail_on_commit(monkeypatch, root, seen):
    """Make orbax's write of a checkpoint's commit file fail with ENOSPC: every array of the
    checkpoint is written by then, the rename into place not done. `seen` gets the files of
    the unfinished checkpoint at that moment."""
    from orbax.checkpoint._src.path import async_path

    write_text = async_path.write_text

    async def full_disk(path, text, *args, **kwargs):
        if os.path.basename(path) == "commit_success.txt" and checkpoint.TMP_SUFFIX in str(path):
            seen.extend(glob.glob(f"{root}/*{checkpoint.TMP_SUFFIX}*/**/*", recursive=True))
            raise OSError(errno.ENOSPC, "No space left on device", os.fspath(path))
        return await write_text(path, text, *args, **kwargs)

    monkeypatch.setattr(async_path, "write_text", full_disk)


def test_a_full_disk_during_a_save_is_one_clear_error_and_keeps_the_earlier_ones(
    saved, tmp_path, monkeypatch
):
    result, _ = saved
    saver = _saver(tmp_path, result.config, every_env_steps=200, keep=2)
    for chunk in (1, 2):
        assert saver.after_chunk(chunk, result.runner, lambda chunk=chunk: {"chunk": chunk})
    written = []
    _fail_on_commit(monkeypatch, tmp_path, written)
    with pytest.raises(OSError) as failed:
        saver.after_chunk(3, result.runner, lambda: {"chunk": 3})
    assert any(f"{os.sep}d{os.sep}" in f for f in written)  # array data had been written
    assert failed.value.errno == errno.ENOSPC
    message = str(failed.value)
    assert f"checkpoint of chunk 3 to {tmp_path} failed" in message
    assert "the disk may be full" in message and "(steps 1, 2) are intact" in message
    assert sorted(os.listdir(tmp_path)) == ["1", "2"]  # no half checkpoint left to pick
    monkeypatch.undo()
    again = _saver(tmp_path, result.config)
    runner, record, step = again.restore_latest(result.runner)
    assert step == 2 and record["chunk"] == 2
    assert all(map(np.array_equal, _leaves(runner), _leaves(result.runner)))
    assert saver.after_chunk(3, result.runner, lambda: {"chunk": 3})  # space again: it saves
    assert sorted(os.listdir(tmp_path)) == ["2", "3"]


_FILE_SIZE_LIMIT = """
import json, os, resource, signal, sys
import jax
from jaxrl_fast import checkpoint

where = sys.argv[1]
tree = {"bits": jax.random.bits(jax.random.key(0), (1 << 18,)), "k": jax.random.key(1)}
mngr = checkpoint.manager(where, 3)
checkpoint.save(mngr, 1, tree, {})
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    checkpoint.save(mngr, 2, tree, {})
    out = {"raised": None}
except OSError as err:
    out = {"raised": "OSError", "errno": err.errno, "message": str(err)}
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
out["left"] = sorted(os.listdir(where))
restored, _ = checkpoint.restore(checkpoint.manager(where, 3), 1, tree)
out["restored_equal"] = bool((restored["bits"] == tree["bits"]).all())
print(json.dumps(out))
"""


@pytest.mark.slow
def test_a_failed_write_inside_tensorstore_is_reported_alike(tmp_path):
    """A real low-level write failure (the file-size limit makes the kernel refuse the array
    data file's write inside tensorstore's C++): the same one error, nothing half-saved."""
    proc = subprocess.run(
        [sys.executable, "-c", _FILE_SIZE_LIMIT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["raised"] == "OSError" and out["errno"] == errno.EFBIG
    assert f"checkpoint of chunk 2 to {tmp_path} failed" in out["message"]
    assert "File too large" in out["message"] and "the disk may be full" in out["message"]
    assert out["left"] == ["1"] and out["restored_equal"]


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_a_checkpoint_at_least_every_every_seconds_of_wall_time(monkeypatch, tmp_path):
    cfg = tiny_config(total_env_steps=80 + 200 * 10, num_chunks=10)
    saves = []

    def fake_save(mngr, step, *a, **k):
        saves.append(step)

    monkeypatch.setattr(checkpoint.checkpointer, "save", fake_save)
    clock = _Clock()
    saver = checkpoint.Checkpointer(
        str(tmp_path), cfg, every_env_steps=10_000, keep=1, resume=False, clock=clock
    )
    assert saver.every_seconds == 600 and saver.every_chunks == 50  # by env steps: only the last
    saver._manager = object()  # no orbax manager needed: `save` is replaced
    for chunk, elapsed in [(1, 100), (2, 599), (3, 601), (4, 900), (5, 1200), (6, 1201)]:
        clock.now = 1000.0 + elapsed
        saver.after_chunk(chunk, None, dict)
    assert saves == [3, 6]  # 601 s after the start; 600 s after that save (at 1200 s, 599 s)
    clock.now += 10
    saver.after_chunk(10, None, dict)  # the last chunk is always saved
    assert saves == [3, 6, 10]


_NEVER = {"every_env_steps": None, "keep": 1, "resume": False}


@pytest.mark.parametrize("bad", [0, -1.0, float("nan")])
def test_every_seconds_must_be_positive(bad, tmp_path):
    with pytest.raises(ValueError, match=r"every_seconds=.*: must be > 0 seconds"):
        checkpoint.Checkpointer(
            str(tmp_path),
            tiny_config(),
            every_env_steps=None,
            keep=1,
            resume=False,
            every_seconds=bad,
        )
    with pytest.raises(ValueError, match=r"num_devices=0: must be >= 1"):
        checkpoint.Checkpointer(str(tmp_path), tiny_config(), **_NEVER, num_devices=0)
    assert os.listdir(tmp_path) == []  # refused before anything was made


def test_the_record_holds_the_device_count_and_a_resume_on_another_warns(saved, tmp_path):
    result, path = saved
    mngr = checkpoint.manager(path / "checkpoints", 4)
    _, record = checkpoint.restore(mngr, 4, result.runner)
    assert record["num_devices"] == result.num_devices == checkpoint.device_count(result.runner)
    other = result.num_devices + 1
    saver = _saver(tmp_path, result.config, num_devices=other)
    saver.after_chunk(4, result.runner, lambda: {"env_steps": 880})
    with pytest.warns(
        UserWarning,
        match=rf"over {other} device\(s\) and this run uses "
        rf"{result.num_devices}: .* float rounding, not bitwise",
    ):
        _saver(tmp_path, result.config).restore_latest(result.runner)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _saver(tmp_path, result.config, num_devices=other).restore_latest(result.runner)
    assert not [w for w in caught if "device(s)" in str(w.message)]  # the same count: no warning


@pytest.mark.parametrize(
    "x",
    [
        jnp.arange(7, dtype=jnp.int8),
        jnp.asarray(3.5, jnp.float32),
        jnp.ones((3, 5, 7), bool),
        jax.random.key_data(jax.random.split(jax.random.key(0), 6)),
        jax.random.normal(jax.random.key(1), (4, 33, 10)),
        jax.random.normal(jax.random.key(2), (1, 9, 300)),
    ],
    ids=["int8", "scalar", "bool", "key-data", "rows", "one-big-row"],
)
def test_crc32_is_the_bytes_in_c_order_read_in_place_or_in_blocks(x, monkeypatch):
    """The in-place read (CPU) and the 64 MiB blocks (elsewhere) give zlib's CRC-32 of the
    bytes; with tiny blocks, rows and single rows are split."""
    monkeypatch.setattr(checkpoint.crc, "_CRC_BLOCK_BYTES", 1000)  # many blocks, rows split
    expected = zlib.crc32(np.asarray(x).tobytes())
    assert checkpoint.crc32(x) == expected
    blocks = list(checkpoint.crc._host_blocks(x))  # the path for accelerators and odd layouts
    assert checkpoint.crc._crc(blocks) == expected
    assert all(b.nbytes <= 1000 for b in blocks) and len(blocks) >= x.nbytes / 1000


_SHARDED = """
import json, sys, zlib
from jaxrl_fast import parallel
parallel.use_cpu_cores(2)
import jax, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
from jaxrl_fast import checkpoint

mesh = jax.make_mesh((2,), ("seed",))
x = jax.random.normal(jax.random.key(0), (4, 300, 5))
split = jax.device_put(x, NamedSharding(mesh, P("seed")))
copied = jax.device_put(x, NamedSharding(mesh, P()))
out = {"devices": checkpoint.device_count(split), "expected": zlib.crc32(np.asarray(x).tobytes())}
out["in_place"] = [checkpoint.crc._readable_in_place(a) for a in (split, copied)]
blocked = [checkpoint.crc._crc(checkpoint.crc._host_blocks(a)) for a in (split, copied)]
out["crcs"] = [checkpoint.crc32(a) for a in (split, copied)] + blocked
print(json.dumps(out))
"""


@pytest.mark.slow
def test_crc32_is_the_same_for_any_layout_over_devices():
    proc = subprocess.run(  # 2 CPU devices: pinned to the CPU platform on a GPU machine
        [sys.executable, "-c", _SHARDED],
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["devices"] == 2 and out["in_place"] == [True, True]
    assert out["crcs"] == [out["expected"]] * 4
