"""`xla_report`: the four measures on a tiny run, their relations, the CLI, and the conventional
loop's counted work against an instrumented `train_unfused`."""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import tiny_config

from jaxrl_fast import baseline, xla_report
from jaxrl_fast.xla_report import reports

# probe-chain, 2 seeds x 4 envs: 2 collect steps and 2 updates per block, so every loop of
# run_chunk (blocks, collect steps, the learn scan) has a trip count above 1
TINY_SETS = {
    "env.num_envs": "4",
    "network.hidden_sizes": "32",
    "replay.capacity": "400",
    "replay.batch_size": "16",
    "replay.n_step": "1",
    "dqn.target_period": "80",
    "dqn.gamma": "0.9",
    "learning_starts": "80",
    "train_frequency": "8",
    "updates_per_block": "2",
    "num_chunks": "4",
    "eval_episodes": "2",
}
TOTAL = 880  # (880 - 80) / 8 = 100 blocks, 4 chunks: 25 blocks per chunk


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jaxrl-fast")
    xla_report.add_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def _argv(*extra: str) -> list[str]:
    argv = ["xla-report", "--preset", "cartpole", "--env", "probe-chain", "--seeds", "2"]
    argv += ["--total-env-steps", str(TOTAL), *extra]
    for name, value in TINY_SETS.items():
        argv += ["--set", f"{name}={value}"]
    return argv


@pytest.fixture(scope="module")
def cli_run():
    """One real `xla-report --json` run: (the XlaReport it made, what it printed, exit code)."""
    made = []
    real = reports.report  # what the CLI calls

    def keep(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    args = _parser().parse_args(_argv("--json"))
    out = io.StringIO()
    reports.report = keep
    try:
        with contextlib.redirect_stdout(out):
            rc = args.func(args)
    finally:
        reports.report = real
    return made[0], out.getvalue(), rc


@pytest.mark.slow
def test_cli_json_prints_the_report(cli_run):
    rep, printed, rc = cli_run
    assert rc == 0
    data = json.loads(printed)
    assert data == json.loads(json.dumps(rep.to_dict()))
    assert set(data["programs"]) == {"init", "run_chunk"}
    assert data["run"]["env"] == "probe-chain" and data["run"]["num_seeds"] == 2


def test_cli_options_build_the_tiny_config():
    config = xla_report.config_from_args(_parser().parse_args(_argv()))
    assert (config.env.name, config.env.num_envs, config.num_seeds) == ("probe-chain", 4, 2)
    assert (config.blocks_per_chunk, config.collect_steps_per_block) == (25, 2)
    assert config.updates_per_block == 2 and config.network.hidden_sizes == (32,)


def test_bad_preset_raises_value_error():
    args = _parser().parse_args(["xla-report", "--preset", "cartpol"])
    with pytest.raises(ValueError, match="unknown preset 'cartpol'"):
        args.func(args)


def test_bad_set_field_raises_value_error():
    args = _parser().parse_args(["xla-report", "--set", "dqn.gama=0.9"])
    with pytest.raises(ValueError, match="not a config field"):
        args.func(args)


@pytest.mark.slow
def test_jaxpr_counts_are_consistent(cli_run):
    rep = cli_run[0]
    for name, prog in rep.programs.items():
        j = prog.jaxpr
        assert 0 < j.after_jax_dce <= j.traced, name
        assert j.top_level <= j.traced
        assert 0 <= j.reaching_no_output < j.traced
        assert j.per_call > 0
    init, chunk = rep.programs["init"].jaxpr, rep.programs["run_chunk"].jaxpr
    # init has no while loop: the while-aware pass finds exactly what JAX's DCE removes
    assert init.loops == []
    assert init.reaching_no_output == init.traced - init.after_jax_dce
    assert sum(init.removed_by_jax_dce.values()) <= init.traced - init.after_jax_dce
    # run_chunk's loops are scans of fixed length (no while: a GPU would wait on the host at
    # every iteration of one): the prefill (80 // 4 steps), the blocks, and in each block the
    # collect and learn loops, each named by the config field it comes from
    assert chunk.reaching_no_output >= chunk.traced - chunk.after_jax_dce
    kinds = [(loop.kind, loop.depth, loop.trips, loop.source) for loop in chunk.loops]
    named = "scan length in the jaxpr = "
    assert kinds == [
        ("scan", 0, 20, named + "prefill_steps"),
        ("scan", 0, 25, named + "blocks_per_chunk"),
        ("scan", 1, 2, named + "collect_steps_per_block"),
        ("scan", 1, 2, named + "updates_per_block"),
    ]
    # equations run per chunk: the loop bodies times their trip counts
    outer = chunk.loops[1]
    assert chunk.per_call > outer.trips * outer.body_eqns * 0.5
    assert chunk.per_call > chunk.traced


@pytest.mark.slow
def test_hlo_counts_are_consistent(cli_run):
    rep = cli_run[0]
    for name, prog in rep.programs.items():
        low, opt = prog.hlo_lowered, prog.hlo_optimised
        assert low.instructions > 0 and opt.instructions > 0, name
        assert low.fusions == 0  # fusion is an XLA pass: none before optimisation
        assert opt.fusions > 0 and opt.fused_computations > 0  # XLA:CPU fuses
        assert sum(opt.fusion_kinds.values()) == opt.fusions
        assert opt.fusions <= opt.thunks <= opt.scheduled <= opt.instructions
    chunk = rep.programs["run_chunk"]
    # the prefill's cond is run_chunk's only one
    assert chunk.hlo_optimised.while_loops >= 2 and chunk.hlo_optimised.conditionals == 1
    # LLVM's optimisation level does not change the HLO pipeline: the same fusions
    lowest = chunk.hlo_optimised_lowest
    assert lowest.fusions == chunk.hlo_optimised.fusions
    assert lowest.fusion_kinds == chunk.hlo_optimised.fusion_kinds
    assert rep.programs["init"].hlo_optimised_lowest is None


@pytest.mark.slow
def test_cost_counts_each_loop_body_times_its_trip_count(cli_run):
    rep = cli_run[0]
    cost = rep.programs["run_chunk"].cost
    blocks = (TOTAL - 80) // 8 // 4  # per chunk, computed here from the options
    steps, updates = 8 // 4, 2
    prefill, outer = cost.loops
    assert (prefill["trips"], prefill["inner"]) == (80 // 4, [])
    assert (outer["kind"], outer["trips"]) == ("scan", blocks)
    collect, learn = outer["inner"]
    assert (collect["trips"], learn["trips"]) == (steps, updates)
    assert "collect_steps_per_block" in collect["source"] and "updates_per" in learn["source"]
    for key in ("flops", "bytes accessed"):
        inner = sum(r["trips"] * r["per_iteration"][key] - r["once"][key] for r in (collect, learn))
        assert outer["per_iteration"][key] == pytest.approx(outer["once"][key] + inner)
        expected = cost.xla[key] + sum(
            r["trips"] * r["per_iteration"][key] - r["once"][key] for r in (prefill, outer)
        )
        assert cost.with_trips[key] == pytest.approx(expected)
        assert cost.with_trips[key] > cost.xla[key] > 0
    assert learn["per_iteration"]["flops"] > collect["per_iteration"]["flops"] > 0
    init = rep.programs["init"].cost
    assert init.loops == [] and init.with_trips == init.xla
    for prog in rep.programs.values():
        m = prog.cost.memory
        assert m["argument_size"] > 0 and m["output_size"] > 0 and m["temp_size"] >= 0
        assert prog.cost.peak_bytes > 0
    # init may need no temporaries (its random draws are straight-line: `cpu_lowering`)
    assert cost.memory["temp_size"] > 0
    assert cost.memory["alias_size"] > 0  # run_chunk donates its runner


def test_trip_cost_matches_hand_counted_flops():
    x = jnp.ones((32, 32), jnp.float32)

    def f(c, n_outer, n_inner):
        def outer(i, c):
            c = jax.lax.fori_loop(0, n_inner, lambda j, c: c @ x, c)
            return c @ x

        return jax.lax.fori_loop(0, n_outer, outer, c)

    f = functools.partial(f, n_outer=3, n_inner=4)  # fixed trip counts: scans
    closed = jax.make_jaxpr(f)(x)
    xla = xla_report.xla_cost(jax.jit(f).lower(x).compile())
    total, loops = xla_report.trip_cost(closed, xla, [(0, 3, "outer"), (1, 4, "inner")])
    matmul = 2 * 32**3
    assert xla["flops"] == pytest.approx(2 * matmul, rel=1e-3)  # each body once
    assert total["flops"] == pytest.approx(3 * (4 + 1) * matmul, rel=1e-3)
    assert [(r["trips"], r["inner"][0]["trips"]) for r in loops] == [(3, 4)]
    assert loops[0]["source"].endswith("= outer")
    assert loops[0]["inner"][0]["source"].endswith("= inner")


def test_liveness_enters_while_loops_where_jax_dce_stops():
    def f(x, n):
        def body(i, carry):
            a, b = carry
            unused = jnp.sin(a)  # noqa: F841 - reaches no output
            return a + 1.0, b * 2.0  # b is carried but never returned

        return jax.lax.fori_loop(0, n, body, (x, x))[0]

    counts = xla_report.jaxpr_counts(jax.make_jaxpr(f)(jnp.ones(3), 5))
    assert counts.after_jax_dce == counts.traced  # JAX keeps the while loop whole
    assert counts.no_output_by_primitive == {"sin": 1, "mul": 1}
    assert counts.reaching_no_output == 2
    # a while loop (traced bounds) has no trip count in the jaxpr: counted once, and said so
    ((kind, trips, source),) = [(loop.kind, loop.trips, loop.source) for loop in counts.loops]
    assert (kind, trips) == ("while", 1) and "counted once" in source


@pytest.mark.slow
def test_timings_are_positive_and_apart(cli_run):
    t = cli_run[0].timing
    assert set(t["per_iteration_s"]) == {"op_by_op", "jit_lowest", "jit_default"}
    assert all(v > 0 for v in t["per_iteration_s"].values())
    assert all(v > 0 for v in t["compile_s"].values())
    assert set(t["compile_s"]) == {"init", "run_chunk_default", "run_chunk_lowest"}
    assert t["iterations_timed"]["op_by_op"] <= 2 and t["iterations_timed"]["jit"] == 25


@pytest.mark.slow
def test_render_names_every_measure(cli_run):
    rep = cli_run[0]
    text = rep.render()
    for needle in (
        "(a) jaxpr equations",
        "after JAX's DCE",
        "(b) HLO instructions",
        "fusions",
        "(c) cost",
        "x trip counts",
        "memory",
        "(d) time per iteration",
        "op_by_op",
        "compile",
        "(e) per env step",
        "notes:",
    ):
        assert needle in text, needle
    assert "does not turn off HLO fusion" in text
    assert "run_chunk: 0 loop(s) without a known trip count and 1 conditional(s)" in text
    assert rep.apis["dce"].startswith("jax._src.interpreters.partial_eval.dce_jaxpr")


@pytest.mark.slow
def test_unfused_counts_match_an_instrumented_train_unfused(cli_run, monkeypatch):
    cfg = tiny_config(
        train_frequency=8, updates_per_block=2, replay={"n_step": 1}, dqn={"target_period": 80}
    )
    blocks = 12  # prefill (20 collect steps) + 12 blocks: one target update (every 10 blocks)
    seen = {"calls": {}, "syncs": 0, "d2h": 0, "h2d": 0, "h2d_bytes": 0}
    real_get = jax.device_get

    def counted(name, fn):
        def call(*args):
            seen["calls"][name] = seen["calls"].get(name, 0) + 1
            host = [x for x in jax.tree.leaves(args) if isinstance(x, (np.ndarray, np.generic))]
            if host:
                seen["h2d"] += 1
                seen["h2d_bytes"] += sum(x.nbytes for x in host)
            return fn(*args)

        return call

    def parts(config):
        p = baseline.compile_parts(config)
        wrapped = {f: counted(f, getattr(p, f)) for f in ("act", "update", "update_target")}
        env_step = counted("env.step", p.env.step)
        return p._replace(env=p.env._replace(step=env_step), **wrapped)

    def device_get(tree):
        seen["syncs"] += 1
        seen["d2h"] += sum(x.nbytes for x in jax.tree.leaves(tree) if isinstance(x, jax.Array))
        return real_get(tree)

    counted_parts = parts(cfg)  # compiled outside the counted window, as train_unfused does
    monkeypatch.setattr(jax, "device_get", device_get)
    steps = cfg.learning_starts + blocks * cfg.train_frequency
    baseline.train_unfused(cfg, max_env_steps=steps, parts=counted_parts)
    from jaxrl_fast.envs import make_env

    want = xla_report.unfused_totals(cfg, make_env("probe-chain", 4).spec, blocks)
    calls = seen["calls"]
    assert calls["act"] == calls["env.step"] == want["collect_steps"] == 20 + 2 * blocks
    assert calls["update"] == want["updates"] == 2 * blocks
    assert calls["update_target"] == want["target_updates"] == 1
    assert sum(calls.values()) == want["compiled_calls"]
    assert seen["syncs"] == want["host_syncs"]
    assert seen["d2h"] == want["device_to_host_bytes"]
    assert seen["h2d"] == want["host_to_device_transfers"]
    assert seen["h2d_bytes"] == want["host_to_device_bytes"]
    # the report's per-env-step rows are these counts over a steady-state block
    per = cli_run[0].unfused["per_env_step"]
    steady = xla_report.unfused_totals(cfg, make_env("probe-chain", 4).spec, 10)
    none = xla_report.unfused_totals(cfg, make_env("probe-chain", 4).spec, 0)
    for key in ("compiled_calls", "host_syncs", "host_to_device_bytes"):
        assert per["unfused"][key] == pytest.approx((steady[key] - none[key]) / (10 * 8))
    assert per["fused"]["compiled_calls"] == pytest.approx(1 / (25 * 8))
    assert per["unfused"]["host_syncs"] > per["fused"]["host_syncs"] > 0
