"""An algorithm's own config section (`config.sections`, `TrainConfig.algo`): made from dicts,
replaced, refused with the field named, written to JSON and read back, renamed fields of
configs written before, and the registration's refusals."""

from __future__ import annotations

import dataclasses
import json

import pytest

from jaxrl_fast.config import AlgoConfig, TrainConfig, options, register_section, sections
from jaxrl_fast.config.fields import knob


def test_no_test_or_guide_module_registers_into_the_test_process():
    """The toy algorithm (tests/loop/toy_algorithm.py) and the guide's (docs/own-algorithm.md)
    register only in their own processes: here, only the library's sections exist."""
    library = {"distributional", "iqn", "munchausen", "noisy", "rollout"}
    assert set(sections.section_names()) == library


def test_the_library_section_reads_its_defaults_and_takes_dicts():
    cfg = TrainConfig()
    assert cfg.algo.munchausen.alpha == 0.9 and cfg.algo["munchausen"].tau == 0.03
    assert "munchausen" in cfg.algo and list(cfg.algo) == list(sections.section_names())
    made = TrainConfig(algo={"munchausen": {"alpha": 0.5}})
    replaced = cfg.replace(algo={"munchausen": {"alpha": 0.5}})
    assert made == replaced and hash(made) == hash(replaced)
    assert made.algo.munchausen.alpha == 0.5 and made.algo.munchausen.tau == 0.03
    assert made != cfg and options.differences(cfg, made) == ["algo.munchausen.alpha"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.algo.munchausen = None


def test_json_round_trip_and_the_command_line_names():
    cfg = TrainConfig(algo={"munchausen": {"tau": 0.1}})
    data = json.loads(json.dumps(cfg.to_dict()))
    assert data["algo"]["munchausen"] == {"alpha": 0.9, "tau": 0.1, "l0": -1.0}
    assert options.from_dict(data) == cfg
    f = options.field("algo.munchausen.l0")
    assert f.option == "--algo.munchausen.l0" and f.default == -1.0 and "clip" in f.doc
    assert options.apply(TrainConfig(), {"algo.munchausen.l0": -0.5}).algo.munchausen.l0 == -0.5


def test_a_config_written_before_a_field_moved_still_loads():
    old = TrainConfig().to_dict()
    del old["algo"]
    old["dqn"]["munchausen_alpha"] = 0.25  # where the knob lived before its section existed
    cfg = options.from_dict(old)
    assert cfg.algo.munchausen.alpha == 0.25


def test_unknown_sections_and_fields_are_refused_by_name():
    with pytest.raises(ValueError, match="no section 'munchhausen'. Did you mean 'munchausen'"):
        TrainConfig(algo={"munchhausen": {"alpha": 0.5}})
    with pytest.raises(TypeError, match="no field 'alfa'. Did you mean 'alpha'"):
        TrainConfig().replace(algo={"munchausen": {"alfa": 0.5}})
    with pytest.raises(AttributeError, match="Registered sections"):
        TrainConfig().algo.nothing  # noqa: B018
    with pytest.raises(ValueError, match="TrainConfig.algo.munchausen=3 is not allowed"):
        AlgoConfig({"munchausen": 3})


@dataclasses.dataclass(frozen=True)
class _Loose:
    x: float = 1.0


def test_registration_refusals():
    with pytest.raises(ValueError, match="lower-case identifier"):
        register_section("Bad-Name", _Loose)
    with pytest.raises(ValueError, match="expected a dataclass"):
        register_section("plain", dict)
    with pytest.raises(ValueError, match="already registered to another class"):
        register_section("munchausen", _Loose)

    @dataclasses.dataclass
    class Mutable:
        x: float = 1.0

    with pytest.raises(ValueError, match="must be frozen"):
        register_section("mutable", Mutable)

    @dataclasses.dataclass(frozen=True)
    class NoDefault:
        x: float

    with pytest.raises(ValueError, match="needs a default"):
        register_section("nodefault", NoDefault)

    @dataclasses.dataclass(frozen=True)
    class Aliased:
        x: float = knob(1.0, alias="--x")

    with pytest.raises(ValueError, match="no short alias"):
        register_section("aliased", Aliased)
    assert set(sections.section_names()) >= {"munchausen"}
    assert not {"plain", "mutable", "nodefault", "aliased"} & set(sections.section_names())
