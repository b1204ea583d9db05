"""What a checkpoint of a large train state costs: seconds, memory and disk.

Builds the `minatar-breakout` run with a 1,000,000-row replay for one seed (the ring is ~1.61 GB
of the ~1.62 GB state), initialises its runner, fills the replay ring, then times
`checkpoint.save` and `checkpoint.restore` while a thread samples the process RSS
(/proc/self/statm) every ~2 ms. Reported per fill of the ring:

* replay bytes, state bytes (every leaf of the runner);
* RSS before the save, its peak during the save, peak minus before, and that increase over the
  state's bytes (the memory a save needs on top of the state itself);
* save seconds, restore seconds and the restore's RSS increase over the state's bytes (the
  restored state itself is 1.0 of it), checkpoint bytes on disk, and whether the restored state
  equals the saved one bit for bit.

Fills: `zeros` is the state as `init` leaves it (an early checkpoint; compresses to almost
nothing), `sparse` is MinAtar-like (observation cells 1.0 with probability 0.1, else 0.0; small
random actions and offsets; all rows valid), `random` is uniform random bits in every ring leaf
(incompressible: the most disk and write time a ring can take).

Each (checkpoint module, fill) runs in its own process, so no measurement sees memory another
one freed. `--compare REV` also measures `jaxrl_fast/checkpoint.py` as it was at git revision
REV (same runner, same fills), for a before/after table.

    python benchmarks/checkpoint_save.py                      # full run (~3 min, ~6 GB RAM)
    python benchmarks/checkpoint_save.py --compare f1d4674    # and the checkpoint.py of f1d4674
    python benchmarks/checkpoint_save.py --quick              # 20,000 rows, zeros (seconds)

Writes benchmarks/results/checkpoint_save/checkpoint-save.{json,md} (`--quick`: checkpoint-save-quick.*).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib

import common  # noqa: E402
from common import machine, machine_line, write_results  # noqa: E402

_PAGE = os.sysconf("SC_PAGE_SIZE")
_HERE = os.path.dirname(os.path.abspath(__file__))


def rss_bytes() -> int:
    """The process's resident set size now, from /proc/self/statm."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


class PeakRss:
    """Samples the RSS every `period_s` in a thread while in the `with` block; `.peak`."""

    def __init__(self, period_s: float = 0.002) -> None:
        self.period_s, self.peak, self.samples = period_s, 0, 0
        self._stop = threading.Event()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            self.samples += 1
            time.sleep(self.period_s)

    def __enter__(self) -> PeakRss:
        self.before = rss_bytes()
        self.peak = self.before
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


def disk_bytes(path: str) -> int:
    """Bytes of the files under `path`."""
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def fill_ring(runner, fill: str, seed: int = 0):
    """`runner` with its replay ring's leaves filled as `fill` says (see the module docstring),
    made by jitted functions (XLA's own buffers, as a real runner's are) and ready."""
    import jax
    import jax.numpy as jnp

    if fill == "zeros":
        return runner

    def make(name, key, like):
        shape, dtype = like.shape, like.dtype
        if fill == "random":
            if dtype == jnp.bool_:
                return jax.random.bernoulli(key, 0.5, shape)
            bits = jax.random.bits(key, shape, jnp.dtype(f"uint{dtype.itemsize * 8}"))
            return jax.lax.bitcast_convert_type(bits, dtype)
        if name.endswith(".obs"):
            return jax.random.bernoulli(key, 0.1, shape).astype(dtype)
        if name.endswith(".valid"):
            return jnp.ones(shape, dtype)
        if jnp.issubdtype(dtype, jnp.integer):
            return jax.random.randint(key, shape, 0, 3).astype(dtype)
        return jax.random.bernoulli(key, 0.05, shape).astype(dtype)

    key = jax.random.key(seed)

    def leaf(path, x):
        name = jax.tree_util.keystr(path)
        if ".replay.ring." not in name or x.ndim < 2:
            return x
        k = jax.random.fold_in(key, zlib.crc32(name.encode()) >> 1)
        return jax.jit(lambda k: make(name, k, x), out_shardings=x.sharding)(k)

    return jax.block_until_ready(jax.tree_util.tree_map_with_path(leaf, runner))


def _bitwise_equal(a, b) -> bool:
    import jax
    import numpy as np

    def host(x):
        key = jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
        return np.asarray(jax.random.key_data(x) if key else x).reshape(-1)

    a, b = host(a), host(b)
    return a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def _load_module(path: str | None):
    """jaxrl_fast.checkpoint, or the checkpoint module in the file `path`."""
    if path is None:
        from jaxrl_fast import checkpoint

        return checkpoint
    import importlib.util

    spec = importlib.util.spec_from_file_location("checkpoint_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure_one(capacity: int, fill: str, module_path: str | None, where: str) -> dict:
    """One row: build and fill the runner, then save and restore it with the module."""
    import gc

    import jax

    from jaxrl_fast import presets
    from jaxrl_fast.loop import make_train
    from jaxrl_fast.loop.resolve import resolve
    from jaxrl_fast.parallel import seeds

    checkpoint = _load_module(module_path)
    config = presets.get("minatar-breakout").replace(replay={"capacity": capacity}, num_seeds=1)
    fns = make_train(resolve(config))
    runner = fill_ring(jax.block_until_ready(jax.jit(fns.init)(seeds.train_keys(config))), fill)
    replay = sum(x.nbytes for x in jax.tree.leaves(runner.seeds.replay))
    state = sum(x.nbytes for x in jax.tree.leaves(runner))
    mngr = checkpoint.manager(where, 1)
    gc.collect()
    with PeakRss() as saving:
        t = time.perf_counter()
        checkpoint.save(mngr, 1, runner, {"env_steps": 0, "history": []})
        save_s = time.perf_counter() - t
    on_disk = disk_bytes(os.path.join(where, "1"))
    gc.collect()
    with PeakRss() as restoring:
        t = time.perf_counter()
        restored, _ = checkpoint.restore(mngr, 1, runner)
        jax.block_until_ready(restored)
        restore_s = time.perf_counter() - t
    same = all(map(_bitwise_equal, jax.tree.leaves(runner), jax.tree.leaves(restored)))
    mngr.close()
    return {
        "fill": fill,
        "replay_bytes": replay,
        "state_bytes": state,
        "rss_before_bytes": saving.before,
        "rss_peak_save_bytes": saving.peak,
        "save_increase_bytes": saving.peak - saving.before,
        "save_increase_over_state": round((saving.peak - saving.before) / state, 3),
        "save_s": round(save_s, 3),
        "restore_s": round(restore_s, 3),
        "restore_increase_bytes": restoring.peak - restoring.before,
        "restore_increase_over_state": round((restoring.peak - restoring.before) / state, 3),
        "disk_bytes": on_disk,
        "restored_equal": same,
        "rss_samples": saving.samples,
    }


def _row_in_a_process(capacity: int, fill: str, module_path: str | None, where: str) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--row", fill, "--capacity"]
    command += [str(capacity), "--dir", where] + (["--module", module_path] if module_path else [])
    proc = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def render(result: dict) -> str:
    gb = 1e9
    lines = [
        "# Checkpoint save: time, memory, disk",
        "",
        machine_line(result["machine"]) + f"; load average {result['load_average']} at start.",
        "",
        f"Run: `{result['preset']}`, replay capacity {result['capacity']:,} rows, 1 seed; "
        f"the runner from `init`, its ring filled as the fill column says; each row in its own "
        f"process. RSS sampled every 2 ms from /proc/self/statm. Command: `{result['command']}`.",
        "",
        "| checkpoint.py | fill | replay GB | state GB | RSS before GB | RSS peak in save GB "
        "| save increase / state | save s | restore s | restore increase / state | on disk GB "
        "| restored equal |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['module']} | {r['fill']} | {r['replay_bytes'] / gb:.3f} "
            f"| {r['state_bytes'] / gb:.3f} | {r['rss_before_bytes'] / gb:.2f} "
            f"| {r['rss_peak_save_bytes'] / gb:.2f} | {r['save_increase_over_state']:.2f} "
            f"| {r['save_s']:.2f} | {r['restore_s']:.2f} "
            f"| {r['restore_increase_over_state']:.2f} | {r['disk_bytes'] / gb:.3f} "
            f"| {r['restored_equal']} |"
        )
    lines += ["", *result.get("notes", [])]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = common.parser(__doc__, __file__, quick="20,000 rows, the zeros fill only")
    parser.add_argument("--capacity", type=int, default=None, help="replay rows (one seed)")
    parser.add_argument("--fills", default=None, help="comma-separated: zeros,sparse,random")
    parser.add_argument("--compare", default=None, help="also measure checkpoint.py at this rev")
    parser.add_argument("--dir", default=None, help="where checkpoints go (default: a temp dir)")
    parser.add_argument("--note", action="append", default=[], help="a line for the Markdown")
    parser.add_argument("--row", default=None, help=argparse.SUPPRESS)  # one row, in this process
    parser.add_argument("--module", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    capacity = args.capacity or (20_000 if args.quick else 1_000_000)
    if args.row:
        print(json.dumps(measure_one(capacity, args.row, args.module, args.dir)))
        return

    fills = (args.fills or ("zeros" if args.quick else "zeros,sparse,random")).split(",")
    stem = common.stem(args, "checkpoint-save")
    load = os.getloadavg()[0]
    where = tempfile.mkdtemp(prefix="jaxrl_fast_ckpt_bench_", dir=args.dir)
    modules = [("this tree", None)]
    if args.compare:
        old = os.path.join(where, f"checkpoint_{args.compare}.py")
        source = subprocess.run(
            ["git", "show", f"{args.compare}:jaxrl_fast/checkpoint.py"],
            capture_output=True,
            text=True,
            check=True,
            cwd=_HERE,
        ).stdout
        with open(old, "w") as f:
            f.write(source)
        modules.append((args.compare, old))
    rows = []
    try:
        for label, path in modules:
            for fill in fills:
                target = os.path.join(where, f"ckpt-{len(rows)}")
                row = {"module": label, **_row_in_a_process(capacity, fill, path, target)}
                shutil.rmtree(target, ignore_errors=True)
                print({k: row[k] for k in ("module", "fill", "save_s", "save_increase_over_state")})
                rows.append(row)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    command = "python benchmarks/checkpoint_save.py" + (" --quick" if args.quick else "")
    command += f" --compare {args.compare}" if args.compare else ""
    result = {
        "machine": machine(),
        "load_average": round(load, 2),
        "preset": "minatar-breakout",
        "capacity": capacity,
        "command": command,
        "rows": rows,
        "notes": args.note,
    }
    write_results(stem, result, render)


if __name__ == "__main__":
    main()
