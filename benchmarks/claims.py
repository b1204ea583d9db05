"""The seed article's claims beside our measurements: one row per claim, with a plain verdict.

One command, one machine (each training run in its own fresh process, for its peak memory):

    python benchmarks/claims.py            # about 12-15 min on a 2-core CPU
    python benchmarks/claims.py --quick    # about 1-2 min, small budgets, no Pong

Writes `benchmarks/results/claims/claims.json` and `.md` (`--quick`: `claims-quick.*`, so a quick run
never overwrites the committed results). What it runs or reads, per claim:

* **Training time, final score** (measured): `minatar-breakout`, fused (`train`) against the
  conventional loop (`baseline.train_unfused`) seed by seed (the same seed keys, env, epsilon and
  evaluation; only the replay differs), each in a fresh process: wall time, compile included,
  to the first chunk whose mean training-episode return reaches a threshold, and the final
  greedy evaluation at the budget. Pong (`atari-pong`, envpool): throughput only, at a short
  budget; it reaches no return threshold in minutes on this CPU.
* **Memory** (measured + counted): bytes per stored transition (`replay.layout`) against the
  conventional obs + next_obs layout, and each run's peak RSS (and device memory, where the
  backend reports it).
* **Energy** (measured where the machine exposes it, otherwise an estimate): RAPL (powercap)
  and `nvidia-smi` when readable; else each run's CPU-seconds x a stated power per vCPU.
* **Cost** (estimate): measured hours x an assumed hourly spot price of one T4.
* **Graph optimisation** (measured): `jaxrl_fast.xla_report.report`: time per block op by op
  vs jitted, and the share of jaxpr equations that reach no output.
* **Mixed precision, sampling** (read): `benchmarks/results/precision/precision.json`, `replay.json`;
  sampling also gets the conventional loop's measured share of time in its host replay.
* **L2 hit rate** (measured): a short fused run with the L3 tier on.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os

import common
from claims_measure import (
    ARTICLE,
    FULL,
    QUICK,
    RESULTS,
    T4_SPOT_USD_PER_H,
    VERDICTS,
    Settings,
    child,
    measure,
)
from claims_render import choices, claim_rows, combine, ratio_verdict, render, training_summary
from common import write_results

__all__ = ["ARTICLE", "VERDICTS", "Settings", "combine", "main", "ratio_verdict", "run"]


def run(
    settings: Settings,
    *,
    out_dir: str = common.results_dir("claims"),
    results: str = RESULTS,
    t4_price: float = T4_SPOT_USD_PER_H,
) -> dict:
    """Measure, build the rows, write `claims[-<name>].json` and `.md` to `out_dir`.

    Args:
      settings: the budgets (`FULL`, `QUICK` or a test's).
      out_dir: where the results go; results: where the committed results are read from.
      t4_price: USD per hour for the cost row.

    Returns:
      The result written as JSON.
    """
    m = measure(settings, results)
    m["t4_price_usd_per_h"] = t4_price
    names = (settings.preset,) + (() if "skipped" in m["pong"] else ("atari-pong",))
    m["choices"] = choices(names)
    complete(m)
    name = "claims" if settings.name == "full" else f"claims-{settings.name}"
    write_results(os.path.join(out_dir, name), m, render)
    return m


def complete(m: dict) -> dict:
    """Add the per-seed summary and the claim rows to `measure`'s output (in place)."""
    m["summary"] = training_summary(m["training"])
    m["rows"] = claim_rows(m)
    return m


def main(argv: list[str] | None = None) -> None:
    parser = common.parser(__doc__, __file__, quick="small budgets (~1-2 min)")
    parser.add_argument("--seeds", type=int, help="seeds per loop in the time-to-score runs")
    parser.add_argument("--t4-price", type=float, default=T4_SPOT_USD_PER_H, help="USD per hour")
    parser.add_argument(
        "--render", metavar="JSON", help="only rebuild the rows and Markdown from a results JSON"
    )
    parser.add_argument("--child", nargs=2, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    if args.render:
        with open(args.render) as f:
            m = complete(json.load(f))
        write_results(os.path.splitext(args.render)[0], m, render)
        return
    settings = QUICK if args.quick else FULL
    if args.seeds is not None:
        settings = dataclasses.replace(settings, seeds=args.seeds)
    run(settings, out_dir=args.out, t4_price=args.t4_price)


if __name__ == "__main__":
    main()
