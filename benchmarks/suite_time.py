"""How long the test suite takes: the full suite (the README's test command) and the fast tier.

    python benchmarks/suite_time.py            # both, about 13 minutes on a 2-core CPU
    python benchmarks/suite_time.py --quick    # the fast tier only, about 2 minutes

Each is one fresh `pytest` process from the repository root, as CI runs it: its wall time, the
number of tests that passed, failed and were skipped, and its 30 longest tests
(`--durations=30`). Writes `benchmarks/results/suite_time/suite_time[-quick].{json,md}`.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import common
from common import machine, machine_line, write_results

# (name, pytest arguments): the README's full test command and its fast tier.
RUNS = (
    ("fast tier", ["-n", "auto", "-m", "not slow"]),
    ("full suite", ["-n", "auto"]),
)


def run(args: list[str]) -> dict:
    """One pytest process: wall time, counts and its longest tests."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=30", *args]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=common.HERE + "/..")
    wall = time.perf_counter() - t
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|deselected)", tail)}
    longest = [
        {"seconds": float(s), "when": when, "test": test}
        for s, when, test in re.findall(
            r"^([\d.]+)s (call|setup|teardown)\s+(\S+)", proc.stdout, re.M
        )
    ]
    return {
        "command": "pytest " + " ".join(args),
        "returncode": proc.returncode,
        "wall_s": wall,
        "counts": counts,
        "summary": tail,
        "longest": longest,
    }


def render(r: dict) -> str:
    lines = [
        "# Test suite time",
        "",
        machine_line(r["machine"])
        + ". Produced by `python benchmarks/suite_time.py"
        + (" --quick" if r["quick"] else "")
        + "`: each command a fresh pytest process from the repository root.",
        "",
        "| command | wall time | passed | skipped | deselected | failed |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, x in r["runs"].items():
        c = x["counts"]
        lines.append(
            f"| {name}: `{x['command']}` | {x['wall_s'] / 60:.1f} min | {c.get('passed', 0)} | "
            f"{c.get('skipped', 0)} | {c.get('deselected', 0)} | {c.get('failed', 0)} |"
        )
    for name, x in r["runs"].items():
        lines += ["", f"Longest tests of the {name}:", "", "| s | test |", "|---:|---|"]
        lines += [
            f"| {t['seconds']:.1f} | `{t['test']}` ({t['when']}) |" for t in x["longest"][:15]
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = common.parser(__doc__, __file__, quick="the fast tier only")
    args = parser.parse_args()
    runs = {}
    for name, pytest_args in RUNS:
        if args.quick and name != "fast tier":
            continue
        print(f"{name}: pytest {' '.join(pytest_args)}", flush=True)
        runs[name] = run(pytest_args)
        print(f"  {runs[name]['wall_s'] / 60:.1f} min: {runs[name]['summary']}", flush=True)
    result = {"machine": machine(), "quick": args.quick, "runs": runs}
    write_results(common.stem(args, "suite_time"), result, render)


if __name__ == "__main__":
    main()
