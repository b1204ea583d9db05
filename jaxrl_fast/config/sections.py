"""An algorithm's own config section, declared beside its code: `TrainConfig.algo`.

A loss, head, learner or extension whose knobs belong to it alone declares them in one frozen
dataclass in its own module, with `knob(...)` as every config field, and registers it under a
name; the section is then `config.algo.NAME`, `--algo.NAME.FIELD` on the command line, a key of
config.json, sweepable and resume-overridable as its knobs declare, with no other file changed:

    @config_class
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class MunchausenConfig:
        \"\"\"Attributes:
          alpha: the Munchausen term's weight.
        \"\"\"
        alpha: float = knob(0.9, sweep=True, resume=True)

    register_section("munchausen", MunchausenConfig)

    config = TrainConfig(algo={"munchausen": {"alpha": 0.5}})
    config.algo.munchausen.alpha                      # 0.5

A sweepable knob (`sweep=True`) is one leaf of `HParams.algo[NAME][FIELD]` (float32; int32 for an
`int` field), so a sweep over it compiles once; the part reads it from the seed's `HParams`
(a loss through `Loss.settings`). Sections registered after a config was made read as their
defaults in it. The library's own sections register when `jaxrl_fast` is imported.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Iterator, Mapping, Sequence

from jaxrl_fast.config.fields import Traced, replace_fields

__all__ = [
    "AlgoConfig",
    "Declared",
    "aliases",
    "declared",
    "register_section",
    "section_class",
    "section_names",
    "traced_knobs",
    "version",
]

_SECTIONS: dict[str, type] = {}
_VERSION = [0]  # bumped by each registration: what derives from the sections recomputes


def register_section(name: str, cls: type) -> None:
    """Make `cls` the config section `TrainConfig.algo.<name>` in this process.

    Raises:
      ValueError: `name` is not a lower-case identifier, or is taken by another class; `cls` is
        not a frozen dataclass whose fields all have defaults, or declares a `Traced` knob
        (a section's sweepable knobs are plain leaves).
    """
    if not isinstance(name, str) or not name.isidentifier() or name != name.lower():
        raise ValueError(f"register_section: name {name!r} is not a lower-case identifier.")
    if not (dataclasses.is_dataclass(cls) and isinstance(cls, type)):
        raise ValueError(f"register_section({name!r}, ...): expected a dataclass, got {cls!r}.")
    if not cls.__dataclass_params__.frozen:
        raise ValueError(f"register_section({name!r}, ...): {cls.__name__} must be frozen.")
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(f"{cls.__name__}.{f.name} needs a default (a section is optional).")
        if isinstance(f.metadata.get("sweep"), Traced):
            raise ValueError(
                f"{cls.__name__}.{f.name}: a section's sweepable knob is declared sweep=True."
            )
        if f.metadata.get("alias"):
            raise ValueError(
                f"{cls.__name__}.{f.name}: a section's knob has no short alias; its option is "
                f"--algo.{name}.{f.name.replace('_', '-')}."
            )
    if _SECTIONS.get(name, cls) is not cls:
        raise ValueError(f"config section {name!r} is already registered to another class.")
    if name not in _SECTIONS:
        _SECTIONS[name] = cls
        _VERSION[0] += 1


def section_names() -> tuple[str, ...]:
    """The registered sections, in registration order."""
    return tuple(_SECTIONS)


def section_class(name: str) -> type:
    """The class of section `name`.

    Raises:
      ValueError: an unknown section (the message lists the known ones, and a close one).
    """
    if name not in _SECTIONS:
        close = difflib.get_close_matches(name, list(_SECTIONS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"TrainConfig.algo has no section {name!r}.{hint} Registered sections: "
            f"{', '.join(_SECTIONS) or 'none'} (a part's module registers its own: "
            "jaxrl_fast.config.sections.register_section)."
        )
    return _SECTIONS[name]


def version() -> int:
    """How many sections have been registered: a cache of derived facts keys on it."""
    return _VERSION[0]


class AlgoConfig(Mapping):
    """`TrainConfig.algo`: every registered section's config, by name (frozen).

    `algo.NAME` (or `algo["NAME"]`) is the section's config; a section the config was made
    without (registered later) reads as its defaults. `AlgoConfig({"NAME": {...}})` and
    `replace({"NAME": {...}})` take a dict of field changes per section, as `TrainConfig` takes
    them for its parts.
    """

    __slots__ = ("_values",)
    config_mapping = True  # `config_class` and `replace_fields` build it from dicts

    def __init__(self, sections: Mapping[str, Any] | None = None) -> None:
        values: dict[str, Any] = {}
        for name, value in (sections or {}).items():
            cls = section_class(name)
            if isinstance(value, dict):
                value = replace_fields(cls(), value)
            if not isinstance(value, cls):
                raise ValueError(
                    f"TrainConfig.algo.{name}={value!r} is not allowed; expected a "
                    f"{cls.__name__} or a dict of its fields."
                )
            values[name] = value
        object.__setattr__(self, "_values", values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except ValueError as err:
            raise AttributeError(str(err)) from None

    def __getitem__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        return values[name] if name in values else section_class(name)()

    def __iter__(self) -> Iterator[str]:
        return iter(section_names())

    def __len__(self) -> int:
        return len(section_names())

    def replace(self, changes: Mapping[str, Any]) -> AlgoConfig:
        """A copy with `changes`: `{section: {field: value}}` or `{section: config}`."""
        out = dict(object.__getattribute__(self, "_values"))
        for name, value in changes.items():
            if isinstance(value, dict):
                value = replace_fields(self[name], value)
            out[name] = value
        return AlgoConfig(out)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Every registered section's fields, as plain JSON-ready data."""
        return {name: dataclasses.asdict(self[name]) for name in self}

    def _key(self) -> tuple:
        return tuple((name, self[name]) for name in self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AlgoConfig) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={self[name]!r}" for name in self)
        return f"AlgoConfig({inner})"

    def __reduce__(self):
        return AlgoConfig, (dict(object.__getattribute__(self, "_values")),)

    def __deepcopy__(self, memo: dict) -> AlgoConfig:
        return self  # frozen, of frozen sections


def declared(flag: str) -> tuple[str, ...]:
    """Dotted names (`algo.NAME.FIELD`) of the registered sections' fields whose `knob`
    declares `flag` ("sweep", "resume" or "alias"), in registration and field order."""
    return tuple(
        f"algo.{name}.{f.name}"
        for name, cls in _SECTIONS.items()
        for f in dataclasses.fields(cls)
        if f.metadata.get(flag)
    )


def aliases() -> dict[str, str]:
    """`{dotted name: short option}` of the sections' fields that declare an `alias`."""
    return {
        f"algo.{name}.{f.name}": f.metadata["alias"]
        for name, cls in _SECTIONS.items()
        for f in dataclasses.fields(cls)
        if f.metadata.get("alias")
    }


def traced_knobs() -> dict[str, dict[str, bool]]:
    """`{section: {field: is_int}}` of the sections' sweepable fields: `HParams.algo`'s leaves."""
    out: dict[str, dict[str, bool]] = {}
    for name, cls in _SECTIONS.items():
        knobs = {
            f.name: f.type in ("int", int)
            for f in dataclasses.fields(cls)
            if f.metadata.get("sweep")
        }
        if knobs:
            out[name] = knobs
    return out


class Declared(Sequence):
    """A live tuple of dotted field names: `static` (TrainConfig's own declarations) and the
    registered sections' fields that declare `flag`, as they stand when it is read."""

    def __init__(self, static: tuple[str, ...], flag: str) -> None:
        self._static, self._flag = static, flag

    def _names(self) -> tuple[str, ...]:
        return self._static + declared(self._flag)

    def __getitem__(self, i):  # type: ignore[override]
        return self._names()[i]

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __eq__(self, other: object) -> bool:
        return (
            tuple(self) == tuple(other) if isinstance(other, (tuple, Declared)) else NotImplemented
        )

    def __hash__(self) -> int:
        return hash(self._names())

    def __repr__(self) -> str:
        return repr(self._names())
