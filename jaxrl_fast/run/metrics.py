"""The files of a run directory: the config and library versions, metrics per chunk and seed,
and a summary.

    DIR/config.json    the config (`TrainConfig.to_dict()`) and the versions of jax, jaxlib,
                       flax, optax, orbax-checkpoint, gymnax, envpool and jaxrl_fast
    DIR/metrics.jsonl  one JSON object per chunk per seed, appended and flushed as chunks end
    DIR/metrics.csv    the same rows (the `replay` counters flattened to `replay.NAME` columns)
    DIR/summary.json   `TrainResult.summary()` plus each seed's `params_sha256`
    DIR/tb/            TensorBoard event files of the same rows (with the `tb` extra,
                       tensorboardX; `TensorBoard`)
    DIR/rliable.npz    evaluation returns per seed (final, and per evaluated chunk) as arrays
                       rliable reads (`export_scores`)

A row holds: chunk, seed_index, env_steps (per seed, at the chunk's end), elapsed_s, episode
return / length / count, loss, q, abs_td, skipped updates, loss_scale, fp32_fallback, epsilon and
learning rate at the chunk's end, eval_return (the seed's evaluation return when the chunk was
evaluated, `TrainConfig.eval_every`, else null) and the buffer's report for the chunk. Files
are written whole through a temporary file and `os.replace` (config.json, summary.json,
rliable.npz) or appended a line at a time (metrics), so a killed run leaves every chunk it
logged.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.metadata
import io
import json
import math
import os
import sys
import time
from typing import Any

import jax
import numpy as np

from jaxrl_fast.agent.schedules import make_schedules
from jaxrl_fast.config import RESUME_OVERRIDABLE, TrainConfig, options
from jaxrl_fast.platform.paths import writable_dir

PACKAGES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "gymnax", "envpool", "jaxrl-fast")
# Per-seed fields of a chunk record (`chunk_log.ChunkLog`), in column order.
SEED_FIELDS = (
    "episode_return",
    "episode_length",
    "episodes",
    "loss",
    "q",
    "abs_td",
    "skipped",
    "loss_scale",
    "fp32_fallback",
)


def versions() -> dict[str, str | None]:
    """Installed versions of the packages a run depends on (None: not installed)."""
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def params_sha256(params: Any, seed_index: int | None = None) -> str:
    """SHA-256 of a parameter tree's bytes (leaves in tree order; with `seed_index`, that
    seed's slice of every leaf). Equal hashes: bitwise equal parameters.

      >>> import jax.numpy as jnp
      >>> a = {"w": jnp.ones((2, 3)), "b": jnp.zeros((2,))}
      >>> params_sha256(a, 0) == params_sha256(a, 1) != params_sha256(a)
      True
    """
    h = hashlib.sha256()
    for leaf in jax.tree.leaves(params):
        x = np.asarray(leaf)
        if seed_index is not None:
            x = x[seed_index]
        x = np.ascontiguousarray(x)
        h.update(f"{x.dtype.str}{x.shape}".encode())
        h.update(x.tobytes())
    return h.hexdigest()


def write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def plain_value(tree: Any) -> Any:
    """JSON round trip (tuples become lists), for comparing with a saved config."""
    return json.loads(json.dumps(tree))


def config_differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted names of the fields where two config dicts differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += config_differences(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [] if a == b else [prefix.rstrip(".")]


def with_defaults(saved: Any, defaults: Any) -> Any:
    """`saved` (a config dict) with the fields it lacks taken from `defaults`: a run saved
    before a field existed resumes when the field keeps its default."""
    if not (isinstance(saved, dict) and isinstance(defaults, dict)):
        return saved
    out = dict(defaults)
    for k, v in saved.items():
        out[k] = with_defaults(v, defaults.get(k))
    return out


def _json_value(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None  # JSON has no NaN: a chunk where no episode ended
    return x


class MetricsWriter:
    """Writes one run directory's files; `train(config, run_dir=...)` drives it.

    Raises (at construction, before anything compiles):
      ValueError: `path` is an existing file or cannot be written; without `resume`, it already
        holds a run (a `metrics.jsonl`); with `resume`, its run has another config.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        config: TrainConfig,
        resume: bool = False,
        force_config: bool = False,
    ) -> None:
        path = writable_dir(path, "run_dir")
        self.path, self.config = path, config
        self._schedules = make_schedules(config)
        self.hparams = None  # a sweep's per-seed `HParams` ([S] leaves): per-seed schedules
        self._columns: list[str] | None = None
        self._tb = TensorBoard(os.path.join(path, "tb"), resume=resume)
        saved = os.path.join(path, "config.json")
        if resume and os.path.exists(saved):
            with open(saved) as f:
                before = json.load(f)
            saved_config = options.migrate(before["config"])  # fields renamed since
            old = with_defaults(saved_config, plain_value(TrainConfig().to_dict()))
            differ = config_differences(old, plain_value(config.to_dict()))
            fixed = [d for d in differ if d not in RESUME_OVERRIDABLE]
            if differ and (fixed or not force_config):
                if force_config:
                    what = (
                        f"differing fields that force_config cannot accept (they change shapes "
                        f"or the run's chunking): {', '.join(fixed)}"
                    )
                else:
                    what = f"differing fields: {', '.join(differ)}"
                    if not fixed:
                        what += "; force_config=True (--force-config) accepts these"
                raise ValueError(
                    f"run_dir={path!r} holds a run with another config; {what}. Resume with "
                    "the same config, or use a new directory."
                )
            if differ:  # forced: the new config, and what changed when, in config.json
                forced = before.get("forced", []) + [{"fields": differ, "config": before["config"]}]
                write_atomic(
                    saved,
                    json.dumps(
                        {"config": config.to_dict(), "versions": versions(), "forced": forced},
                        indent=2,
                    ),
                )
            return
        if os.path.exists(os.path.join(path, "metrics.jsonl")):
            raise ValueError(
                f"run_dir={path!r} already holds a run (metrics.jsonl); give a new directory "
                "or resume it."
            )
        write_atomic(
            os.path.join(path, "config.json"),
            json.dumps({"config": config.to_dict(), "versions": versions()}, indent=2),
        )

    def _rows(self, rec: dict) -> list[dict]:
        c = self.config
        blocks = max(0, (rec["env_steps"] - c.learning_starts) // c.train_frequency)
        common = {
            "chunk": rec["chunk"],
            "env_steps": rec["env_steps"],
            "elapsed_s": rec["elapsed_s"],
        }
        s, updates = self._schedules, blocks * c.updates_per_block
        if self.hparams is None:
            epsilon = [float(s.epsilon(rec["env_steps"]))] * c.num_seeds
            lr = [float(s.learning_rate(updates))] * c.num_seeds
        else:  # each seed's own values
            epsilon = np.asarray(jax.vmap(s.epsilon, (None, 0))(rec["env_steps"], self.hparams))
            lr = np.asarray(jax.vmap(s.learning_rate, (None, 0))(updates, self.hparams))
        replay = {f"replay.{k}": v for k, v in rec.get("replay", {}).items()}
        rows = []
        for i in range(c.num_seeds):
            row = {"chunk": common["chunk"], "seed_index": i}
            row.update({k: v for k, v in common.items() if k != "chunk"})
            row["epsilon"], row["learning_rate"] = float(epsilon[i]), float(lr[i])
            row.update({f: _json_value(rec[f][i]) for f in SEED_FIELDS})
            evaluation = rec.get("eval_return")  # absent: the chunk was not evaluated
            row["eval_return"] = None if evaluation is None else _json_value(evaluation[i])
            row.update(replay)
            rows.append(row)
        return rows

    def log_chunk(self, rec: dict) -> None:
        """Append chunk record `rec` (one row per seed) to metrics.jsonl and metrics.csv."""
        rows = self._rows(rec)
        with open(os.path.join(self.path, "metrics.jsonl"), "a") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
        csv_path = os.path.join(self.path, "metrics.csv")
        if self._columns is None:
            self._columns = list(rows[0])
        buf = io.StringIO()
        writer = csv.DictWriter(buf, self._columns, extrasaction="ignore", lineterminator="\n")
        if not os.path.exists(csv_path):
            writer.writeheader()
        writer.writerows(rows)
        with open(csv_path, "a") as f:
            f.write(buf.getvalue())
        self._tb.log(rows)

    def keep_chunks_before(self, chunk: int) -> None:
        """Drop the metrics rows of chunks >= `chunk` (logged after the checkpoint a resumed
        run restarts from), rewriting both files atomically."""
        jsonl = os.path.join(self.path, "metrics.jsonl")
        if not os.path.exists(jsonl):
            return
        with open(jsonl) as f:
            lines = [ln for ln in f if ln.strip() and json.loads(ln)["chunk"] < chunk]
        write_atomic(jsonl, "".join(lines))
        csv_path = os.path.join(self.path, "metrics.csv")
        if os.path.exists(csv_path):
            with open(csv_path, newline="") as f:
                reader = csv.DictReader(f)
                self._columns = list(reader.fieldnames or [])
                rows = [r for r in reader if int(r["chunk"]) < chunk]
            buf = io.StringIO()
            writer = csv.DictWriter(buf, self._columns, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
            write_atomic(csv_path, buf.getvalue())

    def finish(self, summary: dict, params: Any, history: list[dict] | None = None) -> dict:
        """Write summary.json (`summary` with each seed's `params_sha256`) and rliable.npz
        (`export_scores`, from the chunk log `history`); returns the summary written."""
        self._tb.close()
        if history is not None:
            export_scores(os.path.join(self.path, "rliable.npz"), summary, history)
        summary = dict(summary)
        summary["seeds"] = [
            {**s, "params_sha256": params_sha256(params, s["seed_index"])} for s in summary["seeds"]
        ]
        write_atomic(os.path.join(self.path, "summary.json"), json.dumps(summary, indent=2))
        return summary


class TensorBoard:
    """TensorBoard event files of a run's metrics rows, in `directory` (tensorboardX).

    Each numeric column of a chunk's rows becomes `NAME/mean` (over seeds, NaN-aware) and
    `NAME/seed_I`, at step = env steps per seed. A resumed run's writer purges the events at and
    after the first chunk it logs again. Without tensorboardX, one line on stderr says how to get
    it and nothing is written.
    """

    MISSING = (
        "jaxrl-fast: no TensorBoard files (run_dir/tb/): tensorboardX is not installed; "
        "pip install 'jaxrl-fast[tb]' to get them (metrics.jsonl and metrics.csv are written)."
    )

    def __init__(self, directory: str, resume: bool = False) -> None:
        self.directory, self.resume, self._writer = directory, resume, None
        try:
            import tensorboardX  # noqa: F401
        except ImportError:
            self.available = False
            print(self.MISSING, file=sys.stderr, flush=True)
        else:
            self.available = True

    def log(self, rows: list[dict]) -> None:
        """Write one chunk's rows (one per seed, as in metrics.jsonl) and flush."""
        if not self.available:
            return
        step = rows[0]["env_steps"]
        if self._writer is None:
            from tensorboardX import SummaryWriter

            self._writer = SummaryWriter(
                self.directory,
                purge_step=step if self.resume else None,
                # a file of its own, even for a writer opened in the same second as the last
                filename_suffix=f".{os.getpid()}.{time.time_ns()}",
            )
        for name, value in rows[0].items():
            if name in ("chunk", "seed_index", "env_steps") or not _is_number(value):
                continue
            values = np.array([np.nan if r[name] is None else r[name] for r in rows], np.float64)
            if np.isfinite(values).any():
                self._writer.add_scalar(f"{name}/mean", float(np.nanmean(values)), step)
            for i, v in enumerate(values):
                if np.isfinite(v):
                    self._writer.add_scalar(f"{name}/seed_{i}", float(v), step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _is_number(x: Any) -> bool:
    return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))


def export_scores(path: str, summary: dict, history: list[dict]) -> None:
    """Write the run's evaluation returns as arrays that rliable takes as they are.

    `path` (an .npz) holds `final`: `[S, 1]` final evaluation returns (runs x tasks, one task:
    this env; NaN where not evaluated), `curve`: `[S, 1, T]` the evaluation returns at each of
    the T evaluated chunks (`eval_every`), `env_steps`: `[T]` env steps per seed at those
    chunks, and `task`: the env name. For rliable, `{"ours": npz["final"]}` is a score dict
    (`rly.get_interval_estimates`), and `npz["curve"]` one algorithm's curve.
    """
    final = np.array(
        [[np.nan if s["final_return"] is None else s["final_return"]] for s in summary["seeds"]],
        np.float64,
    )
    evaluated = [r for r in history if r.get("eval_return") is not None]
    curve = np.zeros((len(final), 1, len(evaluated)))
    for t, r in enumerate(evaluated):
        curve[:, 0, t] = r["eval_return"]
    tmp = f"{path}.tmp-{os.getpid()}.npz"
    np.savez(
        tmp,
        final=final,
        curve=curve,
        env_steps=np.array([r["env_steps"] for r in evaluated], np.int64),
        task=np.array(summary["env"]),
    )
    os.replace(tmp, path)
