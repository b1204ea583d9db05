"""The machine description every benchmark writes next to its numbers."""

from __future__ import annotations

import os
import platform


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
    """Write `stem.json` (the numbers) and `stem.md` (`render(result)`), and print the Markdown."""
    import json

    os.makedirs(os.path.dirname(stem) or ".", exist_ok=True)
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=2)
    text = render(result)
    with open(stem + ".md", "w") as f:
        f.write(text)
    print(text)
