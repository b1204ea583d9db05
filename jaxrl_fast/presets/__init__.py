"""Named `TrainConfig` presets: `presets.get(name)`, `presets.names()`.

A module per family, each with its presets' settings and measured results in its docstring:

* `presets.classic`: `cartpole` (the default), `cartpole-cleanrl`, `acrobot`, `catch`,
  `pendulum-discrete`, `reacher-81`, `mountaincar-shaped`, `mountaincar-curriculum`,
  `cartpole-poles`, `memorychain-lstm`, `cartpole-hidden-lstm`, `article-recipe`
  (`article_recipe(config)` applies the seed article's recipe to any preset).
* `presets.minatar`: `minatar-breakout`, `minatar-space-invaders`, `minatar-freeway`.
* `presets.atari` (the `atari` extra): `atari-pong`, `atari-breakout`.
* `presets.dqn_family`: `c51-minatar`, `qr-dqn-minatar`, `iqn-minatar`,
  `m-dqn-minatar`, `hl-gauss-minatar`, `noisy-minatar` (an algorithm's parts on
  `minatar-breakout`), `rainbow-minatar` ("Revisiting Rainbow"'s MinAtar settings), and
  `c51-atari-pong`, `qr-dqn-atari-pong`, `iqn-atari-pong`, `m-dqn-atari-pong`,
  `rainbow-atari-pong`, `full-rainbow-atari-pong` (Dopamine's settings on `atari-pong`).
* `presets.pqn`: `pqn-cartpole`, `pqn-minatar-<game>`, `pqn-atari-pong` (purejaxql's).
* `presets.boards`: `connect-four`, `selfplay-connect-four`.

Each gymnax preset was checked to learn with 2 seeds (both seeds' final greedy return well above
a random policy's); its function's comment gives the measured returns and wall time.
`python benchmarks/presets.py` re-measures them all. The Atari presets are measured by
`python benchmarks/atari.py --learn` (`benchmarks/results/atari/atari.md`).
"""

from __future__ import annotations

import difflib
from typing import Callable

from jaxrl_fast.config import TrainConfig
from jaxrl_fast.presets import atari, boards, classic, dqn_family, minatar, pqn
from jaxrl_fast.presets.classic import article_recipe

__all__ = ["DEFAULT", "article_recipe", "get", "names", "register"]

_PRESETS: dict[str, Callable[[], TrainConfig]] = {
    **classic.PRESETS,
    **minatar.PRESETS,
    **atari.PRESETS,
}


def _base(name: str) -> TrainConfig:
    return _PRESETS[name]()


_PRESETS.update(dqn_family.presets(_base), **pqn.presets(_base), **boards.PRESETS)

DEFAULT = "cartpole"


def register(name: str, factory: Callable[[], TrainConfig]) -> None:
    """Make `factory()` the preset `name` in this process (an algorithm's module registers its
    own presets beside its code: `presets.get(name)`, `jaxrl-fast train --preset name`).

    Raises:
      ValueError: `name` is empty or taken by another preset; `factory` is not callable.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"presets.register: name {name!r} is not a non-empty string.")
    if not callable(factory):
        raise ValueError(f"presets.register({name!r}, ...): expected a function, got {factory!r}.")
    if _PRESETS.get(name, factory) is not factory:
        raise ValueError(f"preset {name!r} is already registered to another function.")
    _PRESETS[name] = factory


def names() -> list[str]:
    """Return the preset names."""
    return sorted(_PRESETS)


def get(name: str = DEFAULT) -> TrainConfig:
    """Return the named preset.

    Raises:
      ValueError: unknown name, with a did-you-mean suggestion and the valid names.

    Examples:
      >>> get("cartpole-cleanrl").replay.batch_size
      128
    """
    if name not in _PRESETS:
        close = difflib.get_close_matches(name, list(_PRESETS), n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"unknown preset {name!r}.{hint} Valid presets: {', '.join(names())}.")
    return _PRESETS[name]()
