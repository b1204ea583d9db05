"""`make_env(name, num_envs)`: one seed's envs by name (gymnax, probe, `envpool:`, a JAX suite's
"suite:EnvName" (`envs.suites`), one's own registered or imported gymnax env: `envs.custom`), and
the list of names (`list_envs`)."""

from __future__ import annotations

from jaxrl_fast.config import AtariConfig
from jaxrl_fast.envs import custom, suites
from jaxrl_fast.envs.base import Env
from jaxrl_fast.envs.gymnax_env import (
    adapt_gymnax,
    gymnax_continuous_envs,
    gymnax_discrete_envs,
    make_gymnax_env,
)
from jaxrl_fast.envs.probe import PROBE_ENVS, make_probe_env


def list_envs(*, continuous: bool = False) -> list[str]:
    """Return every env name `make_env` accepts: gymnax discrete-action envs, probes, names
    registered in this process (`envs.register`), the "suite:EnvName" envs of the JAX suites
    whose extras are installed (`envs.suites`) and, with the `atari` extra installed,
    "envpool:<Game>-v5" Atari games; with `continuous`, only the gymnax continuous-action envs
    (trained with `EnvConfig.discretise`). Import paths ("package.module:factory") are accepted
    too but not listed."""
    installed = [s for s in suites.suites() if suites.installed(s)]
    if continuous:
        return gymnax_continuous_envs() + [
            f"{s.prefix}:{n}" for s in installed if s.continuous for n in s.names
        ]
    names = gymnax_discrete_envs() + list(PROBE_ENVS) + custom.registered_envs()
    names += [f"{s.prefix}:{n}" for s in installed if not s.continuous for n in s.names]
    try:
        from jaxrl_fast.envs.envpool_env import PREFIX, atari_games

        names += [PREFIX + g for g in atari_games()]
    except ImportError:
        pass  # envpool (the `atari` extra) is not installed: no Atari names to list
    return names


def make_env(
    name: str,
    num_envs: int = 1,
    *,
    atari: AtariConfig | None = None,
    seed: int = 0,
    evaluation: bool = False,
    discretise: int | None = None,
    param_fields: tuple[str, ...] = (),
    observe: tuple[int, ...] = (),
    suite_file: str = "",
) -> Env:
    """Build a batched env by name.

    Args:
      name: a gymnax id ("CartPole-v1", optionally "gymnax:CartPole-v1"), a probe env name, an
        envpool Atari game ("envpool:Pong-v5", the `atari` extra), a JAX suite's env
        ("pgx:minatar-breakout", "craftax:Craftax-Classic-Symbolic-v1": `envs.suites`, each
        suite an extra), a name registered with
        `envs.register`, or an import path "package.module:factory" of one's own gymnax env
        (`envs.custom`).
      num_envs: parallel envs (for envpool: the whole pool).
      atari: Atari settings (envpool only).
      seed: envpool's seed (gymnax envs take their randomness from the keys given to them).
      evaluation: envpool only: whole games, unclipped rewards.
      discretise: a continuous-action gymnax or Brax env's values per action dimension (its actions
        are then the joint grid's points, `envs.wrappers`); None for discrete-action envs.
      param_fields: gymnax env parameters that vary over seeds or training
        (`envs.variation`); the env then carries their values in its state.
      observe: a gymnax vector env's observation entries to keep (`EnvConfig.observe`); ()
        keeps all.
      suite_file: a data file a suite's env reads (`EnvConfig.suite_file`: XLand-MiniGrid's
        ruleset benchmarks).

    Raises:
      ImportError: a suite's env whose extra is not installed (the message names the command).
      ValueError: unknown name (the message lists valid names), `num_envs < 1`, or
        `discretise` missing for a continuous-action env or given for a discrete one, or
        `param_fields` for a non-gymnax env or naming no parameter of the env.

    Examples:
      >>> import jax
      >>> env = make_env("CartPole-v1", num_envs=4)
      >>> state, obs = env.reset(jax.random.key(0))
      >>> obs.shape
      (4, 4)
    """
    if not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(
            f"EnvConfig.num_envs={num_envs!r} is not allowed; expected a positive int."
        )
    suite = suites.find(name)
    fixed = name in PROBE_ENVS or name.startswith("envpool:")
    if discretise is not None and fixed:
        raise ValueError(
            f"EnvConfig.discretise={discretise!r} is for continuous-action gymnax envs "
            f"({', '.join(gymnax_continuous_envs())}); {name} has discrete actions."
        )
    if param_fields and (fixed or suite is not None):
        raise ValueError(
            f"EnvConfig.variants / curriculum vary gymnax env parameters; {name} has none."
        )
    if observe and (fixed or suite is not None):
        raise ValueError(
            f"EnvConfig.observe={tuple(observe)} is for gymnax vector observations; {name} is "
            "not a gymnax env. Use observe=()."
        )
    if suite is not None:
        return suites.make_suite_env(*suite, num_envs, discretise=discretise, file=suite_file)
    if suite_file:
        raise ValueError(
            f"EnvConfig.suite_file={suite_file!r} is for a JAX suite's envs that read a data "
            f"file (XLand-MiniGrid's XLand-MiniGrid-R* envs); {name} is not one. Leave it empty."
        )
    own = custom.lookup(name)
    if own is not None:
        return adapt_gymnax(
            *own,
            name=name,
            num_envs=num_envs,
            discretise=discretise,
            param_fields=param_fields,
            observe=tuple(observe),
        )
    if name in PROBE_ENVS:
        return make_probe_env(name, num_envs)
    if name.startswith("envpool:"):
        from jaxrl_fast.envs.envpool_env import make_envpool_env

        return make_envpool_env(name, num_envs, atari, seed=seed, evaluation=evaluation)
    return make_gymnax_env(
        name.removeprefix("gymnax:"), num_envs, discretise, param_fields, tuple(observe)
    )
