"""The DQN family as configs (`jaxrl_fast.presets.dqn_family`): each algorithm changes exactly
its own fields of a base preset, its presets are valid (docs/dqn_family.md's examples train
`rainbow-minatar` through the CLI and full Rainbow through `train`: tests/test_docs_examples.py),
and full Rainbow's parts (C51 dueling head, noisy layers, PER, 3-step returns) resume bitwise."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest
from conftest import StopRun, params_hashes, stop_at, tiny_config

from jaxrl_fast import presets, train
from jaxrl_fast.config import AtariConfig, EnvConfig
from jaxrl_fast.config.sections import AlgoConfig
from jaxrl_fast.presets import dqn_family


def _changed(a, b, prefix=""):
    """The dotted fields where two configs differ."""
    out = set()
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if dataclasses.is_dataclass(x):
            out |= _changed(x, y, f"{prefix}{f.name}.")
        elif isinstance(x, AlgoConfig):  # its sections, by name
            for name in x:
                out |= _changed(x[name], y[name], f"{prefix}{f.name}.{name}.")
        elif x != y:
            out.add(f"{prefix}{f.name}")
    return out


_SUPPORT = ("algo.distributional.v_min", "algo.distributional.v_max")  # [-100, 100] below
EXPECTED = {
    "dqn": set(),
    "c51": {"network.head", "dqn.loss", "dqn.adam_eps", "dqn.double_q", *_SUPPORT},
    "qr-dqn": {"network.head", "dqn.loss", "dqn.adam_eps", "dqn.double_q"},
    "iqn": {"network.head", "dqn.loss", "dqn.adam_eps", "dqn.double_q"},  # (64, 64, 32), 64
    "m-dqn": {"dqn.loss"},  # its settings are the defaults (as are 51 atoms on [-10, 10], 200
    # quantiles and kappa 1)
    "hl-gauss": {"network.head", "dqn.loss", *_SUPPORT},
    "noisy": {"network.dense", "schedule.epsilon_start", "schedule.epsilon_end"},
    "rainbow": {"network.head", "dqn.loss", "dqn.adam_eps", "replay.n_step",
                "replay.prioritised", "replay.alpha", "replay.beta", "replay.beta_anneal",
                "replay.priority_eps", "dqn.double_q", *_SUPPORT},
    "full-rainbow": {"network.head", "dqn.loss", "dqn.adam_eps", "replay.n_step",
                     "replay.prioritised", "replay.alpha", "replay.beta", "replay.beta_anneal",
                     "replay.priority_eps", "network.dueling", "network.dense",
                     "schedule.epsilon_start", "schedule.epsilon_end", *_SUPPORT},
}  # fmt: skip


@pytest.mark.parametrize("name", list(dqn_family.ALGORITHMS))
def test_each_algorithm_changes_its_own_fields_only(name):
    base = presets.get("minatar-breakout")
    assert _changed(base, dqn_family.apply(name, base, v_max=100.0)) == EXPECTED[name]


def test_an_unknown_algorithm_lists_the_known_ones():
    with pytest.raises(ValueError, match="expected one of dqn, c51"):
        dqn_family.apply("rainbow2", presets.get("minatar-breakout"))


# Revisiting Rainbow's MinAtar Rainbow, written down from its config file (JohanSamir/
# revisiting_rainbow, revisiting_rainbow/Configs/rainbow_breakout.gin @ 521a3c2; the other games'
# files differ only in the game), with Dopamine's JaxDQNAgent defaults for what it leaves unset
# (epsilon_train, epsilon_eval, epsilon_decay_period) and Dopamine's Rainbow agent code for PER
# (loss weights 1 / sqrt(P) over their largest, priorities sqrt(loss + 1e-10)).
REVISITING_RAINBOW_MINATAR = {
    "gamma": 0.99, "update_horizon": 3, "min_replay_history": 1_000, "update_period": 4,
    "target_update_period": 1_000, "noisy": False, "dueling": False, "double_dqn": False,
    "hidden_layer": 0, "conv_features": 16, "num_atoms": 51, "vmax": 100.0,
    "replay_scheme": "prioritized", "priority_exponent": 0.5, "priority_eps": 1e-10,
    "is_exponent": 0.5, "is_exponent_annealed": False, "optimizer": "adam",
    "learning_rate": 1e-4, "adam_eps": 3.125e-4, "grad_clip": None,
    "training_steps": 10 * 1_000_000, "replay_capacity": 100_000, "batch_size": 32,
    "epsilon_start": 1.0, "epsilon_train": 0.01, "epsilon_eval": 0.001,
    "epsilon_decay_period": 250_000, "loss": "c51",
}  # fmt: skip


def _as_revisiting_rainbow(cfg):
    """Our config in the reference's terms (each key as REVISITING_RAINBOW_MINATAR's)."""
    d = cfg.algo.distributional
    assert d.v_min == -d.v_max  # Dopamine's support is [-vmax, vmax]
    return {
        "gamma": cfg.dqn.gamma, "update_horizon": cfg.replay.n_step,
        "min_replay_history": cfg.learning_starts,
        "update_period": cfg.train_frequency / cfg.updates_per_block,  # env steps per update
        "target_update_period": cfg.dqn.target_period, "noisy": cfg.network.dense == "noisy",
        "dueling": cfg.network.dueling, "double_dqn": cfg.dqn.double_q,
        "hidden_layer": len(cfg.network.hidden_sizes),
        "conv_features": cfg.network.conv_channels[0], "num_atoms": d.num_atoms,
        "vmax": d.v_max, "replay_scheme": "prioritized" if cfg.replay.prioritised else "uniform",
        "priority_exponent": cfg.replay.alpha, "priority_eps": cfg.replay.priority_eps,
        "is_exponent": cfg.replay.beta, "is_exponent_annealed": cfg.replay.beta_anneal,
        "optimizer": cfg.dqn.optimizer, "learning_rate": cfg.dqn.learning_rate,
        "adam_eps": cfg.dqn.adam_eps, "grad_clip": cfg.dqn.max_grad_norm,
        "training_steps": cfg.total_env_steps, "replay_capacity": cfg.replay.capacity,
        "batch_size": cfg.replay.batch_size, "epsilon_start": cfg.schedule.epsilon_start,
        "epsilon_train": cfg.schedule.epsilon_end, "epsilon_eval": cfg.eval_epsilon,
        "epsilon_decay_period": cfg.schedule.epsilon_fraction * cfg.schedule.horizon,
        "loss": cfg.dqn.loss,
    }  # fmt: skip


# the reference's keys behind each field `RAINBOW_MINATAR_DIFFERS` names: close, not equal
_DIFFERS_KEYS = {"learning_starts": "min_replay_history",
                 "dqn.target_period": "target_update_period"}  # fmt: skip


def test_rainbow_minatar_is_revisiting_rainbows_field_by_field():
    cfg = presets.get("rainbow-minatar")
    ours = _as_revisiting_rainbow(cfg)
    assert ours.keys() == REVISITING_RAINBOW_MINATAR.keys()
    for key, want in REVISITING_RAINBOW_MINATAR.items():
        if key in _DIFFERS_KEYS.values():  # said in RAINBOW_MINATAR_DIFFERS: within one block
            assert abs(ours[key] - want) < cfg.env.num_envs, key
        else:
            assert ours[key] == pytest.approx(want) if want is not None else ours[key] is None, key
    assert set(_DIFFERS_KEYS) <= set(dqn_family.RAINBOW_MINATAR_DIFFERS)
    assert cfg.env.name == "Breakout-MinAtar" and cfg.network.head == "c51"
    assert "rainbow-minatar" in dqn_family.REFERENCES
    # a shortened run keeps the reference's schedules (their fractions are of the 10M horizon)
    short = cfg.replace(total_env_steps=1_000_000)
    assert _as_revisiting_rainbow(short)["epsilon_decay_period"] == pytest.approx(250_000)
    # the full Rainbow it used to be is a family member on any preset
    full = dqn_family.apply("full-rainbow", presets.get("minatar-breakout"), v_max=100.0)
    assert (full.network.dense, full.network.dueling, full.dqn.double_q) == ("noisy", True, True)


# Dopamine's JAX agents on Atari, written down from their gin files (google/dopamine,
# dopamine/jax/agents/*/configs/*.gin at the commits `dqn_family.REFERENCES` names), the values
# common to all of them first: the Atari protocol (agent steps are env steps).
DOPAMINE_PROTOCOL = {
    "gamma": 0.99, "min_replay_history": 20_000, "update_period": 4,
    "target_update_period": 8_000, "epsilon_train": 0.01, "epsilon_eval": 0.001,
    "epsilon_decay_period": 250_000, "batch_size": 32, "sticky_actions": True,
    "max_steps_per_episode": 27_000, "terminal_on_life_loss": False, "noop_max": 0,
    "reward_clip": True, "grad_clip": None, "vmax": 10.0,
}  # fmt: skip
# per gin file: lr, eps, update_horizon, replay_scheme, num_atoms, noisy, dueling, double_dqn
DOPAMINE = {
    "c51-atari-pong": (2.5e-4, 3.125e-4, 1, "uniform", 51, False, False, False),  # c51.gin
    "qr-dqn-atari-pong": (5e-5, 3.125e-4, 3, "prioritized", 200, False, False, False),
    "iqn-atari-pong": (5e-5, 3.125e-4, 3, "uniform", None, False, False, False),
    "rainbow-atari-pong": (6.25e-5, 1.5e-4, 3, "prioritized", 51, False, False, False),
    "full-rainbow-atari-pong": (6.25e-5, 1.5e-4, 3, "prioritized", 51, True, True, True),
}  # fmt: skip


@pytest.mark.parametrize("name", list(DOPAMINE))
def test_the_dopamine_atari_presets_are_dopamines_field_by_field(name):
    cfg = presets.get(name)
    d, a, s = cfg.algo.distributional, cfg.env.atari, cfg.schedule
    lr, eps, n, scheme, atoms, noisy, dueling, double = DOPAMINE[name]
    want = {**DOPAMINE_PROTOCOL, "learning_rate": lr, "adam_eps": eps, "update_horizon": n,
            "replay_scheme": scheme, "num_atoms": atoms, "noisy": noisy, "dueling": dueling,
            "double_dqn": double}  # fmt: skip
    ours = {
        "gamma": cfg.dqn.gamma, "min_replay_history": cfg.learning_starts,
        "update_period": cfg.train_frequency / cfg.updates_per_block,
        "target_update_period": cfg.dqn.target_period, "epsilon_train": s.epsilon_end,
        "epsilon_eval": cfg.eval_epsilon, "epsilon_decay_period": s.epsilon_fraction * s.horizon,
        "batch_size": cfg.replay.batch_size, "sticky_actions": a.sticky_actions,
        "max_steps_per_episode": a.max_episode_frames // a.frame_skip,
        "terminal_on_life_loss": a.episodic_life, "noop_max": a.noop_max,
        "reward_clip": a.reward_clip, "grad_clip": cfg.dqn.max_grad_norm, "vmax": d.v_max,
        "learning_rate": cfg.dqn.learning_rate, "adam_eps": cfg.dqn.adam_eps,
        "update_horizon": cfg.replay.n_step,
        "replay_scheme": "prioritized" if cfg.replay.prioritised else "uniform",
        "num_atoms": {"c51": d.num_atoms, "qr-dqn": d.num_quantiles}.get(cfg.network.head),
        "noisy": cfg.network.dense == "noisy", "dueling": cfg.network.dueling,
        "double_dqn": cfg.dqn.double_q,
    }  # fmt: skip
    if noisy:  # said in DOPAMINE_ATARI_DIFFERS: epsilon 0 beside the noisy layers
        assert "schedule.epsilon_start" in dqn_family.DOPAMINE_ATARI_DIFFERS
        assert (s.epsilon_start, s.epsilon_end) == (0.0, 0.0)
        drop = ("epsilon_train", "epsilon_decay_period")
        want = {k: v for k, v in want.items() if k not in drop}
        ours = {k: v for k, v in ours.items() if k not in drop}
    assert ours == want, {k: (ours[k], want[k]) for k in want if ours[k] != want[k]}
    assert d.v_min == -10.0 and cfg.env.name == "envpool:Pong-v5" and name in dqn_family.REFERENCES
    if cfg.replay.prioritised:  # Dopamine's PER: sqrt(loss + 1e-10), weights 1 / sqrt(P)
        r = cfg.replay
        assert (r.alpha, r.priority_eps, r.beta, r.beta_anneal) == (0.5, 1e-10, 0.5, False)
    if cfg.network.head == "iqn":  # N = N' = 64, K = 32, a 64-cosine embedding
        assert (cfg.algo.iqn.samples, cfg.algo.iqn.embedding) == ((64, 64, 32), 64)


def test_the_family_minatar_presets_use_minatars_return_scale():
    for name in ("c51-minatar", "hl-gauss-minatar"):
        d = presets.get(name).algo.distributional
        assert (d.v_min, d.v_max, d.num_atoms) == (-100.0, 100.0, 51), name
    # the return scale: clipped Atari rewards 10 (Dopamine), else 100
    pong = EnvConfig(name="envpool:Pong-v5")
    assert pong.return_scale == 10.0 and EnvConfig(name="CartPole-v1").return_scale == 100.0
    unclipped = EnvConfig(name="envpool:Pong-v5", atari=AtariConfig(reward_clip=False))
    assert unclipped.return_scale == 100.0
    noisy = presets.get("noisy-minatar").algo.noisy
    assert (noisy.sigma0, noisy.mu_init) == (0.5, "uniform")  # Fortunato et al. 2018


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


def test_algo_on_the_command_line_puts_any_member_on_any_preset(capsys):
    from jaxrl_fast.cli import main

    def printed(*argv) -> dict:
        assert main(["train", *argv, "--print-config"]) == 0
        out = capsys.readouterr().out
        return json.loads(out[out.index("{") :])

    full = printed("--preset", "minatar-breakout", "--algo", "full-rainbow",
                   "--dqn.learning-rate", "1e-3")  # fmt: skip
    want = dqn_family.apply("full-rainbow", presets.get("minatar-breakout")).replace(
        dqn={"learning_rate": 1e-3}
    )
    assert full == json.loads(json.dumps(want.to_dict()))  # later options still win
    assert full["algo"]["distributional"]["v_max"] == 100.0  # MinAtar's return scale
    c51 = printed("--preset", "cartpole", "--algo", "c51", "--algo.distributional.num-atoms", "11")
    assert c51["network"]["head"] == "c51" and c51["dqn"]["loss"] == "c51"
    assert c51["algo"]["distributional"]["num_atoms"] == 11  # its own knobs on top
    with pytest.raises(SystemExit) as stop:
        main(["train", "--algo", "rainbow2", "--print-config"])
    assert stop.value.code == 2 and "invalid choice: 'rainbow2'" in capsys.readouterr().err
