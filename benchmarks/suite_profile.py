"""Where the test suite's CPU time goes: per test file, its CPU seconds (the pytest worker's and
its child processes'), how much of it XLA compiling and JAX tracing took, and its wall time.

    python benchmarks/suite_profile.py                  # the full suite, about 11 min on 2 cores
    python benchmarks/suite_profile.py --quick          # the fast tier, about 1 min

Runs `pytest -n auto` with this file as a plugin (`-p suite_profile`): around every test it reads
`getrusage` of the worker and of its finished children, and sums JAX's compile and trace events
(`jax.monitoring`). Every pytest-xdist worker writes its rows to a temporary folder; this script
merges them into `benchmarks/results/suite_profile/suite_profile[-quick].{json,md}`. On 2 cores
with 2 workers the suite's wall time is about its CPU time over 2: CPU seconds are what to cut.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import common
from common import machine, machine_line, write_results

_ROWS_DIR = "JAXRL_FAST_SUITE_PROFILE_DIR"  # where each worker writes its rows
_PHASES = {
    "/jax/core/compile/backend_compile_duration": "compile_s",
    "/jax/core/compile/jaxpr_trace_duration": "trace_s",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "trace_s",
}


# -- the pytest plugin (runs inside every worker) ------------------------------------------------

_events: collections.Counter = collections.Counter()
_rows: list[dict] = []
_listening = False


def _on_event(event: str, seconds: float, **_) -> None:
    if event in _PHASES:
        _events[_PHASES[event]] += seconds
        if _PHASES[event] == "compile_s":
            _events["compiles"] += 1


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def pytest_runtest_protocol(item, nextitem):  # noqa: ARG001 - pytest's hook signature
    global _listening
    if not _listening:
        import jax.monitoring

        jax.monitoring.register_event_duration_secs_listener(_on_event)
        _listening = True
    before = dict(_events)
    own, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    yield
    row = {
        "test": item.nodeid,
        "wall_s": time.perf_counter() - t,
        "cpu_s": _cpu(resource.RUSAGE_SELF) - own,
        "children_cpu_s": _cpu(resource.RUSAGE_CHILDREN) - children,
    }
    row.update({k: _events[k] - before.get(k, 0) for k in ("compile_s", "trace_s", "compiles")})
    _rows.append(row)


pytest_runtest_protocol.hookwrapper = True  # the hook runs around pytest's own


def pytest_sessionfinish(session):  # noqa: ARG001
    folder = os.environ.get(_ROWS_DIR)
    if folder:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(os.path.join(folder, f"{worker}.json"), "w") as f:
            json.dump(_rows, f)


# -- the benchmark -------------------------------------------------------------------------------


def by_file(rows: list[dict]) -> list[dict]:
    """The rows summed per test file, most CPU first."""
    files: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in rows:
        f = files[r["test"].split("::")[0]]
        f["tests"] += 1
        for k in ("wall_s", "cpu_s", "children_cpu_s", "compile_s", "trace_s", "compiles"):
            f[k] += r[k]
    out = [{"file": name, **c} for name, c in files.items()]
    return sorted(out, key=lambda f: -(f["cpu_s"] + f["children_cpu_s"]))


def render(r: dict) -> str:
    t = r["totals"]
    lines = [
        "# Where the test suite's CPU time goes",
        "",
        machine_line(r["machine"])
        + f". Produced by `python benchmarks/suite_profile.py{' --quick' if r['quick'] else ''}`"
        + f": `pytest {' '.join(r['pytest_args'])}`, {r['summary']}, {r['wall_s'] / 60:.1f} min.",
        "",
        f"CPU {t['cpu_min']:.1f} min in the workers and {t['children_cpu_min']:.1f} min in the "
        f"processes tests start; of the workers' CPU, XLA compiling {t['compile_min']:.1f} min "
        f"({t['compiles']:,} compiles) and JAX tracing and lowering {t['trace_min']:.1f} min. "
        "Per worker (wall, CPU min): "
        + ", ".join(
            f"{w} {v['wall_min']:.1f} / {v['cpu_min']:.1f}" for w, v in r["workers"].items()
        )
        + ".",
        "",
        "| file | tests | CPU s | of which children | compile s | compiles | trace s | wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for f in r["files"][:30]:
        lines.append(
            f"| `{f['file']}` | {f['tests']} | {f['cpu_s'] + f['children_cpu_s']:.0f} | "
            f"{f['children_cpu_s']:.0f} | {f['compile_s']:.0f} | {f['compiles']} | "
            f"{f['trace_s']:.0f} | {f['wall_s']:.0f} |"
        )
    lines += ["", "Tests with the most CPU:", "", "| CPU s | compile s | test |", "|---:|---:|---|"]
    for x in r["longest"]:
        lines.append(
            f"| {x['cpu_s'] + x['children_cpu_s']:.1f} | {x['compile_s']:.1f} | `{x['test']}` |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = common.parser(__doc__, __file__, quick="the fast tier only (-m 'not slow')")
    args = parser.parse_args()
    pytest_args = ["-n", "auto", *(["-m", "not slow"] if args.quick else [])]
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory(prefix="jaxrl_fast-suite-profile-") as folder:
        env = {
            **os.environ,
            _ROWS_DIR: folder,
            "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])),
        }
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        cmd += ["-p", "suite_profile", *pytest_args]
        t = time.perf_counter()
        proc = subprocess.run(
            cmd, capture_output=True, text=True, cwd=os.path.dirname(here), env=env
        )
        wall = time.perf_counter() - t
        workers = {}
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name)) as f:
                rows = json.load(f)
            if rows:  # the controller process runs no test
                workers[name.removesuffix(".json")] = rows
    if not workers:
        raise SystemExit(f"pytest wrote no rows:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    rows = [r for w in workers.values() for r in w]
    total = {k: sum(r[k] for r in rows) for k in rows[0] if k != "test"}
    result = {
        "machine": machine(),
        "quick": args.quick,
        "pytest_args": pytest_args,
        "returncode": proc.returncode,
        "summary": proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "",
        "wall_s": wall,
        "totals": {
            "cpu_min": total["cpu_s"] / 60,
            "children_cpu_min": total["children_cpu_s"] / 60,
            "compile_min": total["compile_s"] / 60,
            "trace_min": total["trace_s"] / 60,
            "compiles": int(total["compiles"]),
        },
        "workers": {
            w: {
                "wall_min": sum(r["wall_s"] for r in rs) / 60,
                "cpu_min": sum(r["cpu_s"] + r["children_cpu_s"] for r in rs) / 60,
            }
            for w, rs in workers.items()
        },
        "files": by_file(rows),
        "longest": sorted(rows, key=lambda r: -(r["cpu_s"] + r["children_cpu_s"]))[:20],
    }
    write_results(common.stem(args, "suite_profile"), result, render)


if __name__ == "__main__":
    main()
