"""How a config field is declared: its default and, beside it, its facts.

    learning_rate: float = knob(2.5e-4, sweep=True, resume=True)

A field's facts are declared once, in its `knob(...)`:

  - `sweep`: traced (a value of `HParams`, `jaxrl_fast.hparams`): a sweep may vary it and seeds
    with other values share one compiled program (`SWEEPABLE` is derived from these);
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
from typing import Any

_FACTS = ("sweep", "resume", "alias")


def knob(
    default: Any = dataclasses.MISSING,
    *,
    factory: Any = dataclasses.MISSING,
    sweep: bool = False,
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
