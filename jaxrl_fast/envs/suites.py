"""JAX env suites beyond gymnax, each an optional extra, behind the one `Env` interface.

An env of a suite is named "suite:EnvName" ("craftax:Craftax-Classic-Symbolic-v1",
"navix:Navix-Empty-5x5-v0", "xminigrid:MiniGrid-Empty-8x8", "pgx:minatar-breakout",
"jumanji:Snake-v1", "brax:reacher" with `EnvConfig.discretise`), on the
command line (`--env pgx:minatar-breakout`) as in `EnvConfig.name`. A suite is a module that
defines a `Suite`: its prefix, the pip extra that installs it, its env names (a fixed list, which
a test checks against the suite's own registry, so that a bad name is refused at once, installed
or not) and `build(name, num_envs) -> Env`. `make_env` looks the prefix up here and names no
suite; `register_suite` adds one's own.

Every adapter ends in `envs.base.make_batched_env`: the suite's own reset and step of one env,
without its auto-reset, with terminated and truncated kept apart. So auto-reset, episode
statistics, replay, PQN, evaluation, sweeps and resume treat every suite alike.

    >>> [s.prefix for s in suites()][:6]  # the library's; then any registered since
    ['craftax', 'navix', 'xminigrid', 'pgx', 'jumanji', 'brax']
    >>> find("pgx:minatar-breakout")[1]
    'minatar-breakout'
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util

from jaxrl_fast.envs.base import Env, Suite

_SUITES: dict[str, Suite] = {}


def register_suite(suite: Suite, *, overwrite: bool = False) -> Suite:
    """Make `suite.prefix + ":<name>"` env names (for each of `suite.names`) build through
    `suite.build`; returns `suite`.

    Raises:
      ValueError: a prefix that is empty, has a ":", is taken by another suite (pass
        `overwrite=True` to replace it) or by a built-in prefix ("envpool", "gymnax", "user"),
        or a suite without names.
    """
    if not suite.prefix or ":" in suite.prefix or suite.prefix in ("envpool", "gymnax", "user"):
        raise ValueError(
            f"register_suite: prefix={suite.prefix!r} is not allowed; expected a non-empty "
            "name without ':' other than 'envpool', 'gymnax' and 'user'."
        )
    if suite.prefix in _SUITES and _SUITES[suite.prefix] is not suite and not overwrite:
        raise ValueError(
            f"register_suite: {suite.prefix!r} is registered already; pass overwrite=True."
        )
    if not suite.names:
        raise ValueError(f"register_suite: suite {suite.prefix!r} has no env names.")
    _SUITES[suite.prefix] = suite
    return suite


def unregister_suite(prefix: str) -> None:
    """Forget the suite of `prefix` (no error if there is none)."""
    _SUITES.pop(prefix, None)


def suites() -> tuple[Suite, ...]:
    """The registered suites, in registration order."""
    return tuple(_SUITES.values())


def find(name: str) -> tuple[Suite, str] | None:
    """`(suite, env name without the prefix)` for "suite:EnvName" of a registered suite; None
    for any other name (gymnax ids, "envpool:", import paths)."""
    prefix, sep, rest = name.partition(":")
    if not sep or prefix not in _SUITES:
        return None
    return _SUITES[prefix], rest


def installed(suite: Suite) -> bool:
    """Whether the suite's package is installed (found without importing it)."""
    return importlib.util.find_spec(suite.package) is not None


def make_suite_env(
    suite: Suite, name: str, num_envs: int, *, discretise: int | None = None, file: str = ""
) -> Env:
    """Build `num_envs` envs of `suite`'s env `name` (without the prefix); a continuous suite's
    with `discretise` values per action dimension; `file` a data file its envs read
    (`Suite.file`, `EnvConfig.suite_file`).

    Raises:
      ValueError: `name` is not one of the suite's envs (the message lists them),
        `discretise` given for a discrete-action suite, or `file` for a suite that reads none.
      ImportError: the suite's extra is not installed (the message names the install command).
    """
    full = f"{suite.prefix}:{name}"
    if discretise is not None and not suite.continuous:
        raise ValueError(
            f"EnvConfig.discretise={discretise!r} is for continuous-action envs; {full} has "
            "discrete actions. Leave discretise unset (None)."
        )
    if name not in suite.names:
        close = difflib.get_close_matches(name, suite.names, n=3)
        hint = f" Did you mean {', '.join(repr(f'{suite.prefix}:{c}') for c in close)}?"
        raise ValueError(
            f"EnvConfig.name={full!r} is not a {suite.prefix} env.{hint if close else ''} "
            f"Valid names: {', '.join(f'{suite.prefix}:{n}' for n in suite.names)}."
        )
    if file and not suite.file:
        raise ValueError(
            f"EnvConfig.suite_file={file!r} is for suites whose envs read a data file; {full} "
            "reads none. Leave suite_file empty."
        )
    try:
        importlib.import_module(suite.package)
    except ImportError as err:
        raise ImportError(
            f"EnvConfig.name={full!r} needs the {suite.extra} extra: "
            f"pip install 'jaxrl-fast[{suite.extra}]'"
        ) from err
    options = {"discretise": discretise} if suite.continuous else {}
    if suite.file:
        options["file"] = file
    return suite.build(name, num_envs, **options)


def suite_envs() -> list[str]:
    """Every suite env name ("suite:EnvName"), installed or not."""
    return [f"{s.prefix}:{n}" for s in _SUITES.values() for n in s.names]


def _register_built_in() -> None:
    from jaxrl_fast.envs import (
        brax_env,
        craftax_env,
        jumanji_env,
        navix_env,
        pgx_env,
        xminigrid_env,
    )

    for module in (craftax_env, navix_env, xminigrid_env, pgx_env, jumanji_env, brax_env):
        register_suite(module.SUITE)


_register_built_in()
