"""How a config field is declared: its default and, beside it, its facts.

    learning_rate: float = knob(2.5e-4, sweep=True, resume=True)

A field's facts are declared once, in its `knob(...)`:

  - `sweep`: traced (a value of `HParams`, `jaxrl_fast.config.hparams`): a sweep may vary it
    and seeds with other values share one compiled program (`SWEEPABLE` is derived from these).
    `True` makes the field one `HParams` leaf of its own name (float32; int32 for an `int` field); a
    `Traced(leaves, encode)` says which leaves it sets and how (a schedule's name as an index,
    `None` as `inf`); `HParams` is derived from these;
  - `resume`: a resumed run may change it with `force_config` (it changes no shape, no optimiser
    state and no chunking; `RESUME_OVERRIDABLE` is derived from these);
  - `alias`: a short command-line option besides the field's own `--part.field`.

Its help line is its line in the class's `Attributes:` docstring, its check is in the class's
`__post_init__` (through `require`), both beside it. `declared(flag)` lists the dotted names of
a config class's fields that declare `flag`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, NamedTuple

_FACTS = ("sweep", "resume", "alias")


class Traced(NamedTuple):
    """How a sweepable field enters `HParams` when it is not one float32 leaf of its own name.

    Attributes:
      leaves: the `HParams` leaves it sets, in order; empty when another field's `encode`
        reads it (e.g. `DQNConfig.gamma`, the first phase of `ScheduleConfig.gamma_schedule`).
      encode: `(value, sections) -> values of leaves` (numpy scalars or arrays), `sections`
        mapping each config section's name ("dqn", "schedule", ...) to its config.
    """

    leaves: tuple[str, ...]
    encode: Callable[[Any, Any], tuple] | None = None


def knob(
    default: Any = dataclasses.MISSING,
    *,
    factory: Any = dataclasses.MISSING,
    sweep: bool | Traced = False,
    resume: bool = False,
    alias: str | None = None,
) -> Any:
    """A dataclass field with its declared facts (module docstring)."""
    metadata = {"sweep": sweep, "resume": resume, "alias": alias}
    return dataclasses.field(default=default, default_factory=factory, metadata=metadata)


def declared(cls: type, flag: str, prefix: str = "") -> tuple[str, ...]:
    """Dotted names of the fields of config class `cls` (and of its part configs) whose `knob`
    declares `flag` (a true value), in field order."""
    if flag not in _FACTS:
        raise ValueError(f"declared: flag {flag!r} is not one of {_FACTS}")
    out: list[str] = []
    for f in dataclasses.fields(cls):
        part = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        if isinstance(part, type) and dataclasses.is_dataclass(part):
            out += declared(part, flag, f"{prefix}{f.name}.")
        elif f.metadata.get(flag):
            out.append(f"{prefix}{f.name}")
    return tuple(out)


def traced(cls: type, prefix: str = "") -> dict[str, tuple[Traced, bool]]:
    """`{dotted name: (Traced, is_int)}` of every sweepable field, in field order; a field
    declared `sweep=True` gets `Traced((its name,))` with no `encode` (its value as a float32,
    or an int32 when `is_int`)."""
    out: dict[str, tuple[Traced, bool]] = {}
    for f in dataclasses.fields(cls):
        part = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        if isinstance(part, type) and dataclasses.is_dataclass(part):
            out.update(traced(part, f"{prefix}{f.name}."))
        elif f.metadata.get("sweep"):
            spec = f.metadata["sweep"]
            spec = Traced((f.name,)) if spec is True else spec
            out[f"{prefix}{f.name}"] = (spec, f.type in ("int", int))
    return out


def aliases(cls: type, prefix: str = "") -> dict[str, str]:
    """`{dotted field name: its short option}` of the fields that declare an `alias`."""
    out: dict[str, str] = {}
    for f in dataclasses.fields(cls):
        part = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        if isinstance(part, type) and dataclasses.is_dataclass(part):
            out.update(aliases(part, f"{prefix}{f.name}."))
        elif f.metadata.get("alias"):
            out[f"{prefix}{f.name}"] = f.metadata["alias"]
    return out


def require(cfg: object, name: str, ok: bool, allowed: str) -> None:
    """Raise a uniform `ValueError` for field `name` of `cfg` unless `ok`."""
    if not ok:
        raise ValueError(
            f"{type(cfg).__name__}.{name}={getattr(cfg, name)!r} is not allowed; "
            f"expected {allowed}."
        )


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def config_class(cls: type) -> type:
    """Make a config dataclass's constructor take dicts for its part configs (as `replace`
    does: `TrainConfig(dqn={"gamma": 0.9})`, `EnvConfig(atari={...})`) and name an unknown
    field with the nearest known one, in the constructor and in `replace_fields` alike."""
    import difflib
    import functools

    init = cls.__init__
    names = [f.name for f in dataclasses.fields(cls)]
    parts = {
        f.name: f.default_factory
        for f in dataclasses.fields(cls)
        if isinstance(f.default_factory, type) and dataclasses.is_dataclass(f.default_factory)
    }
    mappings = {  # a mapping of sections (`TrainConfig.algo`): built from a dict of sections
        f.name: f.default_factory
        for f in dataclasses.fields(cls)
        if getattr(f.default_factory, "config_mapping", False)
    }

    @functools.wraps(init)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        for key in kwargs:
            if key not in names:
                close = difflib.get_close_matches(key, names, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise TypeError(
                    f"{cls.__name__} has no field {key!r}.{hint} Its fields: {', '.join(names)}."
                )
        for name, part in parts.items():
            if isinstance(kwargs.get(name), dict):
                kwargs[name] = replace_fields(part(), kwargs[name])
        for name, mapping in mappings.items():
            if isinstance(kwargs.get(name), dict):
                kwargs[name] = mapping(kwargs[name])
        init(self, *args, **kwargs)

    cls.__init__ = __init__
    return cls


def replace_fields(obj: Any, changes: dict[str, Any]) -> Any:
    """`dataclasses.replace`, where a dict given for a part config changes that part's fields
    (recursively); an unknown name is a `TypeError` naming the nearest known field."""
    parts = {}
    for name, value in changes.items():
        current = getattr(obj, name, None)
        if isinstance(value, dict) and dataclasses.is_dataclass(current):
            value = replace_fields(current, value)
        elif isinstance(value, dict) and getattr(current, "config_mapping", False):
            value = current.replace(value)
        parts[name] = value
    return dataclasses.replace(obj, **parts)
