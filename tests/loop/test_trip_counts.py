"""The compiled programs have no host round trip XLA:GPU would take at every iteration: every
`while` of `init`, `run_chunk` and the evaluation has a trip count known at compile time, and
every `conditional` left guards expensive work, named by its `jax.named_scope`.

XLA annotates the trip counts it proves (`known_trip_count`) in the optimised HLO on CPU as on
GPU, so the check runs here; on a GPU a loop without one reads its condition on the host at
every iteration, and a `conditional` its predicate."""

from __future__ import annotations

import re

import jax
import pytest
from conftest import tiny_config

from jaxrl_fast.config import PrecisionConfig
from jaxrl_fast.loop import make_train
from jaxrl_fast.xla_report.hlo import host_waits

# The conds a run's programs may keep, each guarding work too costly to run and discard:
GUARDS = {
    "prefill": "the first chunk's prefill_steps collect steps (once per chunk)",
    "eval_segment": "the evaluation's next EVAL_SEGMENT env steps, skipped once all episodes end",
    "fp32_fallback": "a second, fp32 network (opt-in: PrecisionConfig.fallback)",
    "l3_spill": "the L3 tier's host callbacks, once per block",
    "l3_write": "the L3 tier's write to the host",
    "l3_fetch": "the L3 tier's read from the host",
    "local_sgd_average": "local SGD's parameter all-reduce, every K updates",
    "onebit_warmup": "1-bit Adam's full or compressed exchange",
}


def _waits(cfg) -> dict:
    """program name -> `HostWaits` of its optimised HLO."""
    fns = make_train(cfg)
    keys = jax.random.split(jax.random.key(0), cfg.num_seeds)
    runner = jax.eval_shape(fns.init, keys)
    texts = {
        "init": jax.jit(fns.init).lower(keys).compile().as_text(),
        "run_chunk": jax.jit(fns.run_chunk).lower(runner).compile().as_text(),
        "evaluate": jax.jit(fns.evaluate).lower(runner, keys).compile().as_text(),
    }
    return {name: host_waits(text) for name, text in texts.items()}


def _guards(names: list[str]) -> list[str]:
    """The guard each conditional's op name names (an unnamed one fails the test)."""
    out = []
    for name in names:
        # the innermost scope (a cond inside another's branch carries both names)
        found = [(m.start(), g) for g in GUARDS for m in re.finditer(rf"[/(]{g}[/)]", name)]
        assert found, f"a conditional that guards nothing named: {name}"
        out.append(max(found)[1])
    return sorted(set(out))


def test_the_default_programs_wait_on_the_host_once_per_chunk():
    waits = _waits(tiny_config(eval_episodes=2))
    for name, w in waits.items():
        assert w.unknown_trip_loops == [], name
    assert waits["init"].conditionals == []
    # the prefill's cond (taken in the first chunk) is the training program's only one
    assert _guards(waits["run_chunk"].conditionals) == ["prefill"]
    assert len(waits["run_chunk"].conditionals) == 1
    # probe-chain's episodes fit in one segment, which runs unguarded
    assert waits["evaluate"].conditionals == []


@pytest.mark.slow
def test_guards_of_the_fallback_l3_and_evaluation_segments_are_named():
    cfg = tiny_config(
        precision=PrecisionConfig(compute="fp16", fallback=True),
        replay={
            "prioritised": True,
            "n_step": 3,
            "capacity": 64,
            "l3": "host",
            "l3_capacity": 400,
            "l3_share": 0.5,
        },
        env={"name": "CartPole-v1", "num_envs": 4},
        num_seeds=1,
        eval_episodes=2,
    )
    waits = _waits(cfg)
    for name, w in waits.items():
        assert w.unknown_trip_loops == [], name
    assert set(_guards(waits["run_chunk"].conditionals)) == {
        "prefill",
        "fp32_fallback",
        "l3_spill",
        "l3_write",
        "l3_fetch",
    }
    assert _guards(waits["evaluate"].conditionals) == ["eval_segment", "fp32_fallback"]
