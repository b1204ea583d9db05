"""Adapter from gymnax (>= 1.0, terminated and truncated kept apart) to the `Env` interface."""

from __future__ import annotations

import difflib

import jax
import jax.numpy as jnp

from jaxrl_fast.envs.base import Env, EnvSpec, make_batched_env
from jaxrl_fast.envs.wrappers import make_action_grid

# gymnax ids with a discrete action space that run offline (MNISTBandit downloads MNIST at
# construction, which this library never does). Listed rather than found by building every
# gymnax env (seconds), so that a bad name is refused at once; a test checks the list against
# gymnax's registry.
DISCRETE_ENVS = (
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "Asterix-MinAtar",
    "Breakout-MinAtar",
    "Freeway-MinAtar",
    "Seaquest-MinAtar",
    "SpaceInvaders-MinAtar",
    "Catch-bsuite",
    "DeepSea-bsuite",
    "MemoryChain-bsuite",
    "UmbrellaChain-bsuite",
    "DiscountingChain-bsuite",
    "SimpleBandit-bsuite",
    "FourRooms-misc",
    "MetaMaze-misc",
    "BernoulliBandit-misc",
    "GaussianBandit-misc",
    "Pong-misc",
    "FrozenLake-misc",
)
EXCLUDED_ENVS = ("MNISTBandit-bsuite",)
# gymnax ids with a continuous (Box) action space: trained on a grid of discrete actions
# (`EnvConfig.discretise`, `envs.wrappers`).
CONTINUOUS_ENVS = (
    "Pendulum-v1",
    "MountainCarContinuous-v0",
    "Reacher-misc",
    "PointRobot-misc",
    "Swimmer-misc",
)


def gymnax_discrete_envs() -> list[str]:
    """Return the gymnax env ids with discrete actions that jaxrl_fast can train on."""
    import gymnax

    return [name for name in DISCRETE_ENVS if name in gymnax.registered_envs]


def gymnax_continuous_envs() -> list[str]:
    """Return the gymnax env ids with continuous actions, trained with `EnvConfig.discretise`."""
    import gymnax

    return [name for name in CONTINUOUS_ENVS if name in gymnax.registered_envs]


def _unknown(name: str) -> ValueError:
    """The error for a name `make_gymnax_env` cannot build, with suggestions."""
    import gymnax

    valid = gymnax_discrete_envs()
    if name in CONTINUOUS_ENVS:
        why = (
            "has a continuous action space; DQN needs discrete actions: set "
            "EnvConfig.discretise=N (N values per action dimension, e.g. 9; the actions are "
            "their joint grid)."
        )
    elif name in gymnax.registered_envs and name not in EXCLUDED_ENVS:
        why = "has a continuous action space; DQN needs discrete actions."
    elif name in EXCLUDED_ENVS:
        why = "downloads data when built, which jaxrl_fast never does."
    else:
        close = difflib.get_close_matches(name, valid + list(CONTINUOUS_ENVS), n=3)
        why = "is not a gymnax discrete-action env."
        why += f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return ValueError(
        f"EnvConfig.name={name!r} {why} Valid names: {', '.join(valid)} (and the probe envs "
        f"'probe-bandit', 'probe-chain', 'envpool:<Game>-v5' with the atari extra, and the JAX "
        f"suites' 'suite:EnvName' envs: `jaxrl-fast envs --suites`); with "
        f"EnvConfig.discretise: {', '.join(CONTINUOUS_ENVS)}. One's own gymnax env: "
        "train(config, env=MyEnv()), a name given to jaxrl_fast.envs.register, or an import "
        "path 'package.module:factory'."
    )


def make_gymnax_env(
    name: str,
    num_envs: int,
    discretise: int | None = None,
    param_fields: tuple[str, ...] = (),
    observe: tuple[int, ...] = (),
) -> Env:
    """Build a batched gymnax env.

    Args:
      name: gymnax id, e.g. "CartPole-v1".
      num_envs: parallel envs.
      discretise: for a continuous-action env (`CONTINUOUS_ENVS`), the values per action
        dimension; the env then takes the index of a point of their joint grid
        (`envs.wrappers.ActionGrid`). None for a discrete-action env.
      param_fields: gymnax `EnvParams` fields that vary over seeds or training
        (`envs.variation`): the env's state then carries their values, and the `Env` gets
        `reset_with`, `params_of` and `with_params`.
      observe: the observation entries the agent sees (a vector observation's indices, e.g.
        (0, 2) hides CartPole's velocities); () keeps the whole observation.

    Returns:
      An `Env`. Scalar discrete observations (FrozenLake) are one-hot encoded.

    Raises:
      ValueError: unknown env id (the message lists the valid ones), a continuous-action env
        without `discretise`, a discrete-action env with it, a bad `discretise`, or a
        `param_fields` entry that is not one of the env's parameters, or an `observe` index
        outside a vector observation.
    """
    import gymnax

    continuous = name in CONTINUOUS_ENVS
    if not (name in DISCRETE_ENVS or continuous) or name not in gymnax.registered_envs:
        raise _unknown(name)
    if continuous and discretise is None:
        raise _unknown(name)
    env, params = gymnax.make(name)
    return adapt_gymnax(
        env,
        params,
        name=name,
        num_envs=num_envs,
        discretise=discretise,
        param_fields=param_fields,
        observe=observe,
    )


def adapt_gymnax(
    env,
    params,
    *,
    name: str,
    num_envs: int,
    discretise: int | None = None,
    param_fields: tuple[str, ...] = (),
    observe: tuple[int, ...] = (),
) -> Env:
    """Adapt a gymnax `Environment` instance (gymnax's own or one's own) with its `params` to a
    batched `Env` of `num_envs` envs; the other arguments are those of `make_gymnax_env`.

    The env follows gymnax's interface: `reset_env(key, params) -> (obs, state)`,
    `step_env(key, state, action, params) -> (obs, state, reward, terminated, info)` without
    resetting, `is_truncated(state, params)` (gymnax's default: `state.time >=
    params.max_steps_in_episode`), and a `Discrete` (or, with `discretise`, `Box`) action space.
    `params.max_steps_in_episode` bounds an evaluation episode.

    Raises:
      ValueError: an action space that is neither `Discrete` nor `Box`, `discretise` missing for
        a `Box` or given for a `Discrete` space, params without `max_steps_in_episode`, or a bad
        `param_fields` or `observe` entry.
    """
    from gymnax.environments import spaces

    space = env.action_space(params)
    if isinstance(space, spaces.Discrete):
        if discretise is not None:
            raise ValueError(
                f"EnvConfig.discretise={discretise!r} is for continuous action spaces; {name} "
                "has discrete actions. Leave discretise unset (None)."
            )
        num_actions, to_env = int(space.n), lambda action: action
    elif isinstance(space, spaces.Box):
        if discretise is None:
            raise ValueError(
                f"EnvConfig.name={name!r} has a continuous (Box) action space; DQN needs discrete "
                "actions: set EnvConfig.discretise=N (N values per action dimension, e.g. 9)."
            )
        grid = make_action_grid(space.low, space.high, discretise, name=name)
        num_actions, to_env = grid.num_actions, grid.to_continuous
    else:
        raise ValueError(
            f"EnvConfig.name={name!r}: its action space is a {type(space).__name__}; expected a "
            "gymnax spaces.Discrete (or spaces.Box with EnvConfig.discretise)."
        )
    if not hasattr(params, "max_steps_in_episode"):
        raise ValueError(
            f"EnvConfig.name={name!r}: its params ({type(params).__name__}) have no "
            "max_steps_in_episode, which bounds an evaluation episode; subclass gymnax's "
            "environments.environment.EnvParams."
        )
    _check_param_fields(name, params, param_fields)
    obs_space = env.observation_space(params)
    one_hot = isinstance(obs_space, spaces.Discrete)
    n_obs = obs_space.n if one_hot else None

    if observe:
        shape = tuple(obs_space.shape)
        if one_hot or len(shape) != 1 or max(observe) >= shape[0]:
            raise ValueError(
                f"EnvConfig.observe={observe} is not allowed for {name}: expected indices of its "
                f"vector observation (shape {shape}), each in [0, {shape[0] if shape else 0})."
            )
    keep = jnp.asarray(observe, jnp.int32) if observe else None

    def encode(obs):
        if one_hot:
            return jax.nn.one_hot(obs, n_obs, dtype=jnp.float32)
        return obs if keep is None else obs[keep]

    def reset_one(key, p=params):
        obs, state = env.reset_env(key, p)
        return state, encode(obs)

    def step_one(key, state, action, p=params):
        obs, state, reward, terminated, _ = env.step_env(key, state, to_env(action), p)
        truncated = env.is_truncated(state, p)
        return (
            state,
            encode(obs),
            reward,
            jnp.asarray(terminated, bool),
            jnp.asarray(truncated, bool),
        )

    reset_with_one = None
    if param_fields:  # the state carries the varying parameters: (gymnax state, overrides)

        def reset_with_one(key, overrides):
            state, obs = reset_one(key, params.replace(**overrides))
            return (state, overrides), obs

        def step_varying(key, inner, action):
            state, overrides = inner
            state, *rest = step_one(key, state, action, params.replace(**overrides))
            return ((state, overrides), *rest)

        def reset_default(key):
            defaults = {f: jnp.float32(getattr(params, f)) for f in param_fields}
            return reset_with_one(key, defaults)

    example = jax.eval_shape(lambda k: reset_one(k)[1], jax.random.key(0))
    spec = EnvSpec(
        name=name,
        obs_shape=tuple(example.shape),
        obs_dtype=example.dtype,
        num_actions=num_actions,
        num_envs=num_envs,
        max_episode_steps=int(params.max_steps_in_episode),
    )
    if reset_with_one is None:
        return make_batched_env(spec, reset_one, step_one)
    return make_batched_env(spec, reset_default, step_varying, reset_with_one=reset_with_one)


def _check_param_fields(name: str, params, fields: tuple[str, ...]) -> None:
    """Refuse a varying parameter the env does not have (or that fixes a shape or loop bound)."""
    import dataclasses

    own = [f.name for f in dataclasses.fields(params) if f.name != "max_steps_in_episode"]
    for field in fields:
        if field not in own:
            close = difflib.get_close_matches(field, own, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"EnvConfig: {name} has no env parameter {field!r} to vary.{hint} Its "
                f"parameters: {', '.join(own)} (max_steps_in_episode cannot vary: it bounds "
                "the evaluation loop)."
            )
