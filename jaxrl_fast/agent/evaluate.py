"""One evaluation for every env kind: `make_evaluate(config, agent)`.

Each seed plays `eval_episodes` episodes at once (one env per episode) with epsilon
`config.eval_epsilon` (0: greedy), until every episode has ended or `max_episode_steps` steps
have passed; the return of each episode counts its rewards up to its end. The envs are a
`SeededEnv` built when `make_evaluate` runs (for envpool: a pool of `S x eval_episodes` whole,
unclipped games), never while the evaluation is traced. The fused loop (`loop/loop.py`) and the
conventional baseline (`baseline/`) evaluate with this same function.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxrl_fast.agent import precision as mp
from jaxrl_fast.agent.dqn import Agent, AgentState
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.envs.seeded import SeededEnv, make_seeded
from jaxrl_fast.types import Array, PRNGKey

# Env steps an evaluation runs between two checks that every episode has ended: at most this
# many - 1 steps are run past the last episode's end; a GPU waits on the host once per segment.
EVAL_SEGMENT = 32

Evaluate = Callable[..., Array]  # (agents, keys, env_params=None) -> [S]


def make_evaluate(
    config: TrainConfig,
    agent: Agent,
    *,
    num_seeds: int | None = None,
    env: SeededEnv | None = None,
) -> Evaluate:
    """Build `evaluate(agents, keys) -> [S]` mean returns.

    Args:
      config: the run (env, `eval_episodes`, `eval_epsilon`, `seed`).
      agent: the agent's functions (for `act`).
      num_seeds: seeds to evaluate at once (default `config.num_seeds`).
      env: the evaluation envs (`eval_episodes` per seed); by default built from `config.env`
        with seed `config.seed + 1`.

    Returns:
      `evaluate(agents, keys, env_params=None)`: `agents` an `AgentState` with leading `[S]`,
      `keys` `[S]` typed keys, `env_params` each seed's varying env parameters ({field: [S]},
      `envs.variation`; None: the env's own); returns `[S]` float32 mean undiscounted returns
      (NaN if `eval_episodes` is 0).
    """
    episodes = config.eval_episodes
    num_seeds = config.num_seeds if num_seeds is None else num_seeds
    if episodes == 0:

        def no_evaluation(agents: AgentState, keys: PRNGKey, env_params=None) -> Array:
            return jnp.full(keys.shape, jnp.nan, jnp.float32)

        return no_evaluation
    if env is None:
        env = make_seeded(
            config.env, num_seeds, num_envs=episodes, seed=config.seed + 1, evaluation=True
        )
    epsilon = jnp.float32(config.eval_epsilon)
    act = jax.vmap(agent.eval_step or agent.step, in_axes=(0, 0, 0, 0, None, None))

    def evaluate(agents: AgentState, keys: PRNGKey, env_params: dict | None = None) -> Array:
        fp32 = mp.shared_fallback(agents.loss_scale)  # shared by the seeds, as in training
        total = play_episodes(
            env,
            lambda key_act, obs, state: act(agents, key_act, obs, state, epsilon, fp32),
            agent.initial_carry,
            keys,
            env_params,
        )
        return jnp.mean(total, axis=1)

    return evaluate


def play_episodes(
    env: SeededEnv,
    act: Callable[[PRNGKey, Array, Any], tuple[Array, Any]],
    initial_carry: Callable[[int], Any],
    keys: PRNGKey,
    env_params: dict | None = None,
) -> Array:
    """Play one episode in each of the `[S, E]` envs of `env` and return their `[S, E]` float32
    returns: until every episode has ended or `max_episode_steps` steps have passed, each
    episode's rewards counted up to its end.

    Args:
      env: the envs (`E` per seed).
      act: `(keys [S], obs [S, E, ...], state) -> (actions [S, E], state)`, the seeds' policy;
        `state` is a recurrent policy's carry (`()` for a feed-forward one).
      initial_carry: `E -> ` one seed's carry at the episodes' start.
      keys: `[S]` typed keys.
      env_params: each seed's varying env parameters ({field: [S]}, `envs.variation`).
    """
    max_steps = env.spec.max_episode_steps
    split = jax.vmap(jax.random.split)(keys)
    keys, key_reset = split[:, 0], split[:, 1]
    if env_params is None:
        env_state, obs = env.reset(key_reset)
    else:  # each seed's env parameters, {field: [S]} (envs.variation)
        env_state, obs = env.reset_with(key_reset, env_params)
    total = jnp.zeros(obs.shape[:2], jnp.float32)  # [S, episodes]

    def step(carry, _):
        t, env_state, obs, total, finished, keys, state = carry
        split = jax.vmap(lambda k: jax.random.split(k, 3))(keys)
        keys, key_act, key_env = split[:, 0], split[:, 1], split[:, 2]
        action, state = act(key_act, obs, state)
        env_state, obs, reward, done, _ = env.step(key_env, env_state, action)
        total = total + jnp.where(finished | (t > max_steps), 0.0, reward)
        return (t + 1, env_state, obs, total, finished | done, keys, state), None

    def segment(_, carry):
        t, finished = carry[0], carry[4]
        if segments == 1:
            return jax.lax.scan(step, carry, length=length)[0]
        with jax.named_scope("eval_segment"):  # skip the rest once every episode has ended
            return jax.lax.cond(
                jnp.all(finished) | (t > max_steps),
                lambda c: c,
                lambda c: jax.lax.scan(step, c, length=length)[0],
                carry,
            )

    # Steps 0 .. max_steps, in segments of `length` with a fixed count of each: XLA:GPU reads a
    # loop's condition on the host every iteration unless its trip count is known, so a check
    # per segment (a `cond`) replaces a check per step.
    length = min(max_steps + 1, EVAL_SEGMENT)
    segments = -(-(max_steps + 1) // length)
    # a recurrent agent's state, from the episodes' start (each env plays one episode)
    state = jax.vmap(lambda o: initial_carry(o.shape[0]))(obs)
    start = (jnp.zeros((), jnp.int32), env_state, obs, total, total > 0, keys, state)
    return jax.lax.fori_loop(0, segments, segment, start)[3]
