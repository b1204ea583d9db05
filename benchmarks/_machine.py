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
