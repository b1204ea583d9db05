"""Persistent XLA compilation cache: a re-run of the same program skips XLA compilation.

Compile time dominates short runs on a CPU (several seconds for the fused loop). JAX can keep
compiled executables on disk, keyed by the program and the JAX/XLA versions, so a second
`jaxrl-fast train` with the same config starts in about the time it takes to trace. The CLI
enables it by default (`--no-cache` disables it); benchmarks never do, so they report cold
compile times.
"""

from __future__ import annotations

import os

import jax

from jaxrl_fast.platform.paths import writable_dir

ENV_VAR = "JAXRL_FAST_CACHE_DIR"


def default_dir() -> str:
    """`$JAXRL_FAST_CACHE_DIR`, else `$XDG_CACHE_HOME/jaxrl_fast/xla` (`~/.cache/...`)."""
    if os.environ.get(ENV_VAR):
        return os.environ[ENV_VAR]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxrl_fast", "xla")


def enable(path: str | None = None, *, min_compile_time_s: float = 0.5) -> str:
    """Turn on JAX's persistent compilation cache in `path` (created if missing).

    Args:
      path: cache directory; default `default_dir()`.
      min_compile_time_s: only programs that took at least this long to compile are stored.

    Returns:
      The cache directory.

    Raises:
      ValueError: the directory cannot be created or written.
    """
    path = writable_dir(path or default_dir(), "compilation cache dir", f"Set {ENV_VAR}.")
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", min_compile_time_s)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path
