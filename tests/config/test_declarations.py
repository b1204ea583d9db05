"""One home per knob: the facts declared beside each config field (`config.fields.knob`) are the
ones the sweep, the resume check and the command line use."""

from __future__ import annotations

import numpy as np
import pytest

from jaxrl_fast.cli import make_parser
from jaxrl_fast.cli.config_args import build_config
from jaxrl_fast.config import (
    RESUME_OVERRIDABLE,
    SWEEPABLE,
    TrainConfig,
    aliases,
    declared,
    options,
    sections,
)
from jaxrl_fast.config.hparams import hparams_of

# A value other than the default for each sweepable field.
OTHER = {
    "dqn.learning_rate": 1e-3,
    "dqn.gamma": 0.9,
    "dqn.tau": 0.5,
    "dqn.huber_delta": 2.0,
    "dqn.max_grad_norm": 3.0,
    "schedule.lr_schedule": "linear",
    "schedule.lr_end_fraction": 0.5,
    "schedule.lr_period_fraction": 0.2,
    "schedule.gamma_schedule": "0.9:0.5,0.99",
    "schedule.epsilon_schedule": "factor",
    "schedule.epsilon_start": 0.5,
    "schedule.epsilon_end": 0.01,
    "schedule.epsilon_fraction": 0.25,
    "schedule.epsilon_factor": 0.9,
    "schedule.epsilon_every": 10,
    "replay.alpha": 0.5,
    "replay.beta": 0.5,
    "replay.priority_eps": 1e-3,
    "precision.initial_scale": 1024.0,
    "precision.growth_interval": 10,
    "precision.min_scale": 2.0,
    "precision.fallback_overflows": 3,
    "precision.fallback_window": 100,
    "algo.munchausen.alpha": 0.5,
    "algo.munchausen.tau": 0.1,
    "algo.munchausen.l0": -0.5,
    "algo.rollout.td_lambda": 0.3,
}


def test_the_derived_lists_are_the_declared_fields():
    own = declared(TrainConfig, "sweep")
    assert tuple(SWEEPABLE) == own + sections.declared("sweep") and len(SWEEPABLE) == 27
    assert "algo.munchausen.alpha" in SWEEPABLE and "algo.munchausen.alpha" not in own
    assert tuple(RESUME_OVERRIDABLE) == declared(TrainConfig, "resume") + sections.declared(
        "resume"
    )
    assert len(RESUME_OVERRIDABLE) == 27
    assert set(OTHER) == set(SWEEPABLE)  # a new sweepable field needs a value here
    with pytest.raises(ValueError, match="flag 'traced'"):
        declared(TrainConfig, "traced")


@pytest.mark.parametrize("name", SWEEPABLE)
def test_every_sweepable_field_is_a_traced_hyperparameter(name):
    """Changing a field declared sweepable changes the seed's `HParams` (what the program
    reads), so declaring it is all a sweep needs."""
    base = TrainConfig()
    if name == "schedule.epsilon_factor":  # read by the factor schedule only
        base = base.replace(schedule={"epsilon_schedule": "factor"})
    if name in ("schedule.lr_end_fraction", "schedule.lr_period_fraction"):
        base = base.replace(schedule={"lr_schedule": "cosine_restarts"})
    changed = options.apply(base, {name: OTHER[name]})
    a, b = hparams_of(base), hparams_of(changed)
    differ = [f for f in a._fields if not np.array_equal(getattr(a, f), getattr(b, f))]
    assert differ, f"{name} is declared sweepable but sets no HParams value"


def test_resume_overridable_fields_change_no_shape():
    """No field a resume may override is one that sizes an array or a loop."""
    shaped = {
        "replay.capacity",
        "replay.batch_size",
        "replay.n_step",
        "env.num_envs",
        "total_env_steps",
        "train_frequency",
        "num_seeds",
        "network.hidden_sizes",
    }
    assert not shaped & set(RESUME_OVERRIDABLE)


# What an alias needs beside it to make a valid config from the default preset.
COMPANIONS = {
    "replay.l3": ["--l3-capacity", "20000"],
    "replay.l3_capacity": ["--l3", "host"],
    "replay.l3_share": ["--l3", "host", "--l3-capacity", "20000"],
    "replay.sampler": ["--prioritised"],
}


def test_every_declared_alias_is_a_train_option_that_sets_its_field():
    values = {
        "env.name": ("probe-chain", "probe-chain"),
        "env.num_envs": ("5", 5),
        "num_seeds": ("3", 3),
        "replay.capacity": ("800", 800),
        "replay.batch_size": ("16", 16),
        "replay.n_step": ("2", 2),
        "replay.prioritised": (None, True),
        "replay.sampler": ("cumsum", "cumsum"),
        "replay.l3": ("host", "host"),
        "replay.l3_capacity": ("1600", 1600),
        "replay.l3_share": ("0.25", 0.25),
        "replay.spill_dir": ("/tmp", "/tmp"),
        "replay.spill_block": ("8MB", "8MB"),
        "precision.compute": ("bf16", "bf16"),
        "precision.loss_scale": ("static:8", "static:8"),
        "precision.matmul_precision": ("highest", "highest"),
    }
    declared_aliases = aliases(TrainConfig)
    assert set(declared_aliases) == set(values)
    parser = make_parser()
    for name, alias in declared_aliases.items():
        text, want = values[name]
        argv = ["train", alias] if text is None else ["train", alias, text]
        argv += COMPANIONS.get(name, [])
        config = build_config(parser.parse_args(argv))
        part, _, leaf = name.rpartition(".")
        got = getattr(getattr(config, part) if part else config, leaf)
        assert got == want, (alias, got)


def test_hparams_leaves_are_derived_from_the_declarations():
    """`HParams` has one leaf per plain sweepable field (named as it) plus the leaves that
    `Traced` declarations name, and nothing else; each encodes its field as declared."""
    from jaxrl_fast.config.fields import traced
    from jaxrl_fast.config.hparams import HParams

    specs = traced(TrainConfig)
    assert list(specs) + list(sections.declared("sweep")) == list(SWEEPABLE)
    leaves = tuple(leaf for spec, _ in specs.values() for leaf in spec.leaves)
    assert HParams._fields == (*leaves, "algo")  # `algo`: the sections' knobs, by section
    assert "learning_rate" in HParams._fields and "gamma" not in HParams._fields
    cfg = TrainConfig().replace(
        dqn={"gamma": 0.9, "max_grad_norm": None, "learning_rate": 3e-4},
        schedule={"lr_schedule": "cosine_restarts", "epsilon_schedule": "factor"},
        precision={"growth_interval": 7},
    )
    hp = hparams_of(cfg)
    assert hp.learning_rate.dtype == np.float32 and hp.learning_rate == np.float32(3e-4)
    assert hp.lr_kind == 2 and hp.lr_kind.dtype == np.int32  # LR_SCHEDULES[2]
    assert hp.epsilon_kind == 1 and np.isinf(hp.max_grad_norm)
    assert hp.growth_interval == 7 and hp.growth_interval.dtype == np.int32  # an int field
    np.testing.assert_array_equal(hp.gamma_values, np.float32([0.9] * 4))  # constant: gamma
    phased = hparams_of(cfg.replace(schedule={"gamma_schedule": "0.99:0.5,0.9"}))
    np.testing.assert_allclose(phased.gamma_values, [0.99, 0.9, 0.9, 0.9], rtol=1e-6)
    np.testing.assert_array_equal(phased.gamma_until, np.float32([0.5, np.inf, np.inf, np.inf]))


def test_a_new_sweepable_field_is_one_declaration():
    """A config class's `knob(sweep=True)` field is traced as a leaf of its own name."""
    import dataclasses

    from jaxrl_fast.config.fields import Traced, knob, traced

    @dataclasses.dataclass(frozen=True)
    class Toy:
        rate: float = knob(0.5, sweep=True)
        steps: int = knob(3, sweep=True)
        name: str = knob("a", sweep=Traced(("name_kind",), lambda v, s: (np.int32(len(v)),)))
        shape: int = 4  # not sweepable: not traced

    specs = traced(Toy, "toy.")
    assert list(specs) == ["toy.rate", "toy.steps", "toy.name"]
    assert specs["toy.rate"] == (Traced(("rate",)), False)
    assert specs["toy.steps"][1] is True  # an int field: int32
    assert specs["toy.name"][0].encode("abc", {}) == (3,)
