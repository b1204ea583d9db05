"""The DQN family as configs (`jaxrl_fast.presets.dqn_family`): each algorithm changes exactly
its own fields of a base preset, its presets are valid (docs/dqn_family.md's examples train
`rainbow-minatar` through the CLI and full Rainbow through `train`: tests/test_docs_examples.py),
and full Rainbow's parts (C51 dueling head, noisy layers, PER, 3-step returns) resume bitwise."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from conftest import StopRun, params_hashes, stop_at, tiny_config

from jaxrl_fast import presets, train
from jaxrl_fast.presets import dqn_family


def _changed(a, b, prefix=""):
    """The dotted fields where two configs differ."""
    out = set()
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if dataclasses.is_dataclass(x):
            out |= _changed(x, y, f"{prefix}{f.name}.")
        elif x != y:
            out.add(f"{prefix}{f.name}")
    return out


EXPECTED = {
    "dqn": set(),
    "c51": {"network.head", "dqn.loss", "dqn.adam_eps"},
    "qr-dqn": {"network.head", "dqn.loss", "dqn.adam_eps"},
    "iqn": {"network.head", "dqn.loss", "dqn.adam_eps"},  # (64, 64, 32) and 64: the defaults
    "m-dqn": {"dqn.loss"},  # its settings are the defaults (as are 51 atoms on [-10, 10], 200
    # quantiles and kappa 1)
    "hl-gauss": {"network.head", "dqn.loss"},
    "noisy": {"network.dense", "schedule.epsilon_start", "schedule.epsilon_end"},
    "rainbow": {"network.head", "dqn.loss", "dqn.adam_eps", "replay.n_step",
                "replay.prioritised", "replay.alpha", "replay.beta"},
    "full-rainbow": {"network.head", "dqn.loss", "dqn.adam_eps", "replay.n_step",
                     "replay.prioritised", "replay.alpha", "replay.beta", "network.dueling",
                     "network.dense", "schedule.epsilon_start", "schedule.epsilon_end"},
}  # fmt: skip


@pytest.mark.parametrize("name", list(dqn_family.ALGORITHMS))
def test_each_algorithm_changes_its_own_fields_only(name):
    base = presets.get("minatar-breakout")
    assert _changed(base, dqn_family.apply(name, base)) == EXPECTED[name]


def test_an_unknown_algorithm_lists_the_known_ones():
    with pytest.raises(ValueError, match="expected one of dqn, c51"):
        dqn_family.apply("rainbow2", presets.get("minatar-breakout"))


def test_the_family_presets_are_registered_with_their_sources_settings():
    assert set(dqn_family.PRESETS) <= set(presets.names())
    rb = presets.get("rainbow-minatar")
    assert (rb.network.head, rb.network.dueling, rb.network.dense) == ("c51", True, "noisy")
    support = (rb.algo.distributional.v_min, rb.algo.distributional.v_max)
    assert (*support, rb.algo.distributional.num_atoms, rb.replay.n_step) == (-100.0, 100.0, 51, 3)
    assert (rb.dqn.learning_rate, rb.dqn.adam_eps, rb.replay.batch_size) == (1e-4, 3.125e-4, 32)
    assert rb.env.name == "Breakout-MinAtar" and rb.schedule.epsilon_start == 0.0
    # one update per 4 env steps, a target copy every 1,008
    assert rb.train_frequency / rb.updates_per_block == 4 and rb.dqn.target_period == 1_008
    pong = presets.get("rainbow-atari-pong")
    assert (pong.dqn.learning_rate, pong.dqn.adam_eps) == (6.25e-5, 1.5e-4)
    assert pong.env.name == "envpool:Pong-v5" and pong.replay.prioritised


@pytest.mark.slow
def test_full_rainbow_resumes_bitwise(tmp_path):
    cfg = dqn_family.apply("full-rainbow", tiny_config())
    cfg = cfg.replace(algo={"distributional": {"v_min": -2.0, "v_max": 3.0}})
    full = train(cfg, progress=False, run_dir=tmp_path / "full", checkpoint_every=200)
    with pytest.raises(StopRun):
        train(cfg, progress=False, run_dir=tmp_path / "cut", checkpoint_every=200,
              on_chunk=stop_at(2))  # fmt: skip
    resumed = train(cfg, progress=False, run_dir=tmp_path / "cut", resume=True)
    assert params_hashes(tmp_path / "cut") == params_hashes(tmp_path / "full")
    np.testing.assert_array_equal(resumed.final_return, full.final_return)
    key_data = [np.asarray(jax.random.key_data(r.runner.seeds.agent.rng)) for r in (resumed, full)]
    np.testing.assert_array_equal(*key_data)  # the noise's key is in the checkpoint


@pytest.mark.slow
def test_the_family_composes_with_precision_l3_and_a_sweep():
    """One program: QR-DQN's head on noisy layers, 3-step prioritised rows drawn partly from the
    L3 tier, bf16 compute, swept over kappa (traced: both points in one compile). Each point
    trains with finite losses, the L3 tier is read, and the two kappas end apart."""
    cfg = dqn_family.apply("qr-dqn", tiny_config(num_chunks=2))
    cfg = cfg.replace(
        network=dataclasses.replace(cfg.network, dense="noisy"),
        algo={"distributional": {"num_quantiles": 16}},
        replay={"n_step": 3, "prioritised": True, "capacity": 64, "l3": "host",
                "l3_capacity": 400, "l3_share": 0.5},
        precision={"compute": "bf16"},
        schedule={"epsilon_start": 0.0, "epsilon_end": 0.0},  # the noise explores
    )  # fmt: skip
    swept = train(cfg, sweep={"dqn.huber_delta": [1.0, 3.0]}, seeds_per_point=1, progress=False)
    history = swept.result.history
    replay = history[-1]["replay"]
    assert min(replay["l3_rows_sampled"]) > 0.1 * min(replay["rows_sampled"])  # L3 rows trained
    assert all(np.isfinite(h["loss"]).all() for h in history)
    params = jax.tree.leaves(swept.result.runner.seeds.agent.params)
    assert all(p.shape[0] == 2 for p in params)
    assert any(not np.allclose(p[0], p[1]) for p in params)  # the kappas differ
