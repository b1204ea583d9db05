"""Learning curves from run directories: the engine of `jaxrl-fast plot DIR [DIR ...]`.

`load_run` reads one run directory (written by `train(config, run_dir=DIR)`; the files are
described in `jaxrl_fast.metrics`) into arrays, and `plot_runs` draws one or more runs:

* one panel per metric (by default training episode return, evaluation return, TD loss, mean Q
  and epsilon); a panel whose metric has no value in any run (evaluation return when no run
  evaluated during training) is left out;
* x is env steps per seed at the end of each chunk;
* per run, a line for the mean over seeds and a shaded band from the lowest to the highest seed
  (min..max over seeds, not a standard deviation: with a handful of seeds the band shows every
  seed). Means, minima and maxima skip missing values (NaN: a chunk in which no episode ended, a
  seed not evaluated at that chunk), and chunks where no seed has a value are left out of the
  line, so the line joins the chunks that have one;
* several runs are overlaid in distinct colours, and one legend above the panels names each run
  (its directory's name and seed count).

matplotlib is imported only when a figure is drawn, so `load_run` needs only numpy; the figure
is a bare `matplotlib.figure.Figure` (never registered with pyplot, no global backend change),
which saves headless through Agg (png) or the pdf / svg canvases and displays as a notebook
cell's value.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import sys
import warnings
from typing import Any, NamedTuple, Sequence

import numpy as np

from jaxrl_fast.paths import writable_dir

DEFAULT_METRICS = ("episode_return", "eval_return", "loss", "q", "epsilon")
# Always present in a `Run` (all-NaN where the run did not log them).
_REQUIRED = DEFAULT_METRICS
# Row keys that index a row rather than measure something.
_INDEX_KEYS = ("chunk", "seed_index", "env_steps")
_TITLES = {
    "episode_return": "training episode return",
    "eval_return": "evaluation return",
    "loss": "TD loss",
    "q": "mean Q",
    "epsilon": "exploration epsilon",
    "learning_rate": "learning rate",
    "episode_length": "training episode length",
    "abs_td": "mean |TD error|",
}
_BAND = "line: mean over seeds; band: min..max over seeds"
_INSTALL = "plotting needs matplotlib: pip install 'jaxrl-fast[plot]'"


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


def _matplotlib():
    try:
        import matplotlib
        import matplotlib.figure
    except ImportError as e:
        raise ImportError(_INSTALL) from e
    return matplotlib


def _check_out(out: str) -> None:
    """ValueError for an `out` that is a directory or has an unknown format."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    ext = os.path.splitext(out)[1].lower().lstrip(".")
    if ext not in formats:
        raise ValueError(
            f"--out={out!r}: the extension picks the format; expected one of "
            f"{', '.join('.' + f for f in sorted(formats))} (e.g. curves.png)."
        )
    if os.path.isdir(out):
        raise ValueError(f"--out={out!r} is a directory; give a file name such as curves.png.")


def plot_runs(
    paths: Sequence[str | os.PathLike | Run],
    out: str | os.PathLike | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
):
    """Draw the learning curves of one or more runs, one panel per metric.

    Each panel has, per run, the mean over seeds as a line and the min..max over seeds as a
    shaded band in the same colour, against env steps per seed. Chunks where no seed has a
    value are left out of that run's line. Metrics that no run has a value of are left out;
    `eval_return` is drawn with markers (it is logged only at evaluated chunks).

    Args:
      paths: run directories (or `Run`s from `load_run`), overlaid in this order.
      out: file to save the figure to; the extension picks the format (.png, .pdf, .svg, ...).
        Its directory is made if missing.
      metrics: metrics.jsonl columns to draw, a panel each, in this order.

    Returns:
      The `matplotlib.figure.Figure` (not registered with pyplot). `fig.axes` are the panels
      in the order of `metrics`; the legend (`fig.legends[0]`) names each run.

    Raises:
      ImportError: matplotlib is not installed (`pip install 'jaxrl-fast[plot]'`).
      ValueError: no paths or metrics; a path is not a readable run (see `load_run`); a metric
        is in no run; none of `metrics` has a value; `out` has an unknown extension or is a
        directory.

    Examples:
      >>> import json, os, tempfile
      >>> d = tempfile.mkdtemp()
      >>> rows = [{"chunk": c, "seed_index": s, "env_steps": 100 * (c + 1),
      ...          "episode_return": float(c + s), "epsilon": 0.5} for c in range(3)
      ...         for s in range(2)]
      >>> with open(os.path.join(d, "metrics.jsonl"), "w") as f:
      ...     _ = f.write("".join(json.dumps(r) + "\\n" for r in rows))
      >>> fig = plot_runs([d], out=os.path.join(d, "curves.png"))
      >>> [ax.get_title() for ax in fig.axes]
      ['training episode return', 'exploration epsilon']
      >>> fig.axes[0].get_lines()[0].get_ydata().tolist()
      [0.5, 1.5, 2.5]
    """
    _matplotlib()
    from matplotlib.figure import Figure

    if not paths:
        raise ValueError("plot_runs needs at least one run directory.")
    if not metrics:
        raise ValueError("plot_runs needs at least one metric.")
    if out is not None:
        out = os.fspath(out)
        _check_out(out)  # before loading: a bad --out fails fast
    runs = [p if isinstance(p, Run) else load_run(p) for p in paths]
    known = sorted({m for r in runs for m in r.metrics})
    for m in metrics:
        if m not in known:
            close = difflib.get_close_matches(m, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(
                f"metric {m!r} is in none of the runs; {hint}known: {', '.join(known)}."
            )
    panels = [
        m
        for m in dict.fromkeys(metrics)
        if any(m in r.metrics and np.isfinite(r.metrics[m]).any() for r in runs)
    ]
    if not panels:
        raise ValueError(f"none of the metrics {', '.join(metrics)} has a value in these runs.")
    labels = _labels(runs)
    ncols = 1 if len(panels) == 1 else 2
    nrows = -(-len(panels) // ncols)
    fig = Figure(figsize=(6.0 * ncols, 2.8 * nrows + 0.6 + 0.25 * len(runs)), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(panels) :]:
        ax.remove()
    handles: dict[int, Any] = {}  # run -> its first line, for the legend
    for ax, metric in zip(axes[: len(panels)], panels, strict=True):
        for i, (run, label) in enumerate(zip(runs, labels, strict=True)):
            values = run.metrics.get(metric)
            if values is None:
                continue
            mean, low, high = seed_summary(values)
            keep = np.isfinite(mean)
            x = run.env_steps[keep]
            marker = "o" if metric == "eval_return" or keep.sum() < 2 else None
            ax.fill_between(x, low[keep], high[keep], color=f"C{i}", alpha=0.2, linewidth=0)
            (line,) = ax.plot(x, mean[keep], color=f"C{i}", marker=marker, markersize=3)
            line.set_label(label)
            handles.setdefault(i, line)
        ax.set_title(_TITLES.get(metric, metric))
        ax.set_xlabel("env steps per seed")
        ax.grid(alpha=0.3)
    envs = sorted({r.env for r in runs if r.env})
    fig.legend(
        handles=[handles[i] for i in sorted(handles)],
        labels=[labels[i] for i in sorted(handles)],
        loc="outside upper center",
        ncols=min(len(handles), 3),
        # the env in the legend's title: a suptitle would overlap an "outside" legend
        title=f"{envs[0]}: {_BAND}" if len(envs) == 1 else _BAND,
        fontsize="small",
        title_fontsize="small",
    )
    if out is not None:
        writable_dir(os.path.dirname(out) or ".", "--out")  # only once the runs have loaded
        fig.savefig(out, dpi=120)
    return fig


def plot_sweep(summary: dict, out: str | os.PathLike | None = None):
    """Draw a sweep's mean final return (with its 95% confidence interval) against each axis
    of the sweep (a swept field, or a zipped group of fields), one panel per axis; the other
    axes' values split the points into lines.

    Args:
      summary: `SweepResult.summary()` (or a sweep.json loaded).
      out: file to save to (the extension picks the format), or None.

    Returns:
      The `matplotlib.figure.Figure`, or None when matplotlib is not installed.
    """
    try:
        _matplotlib()
    except ImportError:
        return None
    from matplotlib.figure import Figure

    axes, results = summary.get("axes") or [[f] for f in summary["fields"]], summary["results"]

    def at(r: dict, names: list[str]):
        vals = [r["values"][n] for n in names]
        return vals[0] if len(vals) == 1 else " / ".join(str(v) for v in vals)

    fig = Figure(figsize=(4.5 * len(axes), 3.5), layout="constrained")
    for i, names in enumerate(axes):
        ax = fig.add_subplot(1, len(axes), i + 1)
        others = [a for a in axes if a != names]
        xs_all = list(dict.fromkeys(at(r, names) for r in results))
        numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs_all)
        groups: dict[str, list[dict]] = {}
        for r in results:
            key = ", ".join(f"{' / '.join(a)}={at(r, a)}" for a in others)
            groups.setdefault(key, []).append(r)
        for key, rows in groups.items():
            xs = [at(r, names) for r in rows]
            pos = xs if numeric else [xs_all.index(x) for x in xs]
            ys = np.asarray([np.nan if r["mean"] is None else r["mean"] for r in rows])
            lo = np.asarray([r["ci95"][0] if r["ci95"] else np.nan for r in rows])
            hi = np.asarray([r["ci95"][1] if r["ci95"] else np.nan for r in rows])
            err = [np.nan_to_num(ys - lo), np.nan_to_num(hi - ys)]
            ax.errorbar(pos, ys, yerr=err, marker="o", capsize=3, label=key or None)
        if not numeric:
            ax.set_xticks(range(len(xs_all)), [str(x) for x in xs_all])
        elif min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 10:
            ax.set_xscale("log")
        ax.set_xlabel(" / ".join(names))
        ax.set_ylabel("final return (mean, 95% CI)")
        if others:
            ax.legend(fontsize="small")
    if out is not None:
        out = os.fspath(out)
        _check_out(out)
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        fig.savefig(out, dpi=110)
    return fig


def _labels(runs: Sequence[Run]) -> list[str]:
    """A legend label per run: its name and seed count; the path where names repeat."""
    names = [r.name for r in runs]
    out = []
    for r in runs:
        name = r.path if names.count(r.name) > 1 else r.name
        out.append(f"{name} ({r.num_seeds} seed{'s' if r.num_seeds != 1 else ''})")
    return out


def default_out(dirs: Sequence[str]) -> str:
    """The figure file when `--out` is not given: DIR/curves.png for one run directory.

    Raises:
      ValueError: several directories (there is no one run to put the figure in).
    """
    if len(dirs) != 1:
        raise ValueError("several run directories: give --out FILE (e.g. --out curves.png).")
    return os.path.join(dirs[0], "curves.png")


def _plot_command(args: argparse.Namespace) -> int:
    out = args.out if args.out is not None else default_out(args.dirs)
    metrics = DEFAULT_METRICS
    if args.metrics is not None:
        metrics = tuple(m.strip() for m in args.metrics.split(",") if m.strip())
    plot_runs(args.dirs, out=out, metrics=metrics)
    print(out)
    return 0


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="run directories (--run-dir)")
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="figure file; the extension picks the format: .png, .pdf, .svg (default with one "
        "DIR: DIR/curves.png; required with several)",
    )
    parser.add_argument(
        "--metrics",
        help=f"comma-separated metrics.jsonl columns, a panel each (default: "
        f"{','.join(DEFAULT_METRICS)})",
    )
    parser.set_defaults(func=_plot_command)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `plot` subcommand to an argparse `subparsers` object.

    `args.func(args)` then draws the figure, prints the file written and returns 0; it raises
    `ValueError` (bad directory, several directories without --out, unknown metric or format)
    and `ImportError` (no matplotlib), for the caller to report.

    Args:
      subparsers: what `ArgumentParser.add_subparsers()` returned.

    Returns:
      The `plot` parser.
    """
    parser = subparsers.add_parser(
        "plot",
        help="draw learning curves (mean and min..max over seeds) of run directories",
        description=__doc__.split("\n")[0],
    )
    _add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `plot DIR [DIR ...] [--out FILE] [--metrics a,b]`; returns the exit code.

    Prints the file written. Errors (bad input, no matplotlib) are one line on stderr and exit
    code 2.
    """
    parser = argparse.ArgumentParser(prog="jaxrl-fast plot", description=__doc__.split("\n")[0])
    _add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, ImportError) as err:
        print(f"jaxrl-fast plot: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
