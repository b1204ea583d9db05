"""A PureJaxRL-style DQN loop, written here as the yardstick `benchmarks/peers.py` measures against.

It is the design a user would otherwise write (issue 12): one `make_train(config)` that returns
`train(key)`, the whole run one `lax.scan` jitted and vmapped over seeds; gymnax envs vmapped
over `num_envs`; flashbax's flat buffer (from pip) holding `(obs, action, reward, done)` and
sampling `(first, second)` pairs; the update and the target copy behind `lax.cond`s on the step
counter. Every seed has its own keys (PureJaxRL's published `dqn.py` overwrites the seed key
with a fixed one, so its seeds share one random stream: that is less work, not a faster loop).

The hyperparameters are read from a jaxrl_fast `TrainConfig` (`cartpole-cleanrl`), so both
loops do the same work: per iteration, one step of `num_envs` envs and, once learning has
started, one update every `train_frequency` env steps.

What differs from jaxrl_fast by design, as in PureJaxRL: a `done` at the time limit is treated as
a termination (no bootstrap from the final observation: gymnax returns the reset observation),
and the flat buffer stores every step's observation once and samples consecutive rows.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import flashbax as fbx
import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import optax


class MLP(nn.Module):
    hidden: tuple[int, ...]
    num_actions: int

    @nn.compact
    def __call__(self, x):
        for h in self.hidden:
            x = nn.relu(nn.Dense(h)(x))
        return nn.Dense(self.num_actions)(x)


class Step(NamedTuple):
    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    done: jax.Array


class Carry(NamedTuple):
    params: Any
    target: Any
    opt_state: Any
    buffer: Any
    env_state: Any
    obs: jax.Array
    t: jax.Array  # env steps so far (all envs of one seed)
    key: jax.Array


def _done(step_out) -> jax.Array:
    """Episode ends from a gymnax step: `done`, or `terminated | truncated` (gymnax >= 1.0)."""
    flags = step_out[3:-1]
    return flags[0] if len(flags) == 1 else jnp.logical_or(*flags)


def make_train(config) -> tuple[Callable[[jax.Array], tuple[Carry, jax.Array]], int]:
    """`(train(key) -> (carry, loss per iteration), iterations)` for one seed; vmap it over keys.

    `config` is a jaxrl_fast `TrainConfig` for a gymnax env with an MLP network.
    """
    env, env_params = gymnax.make(config.env.name)
    num_envs = config.env.num_envs
    num_actions = env.action_space(env_params).n
    net = MLP(tuple(config.network.hidden_sizes), num_actions)
    gamma = config.dqn.gamma
    iterations = config.total_env_steps // num_envs
    decay = max(1, int(config.schedule.epsilon_fraction * config.total_env_steps))
    epsilon = optax.linear_schedule(
        config.schedule.epsilon_start, config.schedule.epsilon_end, decay
    )
    tx = optax.adam(config.dqn.learning_rate)
    buffer = fbx.make_flat_buffer(
        max_length=config.replay.capacity,
        min_length=config.replay.batch_size,
        sample_batch_size=config.replay.batch_size,
        add_sequences=False,
        add_batch_size=num_envs,
    )
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def loss_fn(params, target, batch):
        q = net.apply(params, batch.first.obs)
        q_a = jnp.take_along_axis(q, batch.first.action[:, None], -1)[:, 0]
        q_next = jnp.max(net.apply(target, batch.second.obs), axis=-1)
        y = batch.first.reward + gamma * (1.0 - batch.first.done) * q_next
        return jnp.mean(jnp.square(q_a - jax.lax.stop_gradient(y)))

    def learn(carry: Carry, key: jax.Array):
        batch = buffer.sample(carry.buffer, key).experience
        loss, grads = jax.value_and_grad(loss_fn)(carry.params, carry.target, batch)
        updates, opt_state = tx.update(grads, carry.opt_state, carry.params)
        params = optax.apply_updates(carry.params, updates)
        return carry._replace(params=params, opt_state=opt_state), loss

    def iteration(carry: Carry, _):
        key, k_act, k_explore, k_env, k_sample = jax.random.split(carry.key, 5)
        q = net.apply(carry.params, carry.obs)
        greedy = jnp.argmax(q, axis=-1)
        random = jax.random.randint(k_act, greedy.shape, 0, num_actions)
        explore = jax.random.uniform(k_explore, greedy.shape) < epsilon(carry.t)
        action = jnp.where(explore, random, greedy)
        out = step(jax.random.split(k_env, num_envs), carry.env_state, action, env_params)
        obs, env_state, reward, done = out[0], out[1], out[2], _done(out)
        stored = Step(carry.obs, action, reward, done.astype(jnp.float32))
        t = carry.t + num_envs
        carry = carry._replace(
            buffer=buffer.add(carry.buffer, stored), env_state=env_state, obs=obs, t=t, key=key
        )
        due = (
            buffer.can_sample(carry.buffer)
            & (t > config.learning_starts)
            & (t % config.train_frequency == 0)
        )
        carry, loss = jax.lax.cond(
            due, learn, lambda c, _: (c, jnp.zeros((), jnp.float32)), carry, k_sample
        )
        target = jax.lax.cond(
            t % config.dqn.target_period == 0, lambda: carry.params, lambda: carry.target
        )
        return carry._replace(target=target), loss

    def train(key: jax.Array) -> tuple[Carry, jax.Array]:
        key, k_reset, k_init = jax.random.split(key, 3)
        obs, env_state = reset(jax.random.split(k_reset, num_envs), env_params)
        params = net.init(k_init, obs)
        example = Step(obs[0], jnp.zeros((), jnp.int32), jnp.zeros(()), jnp.zeros(()))
        carry = Carry(
            params=params,
            target=params,
            opt_state=tx.init(params),
            buffer=buffer.init(example),
            env_state=env_state,
            obs=obs,
            t=jnp.zeros((), jnp.int32),
            key=key,
        )
        return jax.lax.scan(iteration, carry, None, length=iterations)

    return train, iterations


def greedy_return(config, params, key: jax.Array, episodes: int = 8) -> jax.Array:
    """Mean undiscounted return of `episodes` greedy episodes (one env each), for sanity checks."""
    env, env_params = gymnax.make(config.env.name)
    net = MLP(tuple(config.network.hidden_sizes), env.action_space(env_params).n)
    limit = env_params.max_steps_in_episode

    def body(c, k):
        state, obs, ret, alive = c
        action = jnp.argmax(net.apply(params, obs), axis=-1)
        out = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            jax.random.split(k, episodes), state, action, env_params
        )
        obs, state, r, done = out[0], out[1], out[2], _done(out)
        return (state, obs, ret + r * alive, alive & ~done), None

    k_reset, k_run = jax.random.split(key)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(k_reset, episodes), env_params
    )
    init = (state, obs, jnp.zeros(episodes), jnp.ones(episodes, bool))
    (_, _, ret, _), _ = jax.lax.scan(body, init, jax.random.split(k_run, limit))
    return jnp.mean(ret)
