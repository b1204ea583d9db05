"""Every config field as a command-line option: names, meanings, parsing and changes.

The options are generated from the config dataclasses, so a new field is on the command line
with no CLI change: `--dqn.learning-rate 1e-4`, `--env.atari.frame-skip 4`, `--total-env-steps
200000`. A field's meaning is its line in its class's `Attributes:` docstring. The same dotted
names work in `--set dqn.learning_rate=1e-4` and in a JSON file (`--config FILE.json`, a nested
dict of fields, or a run directory's config.json).

  >>> f = {x.name: x for x in fields()}
  >>> f["dqn.learning_rate"].default, f["dqn.learning_rate"].option
  (0.00025, '--dqn.learning-rate')
  >>> parse_value("120,84", f["network.hidden_sizes"]), parse_value("none", f["dqn.max_grad_norm"])
  ((120, 84), None)
  >>> apply(TrainConfig(), {"dqn.gamma": 0.9, "num_seeds": 2}).dqn.gamma
  0.9
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import os
import re
import typing
from typing import Any, NamedTuple

from jaxrl_fast.config import TrainConfig, sections


class Field(NamedTuple):
    """One leaf field of `TrainConfig`."""

    name: str  # dotted: "dqn.learning_rate"
    type: Any  # the annotation, resolved: int, float | None, tuple[int, ...], ...
    default: Any  # the dataclass default
    doc: str  # its line in the class's Attributes docstring

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")


def _docs(cls: type) -> dict[str, str]:
    """`name -> text` from the `Attributes:` section of `cls`'s docstring (names listed
    together, "a, b: text", share the text)."""
    doc = cls.__doc__ or ""
    if "Attributes:" not in doc:
        return {}
    out: dict[str, str] = {}
    current: list[str] = []
    for line in doc.split("Attributes:", 1)[1].splitlines():
        m = re.match(r"^ {6}([a-z_][a-z_0-9]*(?:, [a-z_][a-z_0-9]*)*): (.*)$", line)
        if m:
            current = [n.strip() for n in m.group(1).split(",")]
            for n in current:
                out[n] = m.group(2).strip()
        elif line.startswith(" " * 8) and current:
            for n in current:
                out[n] += " " + line.strip()
        elif line.strip():
            current = []
    return out


def fields(cls: type = TrainConfig, prefix: str = "") -> tuple[Field, ...]:
    """Every leaf field of `cls` (nested dataclasses flattened, and the registered algorithm
    sections of `TrainConfig.algo`: `algo.NAME.FIELD`), in declaration order."""
    return _fields(cls, prefix, sections.version())


@functools.cache
def _fields(cls: type, prefix: str, version: int) -> tuple[Field, ...]:
    hints, docs, out = typing.get_type_hints(cls), _docs(cls), []
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if dataclasses.is_dataclass(default):
            out += _fields(type(default), f"{prefix}{f.name}.", version)
        elif getattr(default, "config_mapping", False):  # TrainConfig.algo: its sections
            for name in default:
                out += _fields(sections.section_class(name), f"{prefix}{f.name}.{name}.", version)
        else:
            out.append(Field(prefix + f.name, hints[f.name], default, docs.get(f.name, "")))
    return tuple(out)


def field(name: str) -> Field:
    """The field named `name` (dotted, `_` or `-`); a `ValueError` suggests close names."""
    by_name = {f.name: f for f in fields()}
    key = name.replace("-", "_")
    if key not in by_name:
        close = difflib.get_close_matches(key, by_name, n=3, cutoff=0.8)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ValueError(
            f"{name!r} is not a config field.{hint} `jaxrl-fast train --help` lists them all."
        )
    return by_name[key]


def _allows(tp: Any, kind: type) -> bool:
    args = typing.get_args(tp)
    return tp is kind or typing.get_origin(tp) is kind or kind in args


def parse_value(text: str, f: Field) -> Any:
    """Parse command-line `text` for field `f`: None/null (where the field may be None),
    true/false, ints (100_000), floats (1e-4), tuples ("120,84", "[120, 84]", "()"), else text.
    The config's own checks then judge the value."""
    t, low = text.strip(), text.strip().lower()
    if low in ("none", "null") and _allows(f.type, type(None)):
        return None
    if _allows(f.type, bool):
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
    if _allows(f.type, tuple):
        inner = t.strip("[]()").strip()
        try:
            return tuple(int(x) for x in inner.split(",") if x.strip()) if inner else ()
        except ValueError:
            raise ValueError(
                f"{f.name}={text!r} is not allowed; expected comma-separated ints, e.g. 120,84 "
                "(or () for none)."
            ) from None
    if _allows(f.type, int):
        try:
            return int(t)
        except ValueError:
            pass
    if _allows(f.type, float):
        try:
            return float(t)
        except ValueError:
            pass
    return text


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    """`{"a.b": 1}` -> `{"a": {"b": 1}}`."""
    out: dict[str, Any] = {}
    for name, value in flat.items():
        *parts, last = name.split(".")
        d = out
        for p in parts:
            d = d.setdefault(p, {})
        d[last] = value
    return out


def _nested(assignments: dict[str, Any]) -> dict[str, Any]:
    return _nest({field(name).name: value for name, value in assignments.items()})


# Fields that moved, old dotted name -> new: a config written before (a run directory's
# config.json, a --config file) still loads and resumes.
RENAMED = {
    "dqn.munchausen_alpha": "algo.munchausen.alpha",
    "dqn.munchausen_tau": "algo.munchausen.tau",
    "dqn.munchausen_l0": "algo.munchausen.l0",
    "dqn.td_lambda": "algo.rollout.td_lambda",
    "num_minibatches": "algo.rollout.num_minibatches",
    "network.num_atoms": "algo.distributional.num_atoms",
    "network.v_min": "algo.distributional.v_min",
    "network.v_max": "algo.distributional.v_max",
    "network.num_quantiles": "algo.distributional.num_quantiles",
    "network.hl_sigma": "algo.distributional.hl_sigma",
    "network.iqn_samples": "algo.iqn.samples",
    "network.iqn_embedding": "algo.iqn.embedding",
    "network.noisy_sigma0": "algo.noisy.sigma0",
}


def migrate(tree: dict) -> dict:
    """A nested config dict with its `RENAMED` fields under their new names."""
    flat = flatten(tree)
    if not any(name in RENAMED for name in flat):
        return tree
    return _nest({RENAMED.get(name, name): value for name, value in flat.items()})


def flatten(tree: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def apply(config: TrainConfig, assignments: dict[str, Any]) -> TrainConfig:
    """`config` with the dotted-name `assignments` (values already parsed; JSON lists become
    tuples where the field is a tuple)."""
    fixed = {
        k: tuple(v) if isinstance(v, list) and _allows(field(k).type, tuple) else v
        for k, v in assignments.items()
    }
    return config.replace(**_nested(fixed)) if fixed else config


def parse_set(items: list[str]) -> dict[str, Any]:
    """`["dqn.gamma=0.9", ...]` -> `{"dqn.gamma": 0.9, ...}`, each parsed for its field."""
    out = {}
    for item in items:
        name, eq, text = item.partition("=")
        if not eq:
            raise ValueError(f"--set {item!r}: expected FIELD=VALUE, e.g. dqn.learning_rate=1e-4")
        out[field(name.strip()).name] = parse_value(text, field(name.strip()))
    return out


def load_file(path: str | os.PathLike) -> dict[str, Any]:
    """Dotted-name assignments from a JSON file: a nested dict of config fields (any subset),
    or a run directory's config.json (`{"config": {...}, "versions": ...}`)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as err:
        raise ValueError(f"--config {os.fspath(path)!r}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"--config {os.fspath(path)!r}: not JSON ({err})") from None
    if isinstance(data, dict) and isinstance(data.get("config"), dict):
        data = data["config"]
    if not isinstance(data, dict):
        raise ValueError(f"--config {os.fspath(path)!r}: expected a JSON object of config fields")
    flat = flatten(migrate(data))
    for name in flat:
        field(name)  # unknown names fail here, naming the field
    return flat


def from_dict(data: dict[str, Any]) -> TrainConfig:
    """A `TrainConfig` from nested JSON-ready data (`TrainConfig.to_dict()`, or any subset of
    it over the defaults)."""
    return apply(TrainConfig(), flatten(migrate(data)))


def differences(a: TrainConfig, b: TrainConfig) -> list[str]:
    """Dotted names of the fields where two configs differ."""
    fa, fb = flatten(a.to_dict()), flatten(b.to_dict())
    return [name for name in fa if fa[name] != fb.get(name)]


def help_text(f: Field) -> str:
    """`--help` text of a field: its meaning and its dataclass default (a preset may set
    another)."""
    doc = f.doc.replace("%", "%%")
    return f"{doc} (default {f.default!r})"


def metavar(f: Field) -> str:
    if _allows(f.type, bool):
        return "BOOL"
    if _allows(f.type, tuple):
        return "INTS"
    names = [
        a.__name__.upper() for a in typing.get_args(f.type) or (f.type,) if a is not type(None)
    ]
    return "|".join(names) + ("|none" if _allows(f.type, type(None)) else "")
