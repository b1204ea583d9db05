"""Reading run directories into arrays (`load_run`) and summarising seeds; numpy only."""

from __future__ import annotations

import json
import math
import os
import warnings
from typing import Any, NamedTuple

import numpy as np

__all__ = ["DEFAULT_METRICS", "Run", "load_run", "seed_summary"]

DEFAULT_METRICS = ("episode_return", "eval_return", "loss", "q", "epsilon")
# Always present in a `Run` (all-NaN where the run did not log them).
_REQUIRED = DEFAULT_METRICS
# Row keys that index a row rather than measure something.
_INDEX_KEYS = ("chunk", "seed_index", "env_steps")


class Run(NamedTuple):
    """One run directory's metrics, a column per chunk and a row per seed.

    Attributes:
      name: the directory's base name (the env name when the path has none, e.g. ".").
      path: the directory, as given.
      env: the env name from config.json (None without a config.json).
      env_steps: `[T]` int64, env steps per seed at the end of each logged chunk (ascending).
      chunks: `[T]` int64, the chunk indices.
      metrics: name -> `[S, T]` float64, NaN where a value is missing (logged as null, or a row
        lost when the run was killed). Holds every numeric per-seed column of metrics.jsonl
        (`episode_return`, `loss`, `q`, `abs_td`, `epsilon`, `learning_rate`, `replay.*`, ...)
        and always `episode_return`, `eval_return`, `loss`, `q` and `epsilon` (all-NaN when never
        logged, e.g. `eval_return` of a run that did not evaluate during training).
    """

    name: str
    path: str
    env: str | None
    env_steps: np.ndarray
    chunks: np.ndarray
    metrics: dict[str, np.ndarray]

    @property
    def num_seeds(self) -> int:
        """Seeds of the run (S)."""
        return int(self.metrics["episode_return"].shape[0])


def _metrics_file(path: str) -> str:
    if os.path.isfile(path) and os.path.basename(path) == "metrics.jsonl":
        return path
    jsonl = os.path.join(path, "metrics.jsonl")
    if not os.path.isdir(path):
        raise ValueError(f"run directory {path!r} does not exist.")
    if not os.path.isfile(jsonl):
        raise ValueError(
            f"run directory {path!r} has no metrics.jsonl; give a directory written by "
            "train(config, run_dir=...) or `jaxrl-fast train --run-dir`."
        )
    return jsonl


def _read_rows(jsonl: str) -> list[dict[str, Any]]:
    """The rows of metrics.jsonl. A last line that does not parse is a write cut short by a
    killed run and is skipped; any other bad line is an error."""
    with open(jsonl, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    numbered = [(i + 1, ln) for i, ln in enumerate(lines) if ln.strip()]
    rows = []
    for k, (lineno, line) in enumerate(numbered):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            if k == len(numbered) - 1:
                break  # partial last line of a killed run
            raise ValueError(f"{jsonl}:{lineno} is not JSON ({e.msg}); the file is corrupt.") from e
        if not (isinstance(row, dict) and all(key in row for key in _INDEX_KEYS)):
            raise ValueError(
                f"{jsonl}:{lineno} is not a metrics row (needs {', '.join(_INDEX_KEYS)})."
            )
        rows.append(row)
    if not rows:
        raise ValueError(f"{jsonl} holds no metrics rows; the run logged no chunk yet.")
    return rows


def _number(x: Any) -> float | None:
    """A row value as a float (bools as 0/1, null as NaN); None for non-numbers."""
    if x is None:
        return math.nan
    if isinstance(x, (bool, int, float)):
        return float(x)
    return None


def load_run(path: str | os.PathLike) -> Run:
    """Load a run directory's metrics.jsonl (and the env name from its config.json).

    Args:
      path: a run directory (or its metrics.jsonl).

    Returns:
      The `Run`: `[S, T]` arrays per metric over S seeds and T logged chunks.

    Raises:
      ValueError: `path` does not exist or has no metrics.jsonl; the file has no rows, or a
        line other than the last is not a JSON metrics row. (A partial last line, left by a
        killed run, is skipped.)

    Examples:
      >>> import json, os, tempfile
      >>> d = tempfile.mkdtemp()
      >>> rows = [{"chunk": c, "seed_index": s, "env_steps": 100 * (c + 1),
      ...          "episode_return": None if c == 0 else 10.0 * (s + 1)}
      ...         for c in range(2) for s in range(2)]
      >>> with open(os.path.join(d, "metrics.jsonl"), "w") as f:
      ...     _ = f.write("".join(json.dumps(r) + "\\n" for r in rows))
      >>> run = load_run(d)
      >>> run.env_steps.tolist(), run.metrics["episode_return"].tolist()
      ([100, 200], [[nan, 10.0], [nan, 20.0]])
    """
    path = os.fspath(path)
    jsonl = _metrics_file(path)
    rows = _read_rows(jsonl)
    run_dir = os.path.dirname(jsonl)
    env, num_seeds = None, 0
    config_path = os.path.join(run_dir, "config.json")
    if os.path.isfile(config_path):
        try:
            with open(config_path) as f:
                config = json.load(f)["config"]
            env = config["env"]["name"]
            num_seeds = int(config["num_seeds"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # the metrics alone are enough to plot
    chunks = sorted({int(r["chunk"]) for r in rows})
    column = {c: t for t, c in enumerate(chunks)}
    num_seeds = max(num_seeds, 1 + max(int(r["seed_index"]) for r in rows))
    env_steps = np.zeros(len(chunks), np.int64)
    names = list(_REQUIRED)
    for r in rows:
        names += [k for k, v in r.items() if k not in names and _number(v) is not None]
    names = [n for n in names if n not in _INDEX_KEYS]
    metrics = {n: np.full((num_seeds, len(chunks)), np.nan) for n in names}
    for r in rows:  # a later row for the same chunk and seed wins
        t, s = column[int(r["chunk"])], int(r["seed_index"])
        env_steps[t] = int(r["env_steps"])
        for k, v in r.items():
            if k in metrics and (x := _number(v)) is not None:
                metrics[k][s, t] = x
    order = np.argsort(env_steps, kind="stable")
    name = os.path.basename(os.path.normpath(os.path.abspath(run_dir))) or env or run_dir
    return Run(
        name=name,
        path=path,
        env=env,
        env_steps=env_steps[order],
        chunks=np.asarray(chunks, np.int64)[order],
        metrics={k: v[:, order] for k, v in metrics.items()},
    )


def seed_summary(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, min and max over seeds, skipping NaN (NaN where no seed has a value).

    Args:
      values: `[S, T]` one metric of a run.

    Returns:
      `(mean, low, high)`, each `[T]`.

    Examples:
      >>> mean, low, high = seed_summary(np.array([[1.0, np.nan], [3.0, np.nan]]))
      >>> mean.tolist(), low.tolist(), high.tolist()
      ([2.0, nan], [1.0, nan], [3.0, nan])
    """
    with warnings.catch_warnings():  # all-NaN columns: NaN, as documented
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, 0), np.nanmin(values, 0), np.nanmax(values, 0)
