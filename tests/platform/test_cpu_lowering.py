"""The straight-line threefry lowering on the CPU (`jaxrl_fast.platform.cpu_lowering`): in place on
this JAX, no `while` left in a random call's program, and the same bits as JAX's rolled loop
(Random123's known answers, and a child process that keeps JAX's own lowering). CPU only by
what it checks: the lowering it swaps is JAX's CPU rule."""

from __future__ import annotations

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import child_env

import jaxrl_fast  # noqa: F401  (installs the lowering)
from jaxrl_fast.platform import cpu_lowering

cpu = pytest.mark.skipif(jax.default_backend() != "cpu", reason="the rule is the CPU's")

# Random draws whose bits are compared: splits, bits, floats, ints, under jit and vmap. This
# process draws them with the straight-line lowering; a child process keeps JAX's rolled loop.
DRAWS = r"""
import jax, jax.numpy as jnp

@jax.jit
def draws(key):
    a, b = jax.random.split(key)
    keys = jax.random.split(b, 3)
    return {
        "split": jax.random.key_data(keys),
        "bits": jax.random.bits(a, (5,), jnp.uint32),
        "uniform": jax.random.uniform(keys[0], (4,)),
        "normal": jax.random.normal(keys[1], (2, 3)),
        "randint": jax.random.randint(keys[2], (6,), 0, 7),
        "vmapped": jax.vmap(lambda k: jax.random.uniform(k, (2,)))(keys),
    }
"""
CHILD = (
    DRAWS
    + r"""
import json, sys
import jaxrl_fast
from jaxrl_fast.platform import cpu_lowering
out = {k: v.tolist() for k, v in draws(jax.random.key(int(sys.argv[1]))).items()}
print(json.dumps({"installed": cpu_lowering.installed(), "draws": out}))
"""
)


def _rolled_draws(seed: int) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(seed)],
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(cache=False, **{cpu_lowering.OPT_OUT: "1"}),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _draws(seed: int) -> dict:
    scope: dict = {}
    exec(DRAWS, scope)
    return {k: np.asarray(v) for k, v in scope["draws"](jax.random.key(seed)).items()}


@cpu
def test_installed_on_this_jax_and_no_loop_left():
    assert cpu_lowering.installed(), "this JAX lacks the private threefry pieces install() uses"
    text = jax.jit(lambda k: jax.random.split(k, 4)).lower(jax.random.key(0)).compile().as_text()
    assert " while(" not in text


@cpu
def test_known_answers():
    # Random123's known-answer vectors for threefry2x32 with 20 rounds
    cases = [
        ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
        ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
        ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
    ]
    fn = jax.jit(jax.extend.random.threefry_2x32)
    for key, count, expected in cases:
        got = fn(jnp.array(key, jnp.uint32), jnp.array(count, jnp.uint32))
        assert [int(x) for x in got] == list(expected)


@cpu
def test_same_bits_as_jax_rolled_loop():
    ours, rolled = _draws(3), _rolled_draws(3)
    assert cpu_lowering.installed() and not rolled["installed"]
    assert ours.keys() == rolled["draws"].keys()
    for name, value in ours.items():
        np.testing.assert_array_equal(value, np.asarray(rolled["draws"][name]), name)
    assert not np.array_equal(_draws(4)["bits"], ours["bits"])  # the seed reaches the draws
