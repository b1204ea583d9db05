"""What every benchmark shares: its command line (`parser`), where its results go (`results_dir`,
`stem`), the machine description written next to its numbers (`machine`, `machine_line`), and the
JSON + Markdown pair it writes (`write_results`) or reads back (`read_result`).

Results are grouped per script: `benchmarks/results/<script>/<name>.{json,md}`, a quick run's
files named `<name>-quick.*` so that it never overwrites the committed full results. One-off A/B
experiments live apart, in `benchmarks/experiments/`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
EXPERIMENTS = os.path.join(HERE, "experiments")


def script_name(script: str) -> str:
    """`benchmarks/speedup.py` (or `__file__`, or `speedup`) -> `speedup`."""
    return os.path.splitext(os.path.basename(script))[0]


def results_dir(script: str) -> str:
    """The folder of a script's committed results: `benchmarks/results/<script>/`."""
    return os.path.join(RESULTS, script_name(script))


def parser(
    doc: str, script: str, *, quick: str | None = None, out: str | None = None
) -> argparse.ArgumentParser:
    """The arguments every benchmark takes: `--out DIR` (default `out`, else `results/<script>/`)
    and, when `quick` names what a quick run does, `--quick`. The description is the docstring's
    first line."""
    p = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    if quick is not None:
        p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument(
        "--out",
        default=out or results_dir(script),
        metavar="DIR",
        help="folder for the results (default: %(default)s)",
    )
    return p


def stem(args: argparse.Namespace, name: str) -> str:
    """`args.out/name`, or `args.out/name-quick` for a `--quick` run."""
    return os.path.join(args.out, name + ("-quick" if getattr(args, "quick", False) else ""))


def read_result(script: str, name: str | None = None) -> dict:
    """A committed result: `results/<script>/<name or script>.json`."""
    path = os.path.join(results_dir(script), (name or script_name(script)) + ".json")
    with open(path) as f:
        return json.load(f)


def machine() -> dict:
    """CPU model, cores, OS, Python, JAX version, backend and devices."""
    import jax

    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:  # not Linux: keep platform.processor()
        cpu = cpu or "unknown"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
    }


def machine_line(m: dict) -> str:
    """`machine()` in words, for a Markdown header: "Machine: CPU, N cores, OS; jax V on backend"."""
    return f"Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; jax {m['jax']} on {m['backend']}"


def write_results(stem: str, result: dict, render) -> None:
    """Write `stem.json` (the numbers) and `stem.md` (`render(result)`), and print the Markdown.
    Each file is written whole to a temporary name first, so an interrupted run never leaves a
    half-written result."""
    os.makedirs(os.path.dirname(stem) or ".", exist_ok=True)
    text = render(result)
    for path, body in ((stem + ".json", json.dumps(result, indent=2)), (stem + ".md", text)):
        with open(path + ".tmp", "w") as f:
            f.write(body)
        os.replace(path + ".tmp", path)
    print(text)
