"""Drawing runs (`plot_runs`) and sweeps (`plot_sweep`) as bare matplotlib figures."""

from __future__ import annotations

import difflib
import os
from typing import Any, Sequence

import numpy as np

from jaxrl_fast.platform.paths import writable_dir
from jaxrl_fast.run.plot.runs import DEFAULT_METRICS, Run, load_run, seed_summary

__all__ = ["default_out", "plot_runs", "plot_sweep"]

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
