"""Threefry on the CPU with its rounds written out: the same bits, less to compile.

JAX lowers the threefry hash behind every random call (`jax.random.split`, `bits`, `uniform`,
...) as a 5-trip `while` loop on the CPU, and straight-line on the GPU. LLVM then compiles
each loop's round kernel as a kernel of its own; in this library's programs, where every seed
splits its key at every step, those kernels were the largest part of the compile
(`../shared/research/perf-profile.md`: about 38 threefry call sites per run). The straight-line
form is the one JAX itself uses on the GPU: the same unsigned 32-bit adds, rotations and xors in
the same order, so every random number is equal bit for bit (`tests/platform/test_cpu_lowering.py`
checks it); only compile time changes (`benchmarks/experiments/ab-quick-issue33-threefry.md`).

`install()` runs when `jaxrl_fast` is imported and registers that lowering for the CPU platform
for the whole process (JAX's own functions and a user's included: their numbers are unchanged
too). Other platforms keep JAX's rules. Set `JAXRL_FAST_ROLLED_THREEFRY=1` before the import to
keep JAX's rolled loop. The rule lives in JAX's private modules: where a JAX version lacks
them, `install()` leaves JAX as it is and returns False.
"""

from __future__ import annotations

import functools
import inspect
import os

__all__ = ["OPT_OUT", "install", "installed"]

OPT_OUT = "JAXRL_FAST_ROLLED_THREEFRY"
_state = {"installed": False}


def install() -> bool:
    """Register the straight-line threefry lowering for the CPU; True when it is in place.

    Does nothing (and returns False) when `JAXRL_FAST_ROLLED_THREEFRY` is set to a non-empty
    value other than "0", or when this JAX version lacks the private pieces it needs.
    """
    if os.environ.get(OPT_OUT, "") not in ("", "0"):
        return False
    if _state["installed"]:
        return True
    try:
        from jax._src.interpreters import mlir
        from jax._src.random import threefry2x32 as tf

        hash_fn, primitive = tf._threefry2x32_lowering, tf.threefry2x32_p
        if "use_rolled_loops" not in inspect.signature(hash_fn).parameters:
            return False
        rule = mlir.lower_fun(
            functools.partial(hash_fn, use_rolled_loops=False), multiple_results=True
        )
        mlir.register_lowering(primitive, rule, platform="cpu")
    except (ImportError, AttributeError, TypeError, ValueError):
        return False
    _state["installed"] = True
    return True


def installed() -> bool:
    """Whether this process lowers threefry straight-line on the CPU."""
    return _state["installed"]
