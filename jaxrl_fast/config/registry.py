"""Named parts a config may name, so that a new part is a module, not a branch.

A `Registry` maps names to parts (value heads, losses, ...). Config fields hold the *name*
(configs stay JSON and resumable), the config checks the name against the registry when it is
built (an unknown name is refused before anything compiles, listing the known ones), and the
builder looks the part up. The registries live here, below `config`, so that the config can
check names without importing the layers that define the parts; those layers fill them in, the
library's own parts as built-ins (`register(..., builtin=True)`) when `jaxrl_fast` is imported
(its `__init__` imports every part module before any config is made), so each name is written
once, in its module.
"""

from __future__ import annotations

from typing import Any


class Registry:
    """Names -> parts for one config field.

    Args:
      field: the config field that names a part, e.g. "DQNConfig.loss".
      what: what a part is, in words, e.g. "loss".
      how: where users add one, e.g. "jaxrl_fast.agent.losses.register".
    """

    def __init__(self, field: str, what: str, how: str):
        self.field, self.what, self.how = field, what, how
        self._parts: dict[str, Any] = {}
        self._builtin: list[str] = []

    @property
    def builtin(self) -> tuple[str, ...]:
        """The library's names, in the order their modules registered them."""
        return tuple(self._builtin)

    def register(self, name: str, part: Any, *, builtin: bool = False) -> None:
        """Make `part` available under `name`.

        Raises:
          ValueError: `name` is empty or a built-in's, or is taken by another part.
        """
        if not isinstance(name, str) or not name or (name in self.builtin and not builtin):
            raise ValueError(
                f"{self.what} name {name!r}: expected a non-empty name other than the built-in "
                f"{self.builtin}."
            )
        if self._parts.get(name, part) != part:
            raise ValueError(f"{self.what} {name!r} is already registered to another {self.what}.")
        self._parts[name] = part
        if builtin and name not in self._builtin:
            self._builtin.append(name)

    def names(self) -> list[str]:
        """Every name the field takes in this process: the built-in ones, then the added ones."""
        return list(self.builtin) + sorted(set(self._parts) - set(self.builtin))

    def allowed(self) -> str:
        """The allowed values, for an error message."""
        return f"one of {self.names()} (add one with {self.how})"

    def __contains__(self, name: object) -> bool:
        return name in self._parts

    def find(self, name: str) -> Any:
        """The part registered as `name`, or None (not registered, or not yet)."""
        return self._parts.get(name)

    def get(self, name: str) -> Any:
        """The part registered as `name`.

        Raises:
          ValueError: an unknown name (the message names the field and lists the known ones).
        """
        if name not in self._parts:
            raise ValueError(
                f"{self.field}={name!r} is not a known {self.what}; expected {self.allowed()}."
            )
        return self._parts[name]


HEADS = Registry(
    "NetworkConfig.head",
    "value head",
    "jaxrl_fast.agent.heads.register",
)
LOSSES = Registry(
    "DQNConfig.loss",
    "loss",
    "jaxrl_fast.agent.losses.register",
)
DENSE_LAYERS = Registry(
    "NetworkConfig.dense",
    "dense layer",
    "jaxrl_fast.agent.dense.register",
)
LEARNERS = Registry(
    "TrainConfig.learner",
    "learner",
    "jaxrl_fast.loop.learners.register",
)
