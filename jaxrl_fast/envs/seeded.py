"""`SeededEnv`: reset and step the envs of all seeds at once, `[S, E]` in and out.

This is the only place where the two kinds of env differ:

- a pure env (gymnax, probes; `EnvSpec.seed_vmappable`) has one `Env` of `E` envs per seed,
  vmapped over the seeds: the state has a leading `[S]` axis (`state_axes = 0`);
- a handle-based env (envpool) is ONE pool of `S x E` emulators, stepped once per call outside
  any vmap (its XLA step cannot be vmapped), with actions and results reshaped
  `[S, E] <-> [S * E]`: the state is shared by the seeds (`state_axes = None`), and the seeds
  must stay on one device (`single_device`).

The loop, the evaluation and the host shell see only `SeededEnv`.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax

from jaxrl_fast.config import EnvConfig
from jaxrl_fast.envs.base import Env, EnvSpec
from jaxrl_fast.types import Array, PRNGKey

POOL_PREFIX = "envpool:"


class SeededEnv(NamedTuple):
    """The envs of `num_seeds` seeds as pure functions over one state.

    Attributes:
      spec: one seed's envs (`spec.num_envs` is `E`, envs per seed).
      num_seeds: seeds `S` the env was built for (a pool holds exactly `S x E` envs; a vmapped
        env takes any number of seeds, e.g. a device's share of them).
      state_axes: the state's seed axis for `vmap` / sharding: 0 (per seed) or None (one state
        shared by all seeds).
      single_device: the seeds cannot be spread over devices (one pool for all of them).
      state_saved: a checkpoint of the runner holds the envs' state. False for a pool whose
        state lives outside JAX (envpool's emulators): a resumed run restarts its episodes.
      reset: `keys [S] -> (state, obs [S, E, *obs_shape])`.
      step: `(keys [S], state, action [S, E]) -> (state, obs [S, E, ...], reward [S, E],
        done [S, E], info)`, `info` holding `[S, E]` arrays as `Env.step`'s does.
    """

    spec: EnvSpec
    num_seeds: int
    state_axes: Any
    single_device: bool
    reset: Callable[[PRNGKey], tuple[Any, Array]]
    step: Callable[[PRNGKey, Any, Array], tuple[Any, Array, Array, Array, dict]]
    state_saved: bool = True
    # envs with varying parameters (`envs.variation`), per seed: `reset_with(keys [S],
    # {field: [S]})`, `params_of(state) -> {field: [S]}`, `with_params(state, {field: [S]})`
    reset_with: Callable[[PRNGKey, dict], tuple[Any, Array]] | None = None
    params_of: Callable[[Any], dict] | None = None
    with_params: Callable[[Any, dict], Any] | None = None
    # a two-player game (`Env.against`): against(opponent, ctx) -> its `SeededEnv` against
    # `opponent`, whose state (one per seed) starts at `ctx`
    against: Callable[[Any, Any], SeededEnv] | None = None


def make_seeded_env(env: Env, num_seeds: int) -> SeededEnv:
    """Wrap a batched `Env` for `num_seeds` seeds.

    Args:
      env: an env of `E` envs (one seed's) if `env.spec.seed_vmappable`, else a pool of
        `num_seeds x E` envs.
      num_seeds: seeds.

    Raises:
      ValueError: a pool whose size is not a multiple of `num_seeds`.

    Examples:
      >>> import jax
      >>> from jaxrl_fast.envs import make_env
      >>> seeded = make_seeded_env(make_env("CartPole-v1", num_envs=3), num_seeds=2)
      >>> state, obs = seeded.reset(jax.random.split(jax.random.key(0), 2))
      >>> obs.shape
      (2, 3, 4)
    """
    if env.spec.seed_vmappable:
        varying = env.reset_with is not None
        return SeededEnv(
            spec=env.spec,
            num_seeds=num_seeds,
            state_axes=0,
            single_device=False,
            reset=jax.vmap(env.reset),
            step=jax.vmap(env.step),
            reset_with=jax.vmap(env.reset_with) if varying else None,
            params_of=jax.vmap(env.params_of) if varying else None,
            with_params=jax.vmap(env.with_params) if varying else None,
            against=None
            if env.against is None
            else (lambda opponent, ctx: make_seeded_env(env.against(opponent, ctx), num_seeds)),
        )
    if env.spec.num_envs % num_seeds:
        raise ValueError(
            f"a pool env of {env.spec.num_envs} envs cannot hold num_seeds={num_seeds} seeds; "
            f"expected num_seeds x EnvConfig.num_envs envs."
        )
    per_seed = env.spec.num_envs // num_seeds

    def to_seeds(x: Array) -> Array:
        return x.reshape(num_seeds, per_seed, *x.shape[1:])

    def reset(keys: PRNGKey) -> tuple[Any, Array]:
        # envpool draws its randomness from its own seeded generators: the key is unused
        state, obs = env.reset(keys[0])
        return state, to_seeds(obs)

    def step(keys: PRNGKey, state: Any, action: Array):
        state, obs, reward, done, info = env.step(keys[0], state, action.reshape(-1))
        info = {k: to_seeds(v) for k, v in info.items()}
        return state, to_seeds(obs), to_seeds(reward), to_seeds(done), info

    return SeededEnv(
        spec=env.spec._replace(num_envs=per_seed),
        num_seeds=num_seeds,
        state_axes=None,
        single_device=True,
        state_saved=False,
        reset=reset,
        step=step,
    )


def make_seeded(
    config: EnvConfig,
    num_seeds: int,
    *,
    num_envs: int | None = None,
    seed: int = 0,
    evaluation: bool = False,
) -> SeededEnv:
    """Build the `SeededEnv` an `EnvConfig` names for `num_seeds` seeds.

    Args:
      config: the env's name and settings.
      num_seeds: seeds.
      num_envs: envs per seed (default `config.num_envs`).
      seed: the pool's seed (envpool; gymnax takes its randomness from the keys).
      evaluation: envpool only: whole games with unclipped rewards.

    Raises:
      ValueError: unknown env name (with the valid names), or bad `num_envs`.
      ImportError: an envpool env without the `atari` extra.
    """
    from jaxrl_fast.envs.make import make_env

    num_envs = config.num_envs if num_envs is None else num_envs
    pool = config.name.startswith(POOL_PREFIX)  # one pool of every seed's envs
    env = make_env(
        config.name,
        num_envs * num_seeds if pool else num_envs,
        atari=config.atari,
        seed=seed,
        evaluation=evaluation,
        discretise=config.discretise,
        param_fields=config.varying_params,
        observe=config.observe,
        suite_file=config.suite_file,
    )
    return make_seeded_env(env, num_seeds)
