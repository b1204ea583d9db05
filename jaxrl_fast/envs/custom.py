"""Your own environments: any gymnax `Environment` trains wherever an env name does.

Three ways in, all ending in a name that `make_env` resolves (so the evaluation, sweeps, resume
and the CLI rebuild the same env from the config, with no other plumbing):

- `register("my-chain", factory)`: `factory()` returns a gymnax `Environment`, or an
  `(Environment, EnvParams)` pair; "my-chain" is then an env name like "CartPole-v1".
- An import path "package.module:attr" as the name (`--env my_envs:make_chain` on the command
  line): `attr` is such a factory (a function or an `Environment` class, called without
  arguments) or an `Environment` instance. Importing runs the module's code, as `python -m` does.
- `train(config, env=MyEnv())` (or `env=(MyEnv(), params)`): the instance is registered as
  "user:<its name>" (`register_instance`) and the run's config names it (`resolve.bind_env`);
  a run resumed in another process is given the same env again.

    >>> import jax
    >>> from gymnax.environments.classic_control.cartpole import CartPole
    >>> register("my-cartpole", CartPole)
    >>> from jaxrl_fast.envs import make_env
    >>> make_env("my-cartpole", num_envs=3).spec.num_actions
    2
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Callable

from jaxrl_fast.envs.gymnax_env import CONTINUOUS_ENVS, DISCRETE_ENVS
from jaxrl_fast.envs.probe import PROBE_ENVS

USER_PREFIX = "user:"  # names of env instances given to `train(env=...)`
_BUILT_IN_PREFIXES = ("envpool:", "gymnax:", USER_PREFIX)
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_REGISTRY: dict[str, Callable[[], Any]] = {}


def built_in_envs() -> tuple[str, ...]:
    """The env names that the library defines (the gymnax ids it adapts and the probes),
    installed or not; a registered name may not be one of them."""
    return DISCRETE_ENVS + CONTINUOUS_ENVS + tuple(PROBE_ENVS)


def register(name: str, factory: Callable[[], Any], *, overwrite: bool = False) -> None:
    """Make `name` an env name: `make_env(name)` (and every config naming it) builds
    `factory()`, a gymnax `Environment` or an `(Environment, EnvParams)` pair.

    Raises:
      ValueError: `name` is empty, has a ":", is a built-in env name, or is registered to
        another factory already (pass `overwrite=True` to replace it).
      TypeError: `factory` is not callable.
    """
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(
            f"envs.register: name={name!r} is not allowed; expected a non-empty str without ':' "
            "(names with ':' are import paths, 'envpool:' or 'gymnax:' ids)."
        )
    if name in built_in_envs():
        raise ValueError(f"envs.register: {name!r} is a built-in env name; choose another name.")
    if not callable(factory):
        raise TypeError(f"envs.register({name!r}, factory): factory must be callable")
    if name in _REGISTRY and _REGISTRY[name] is not factory and not overwrite:
        raise ValueError(
            f"envs.register: {name!r} is registered already; pass overwrite=True to replace it."
        )
    _REGISTRY[name] = factory


def unregister(name: str) -> None:
    """Forget a registered name (no error if it is not registered)."""
    _REGISTRY.pop(name, None)


def registered_envs() -> list[str]:
    """The names registered in this process (`register`, `train(env=...)`)."""
    return sorted(_REGISTRY)


def is_gymnax_env(obj: Any) -> bool:
    """Whether `obj` is a gymnax `Environment` (by its interface), or an `(env, params)` pair."""
    if isinstance(obj, tuple) and len(obj) == 2:
        obj = obj[0]
    return all(hasattr(obj, a) for a in ("reset_env", "step_env", "action_space", "default_params"))


def lookup(name: str) -> tuple[Any, Any] | None:
    """`(env, params)` for a registered name or an import path; None for any other name.

    Raises:
      ValueError: an import path whose module or attribute is missing, a factory that does not
        return a gymnax env, or a "user:" name not given in this process.
    """
    if name in _REGISTRY:
        return _env_and_params(_REGISTRY[name](), name)
    if name.startswith(USER_PREFIX):
        raise ValueError(
            f"EnvConfig.name={name!r} names an env instance given to train(env=...) in another "
            "process; pass the same env again (train(config, env=..., resume=True)), or register "
            "it with jaxrl_fast.envs.register and name it."
        )
    if name.startswith(_BUILT_IN_PREFIXES) or not _IMPORT_PATH.match(name):
        return None
    module_name, attr = name.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(
            f"EnvConfig.name={name!r}: cannot import {module_name!r} ({e}); the module must be "
            "importable (on PYTHONPATH or in the current directory)."
        ) from e
    if not hasattr(module, attr):
        raise ValueError(f"EnvConfig.name={name!r}: module {module_name!r} has no {attr!r}.")
    made = getattr(module, attr)
    return _env_and_params(
        made if is_gymnax_env(made) and not isinstance(made, type) else made(), name
    )


def _env_and_params(made: Any, name: str) -> tuple[Any, Any]:
    if isinstance(made, tuple) and len(made) == 2 and is_gymnax_env(made[0]):
        return made
    if is_gymnax_env(made) and not isinstance(made, type):
        return made, made.default_params
    raise ValueError(
        f"EnvConfig.name={name!r}: its factory returned a {type(made).__name__}; expected a "
        "gymnax Environment or an (Environment, EnvParams) pair."
    )


def register_instance(env: Any) -> str:
    """Register a gymnax env instance (or `(env, params)` pair) given to `train(env=...)` under
    "user:<its name>" (the latest instance given under a name wins) and return the name.

    Raises:
      TypeError: `env` is not a gymnax env instance or pair.
    """
    if not is_gymnax_env(env) or isinstance(env, type):
        raise TypeError(
            f"train(env=...) takes a gymnax Environment instance, an (Environment, EnvParams) "
            f"pair, a jaxrl_fast Env or a SeededEnv; got {type(env).__name__}."
        )
    instance = env[0] if isinstance(env, tuple) else env
    name = USER_PREFIX + str(getattr(instance, "name", type(instance).__name__))
    _REGISTRY[name] = lambda: env
    return name
