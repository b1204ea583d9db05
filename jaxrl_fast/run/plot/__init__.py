"""Learning curves from run directories: the engine of `jaxrl-fast plot DIR [DIR ...]`.

`load_run` reads one run directory (written by `train(config, run_dir=DIR)`; the files are
described in `jaxrl_fast.run.metrics`) into arrays, and `plot_runs` draws one or more runs:

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

from jaxrl_fast.run.plot.command import add_parser, main
from jaxrl_fast.run.plot.figures import default_out, plot_runs, plot_sweep
from jaxrl_fast.run.plot.runs import DEFAULT_METRICS, Run, load_run, seed_summary

__all__ = [
    "DEFAULT_METRICS",
    "Run",
    "add_parser",
    "default_out",
    "load_run",
    "main",
    "plot_runs",
    "plot_sweep",
    "seed_summary",
]
