"""What `benchmarks/replay.py` measures (the observation kinds, the sampling methods and their
labels) and how its results read: `render(result)` writes the Markdown of a `replay.json`."""

from __future__ import annotations

import os

import numpy as np

OBS = {
    "cartpole": ((4,), np.float32),
    "atari": ((84, 84), np.uint8),
}
METHODS = (
    "ours_sum_tree",
    "ours_cumsum",
    "ours_uniform",
    "flashbax_per",
    "flashbax_uniform",
    "numpy_tree_python",
    "numpy_tree_vectorised",
    "numpy_uniform",
)
LABELS = {
    "ours_sum_tree": "ours PER sum tree",
    "ours_cumsum": "ours PER cumsum",
    "ours_uniform": "ours uniform",
    "flashbax_per": "flashbax PER",
    "flashbax_uniform": "flashbax uniform",
    "numpy_tree_python": "numpy PER tree, Python loops",
    "numpy_tree_vectorised": "numpy PER tree, vectorised",
    "numpy_uniform": "numpy uniform",
}


def git_commit() -> str:
    """The commit measured, with "+dirty" when `jaxrl_fast/replay` has uncommitted changes."""
    import subprocess

    root = os.path.join(os.path.dirname(__file__), "..")
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "jaxrl_fast/replay"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def _us(x: dict) -> str:
    if "us_per_iter" not in x:
        return "skipped: memory"
    return f"{x['us_per_iter']:,.0f}" if x["us_per_iter"] >= 100 else f"{x['us_per_iter']:.1f}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}x"


def _summary(r: dict) -> list[str]:
    """One line on the seed article's claim: the range of host-tree / ours-sum-tree ratios."""
    lines = []
    for obs_name in OBS:
        x = [
            c["ratios"]["numpy_python_over_ours_sum_tree"]
            for c in r["cells"]
            if c["obs"] == obs_name and c["ratios"]["numpy_python_over_ours_sum_tree"]
        ]
        if x:
            lines.append(
                f"- {obs_name}: ours (sum tree, one jitted scan) is **{min(x):.0f}x to "
                f"{max(x):.0f}x** faster than the host numpy segment tree with Python loops "
                "(the seed article claims 120x)."
            )
    return [*lines, ""] if lines else []


def render(r: dict) -> str:
    m = r["machine"]
    q = " --quick" if r["quick"] else ""
    lines = [
        f"# Replay sampling, batch {r['batch_size']}{' (quick)' if r['quick'] else ''}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; python {m['python']}, jax "
        f"{m['jax']} on {m['backend']}, flashbax {r['flashbax']}. Produced by "
        f"`python benchmarks/replay.py{q}` in {r['benchmark_time_s']:.0f} s, at commit "
        f"`{r['git']}`"
        + (" (`+dirty`: `jaxrl_fast/replay` had uncommitted changes)." if "+" in r["git"] else "."),
        "",
        "**Caveat:** a shared 2-core VM; absolute times move by about ±20% between runs. Compare "
        "ratios within this run.",
        "",
        *_summary(r),
        "Microseconds per iteration: sample a batch (obs, next obs, action, reward, discount) and, "
        "for PER, write the batch's new priorities. TD errors come from the batch and the "
        "iteration, so priorities change every iteration. Device methods: median of one jitted "
        "`lax.scan` (compile excluded); host methods: a Python loop. Lower is better; `a/b` = how "
        "many times faster b is than a.",
        "",
    ]
    for obs_name in OBS:
        cells = [c for c in r["cells"] if c["obs"] == obs_name]
        shape, dt = OBS[obs_name]
        lines += [
            f"## {obs_name} observations ({'x'.join(map(str, shape))} {np.dtype(dt).name})",
            "",
            "| rows | " + " | ".join(LABELS[k] for k in METHODS) + " |",
            "|---" * (len(METHODS) + 1) + "|",
        ]
        for c in cells:
            lines.append(f"| {c['capacity']:,} | " + " | ".join(_us(c[k]) for k in METHODS) + " |")
        lines += [
            "",
            "| rows | flashbax PER / ours sum tree | numpy Python tree / ours sum tree | numpy "
            "vectorised tree / ours sum tree | ours cumsum / ours sum tree | flashbax uniform / "
            "ours uniform | numpy uniform / ours uniform |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in cells:
            x = c["ratios"]
            lines.append(
                f"| {c['capacity']:,} | {_x(x['flashbax_per_over_ours_sum_tree'])} | "
                f"{_x(x['numpy_python_over_ours_sum_tree'])} | "
                f"{_x(x['numpy_vectorised_over_ours_sum_tree'])} | "
                f"{_x(x['ours_cumsum_over_ours_sum_tree'])} | "
                f"{_x(x['flashbax_uniform_over_ours_uniform'])} | "
                f"{_x(x['numpy_uniform_over_ours_uniform'])} |"
            )
        lines.append("")
    cx = r["crossover"]
    lines += [
        "## Sum tree vs cumsum sampler (ours, CartPole rows)",
        "",
        "| rows | sum tree µs | cumsum µs | faster |",
        "|---|---|---|---|",
    ]
    for row in cx["rows"]:
        faster = "sum tree" if row["sum_tree_us"] < row["cumsum_us"] else "cumsum"
        lines.append(
            f"| {row['capacity']:,} | {row['sum_tree_us']:.1f} | {row['cumsum_us']:.1f} | {faster} |"
        )
    lines += [
        "",
        f"`auto_crossover_rows` = **{cx['auto_crossover_rows']}**: the smallest tested capacity "
        "from which the sum tree is faster at every tested capacity (the value for "
        "`replay.prioritised.AUTO_SUM_TREE_FROM`).",
        "",
        "## Notes",
        "",
        "- Every buffer stores each observation once (ours: a `[T, E]` ring; flashbax: flat "
        "buffers, sequences of 2 along time; host: numpy views of our ring, next row = row + E).",
        "- Methods are interleaved: after one warm-up call each, every round runs each method "
        "once (one compiled scan of K iterations, or K host iterations), and the median round "
        "counts. When both libraries' rows do not fit in memory together, ours and the host "
        "methods are measured first, then flashbax (`interleaved` in the JSON).",
        "- The host Python tree runs a fifth of the iterations per round (at least 5); its "
        "per-iteration time is what counts.",
        "- Each loop writes the whole batch to memory (device: the sampled observations are "
        "carried to the next iteration and returned, so XLA cannot trim the gather; host: numpy "
        "fancy indexing, a fresh array per batch) and derives TD errors from one element of "
        "each observation, the reward and the iteration.",
        "- PER loops also compute importance weights (ours inside `sample`; flashbax and host in "
        "the loop) and write priorities `(|td| + eps) ** 0.6`.",
        "- Buffers are filled by each library's own `add` with random transitions (all valid); "
        "each cell's fill time is in the JSON.",
        "",
    ]
    return "\n".join(lines)
