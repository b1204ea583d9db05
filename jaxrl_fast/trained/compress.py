"""A smaller agent from a trained one: magnitude pruning and distillation (issue 17, part 3).

- `prune_by_magnitude(params, fraction)`: the `fraction` of weight-matrix (flax `kernel`)
  entries with the smallest magnitude set to 0, over all kernels (or per kernel); biases are
  kept. The shapes do not change: a pruned network runs as fast as the dense one, and is
  smaller only where it is stored sparse or compressed. `distil(..., keep=mask)` fine-tunes it
  with the pruned entries held at 0.
- `collect_observations`: the observations a Q-network's epsilon-greedy policy visits, the
  distillation's data.
- `distil`: a (smaller) student Q-network trained to reproduce the teacher's Q-values on those
  observations (mean squared error over every action, Adam).
- `greedy_return`: the mean return of a Q-network's greedy policy, whole episodes.

All of it is pure JAX over flax `QNetwork`s; `benchmarks/applications.py` measures it.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxrl_fast.agent.exploration import epsilon_greedy
from jaxrl_fast.agent.masks import legal_actions, mask_q
from jaxrl_fast.envs import make_env
from jaxrl_fast.types import Array

ApplyFn = Callable[[Any, Array], Array]  # (params, obs [B, ...]) -> Q [B, A]


def prune_by_magnitude(params: Any, fraction: float, *, scope: str = "global") -> Any:
    """`params` with the `fraction` smallest-magnitude kernel entries set to 0 (biases kept):
    over all kernels together (scope="global"), or in each kernel apart (scope="layer").

    Global pruning spares the small layers (a CartPole MLP's 4 x 120 input layer): on the
    `cartpole` preset's 4 agents, 30% kept a mean greedy return of 499.8 of 500, where pruning
    each layer by 30% fell to 48.4 (benchmarks/results/applications/applications.md).

    Raises:
      ValueError: `fraction` outside [0, 1), or an unknown `scope`.

      >>> p = {"Dense_0": {"kernel": jnp.array([[0.1, -0.5], [2.0, -0.05]]), "bias": jnp.ones(2)}}
      >>> prune_by_magnitude(p, 0.5)["Dense_0"]["kernel"].tolist()
      [[0.0, -0.5], [2.0, 0.0]]
    """
    if not (isinstance(fraction, (int, float)) and 0 <= fraction < 1):
        raise ValueError(f"prune fraction={fraction!r}: expected a number in [0, 1).")
    if scope not in ("global", "layer"):
        raise ValueError(f"prune scope={scope!r}: expected 'global' or 'layer'.")

    def is_kernel(path) -> bool:
        return getattr(path[-1], "key", None) == "kernel"

    def smallest(x: Array, k: int) -> Array:
        """Indices of the k smallest |x| (ties broken by position: exactly k)."""
        return jnp.argsort(jnp.abs(x), stable=True)[:k]

    named = jax.tree_util.tree_leaves_with_path(params)
    kernels = [x for path, x in named if is_kernel(path)]
    if fraction == 0 or not kernels:
        return params
    if scope == "layer":

        def prune(path, x):
            if not is_kernel(path):
                return x
            flat = x.reshape(-1)
            return flat.at[smallest(flat, int(round(fraction * flat.size)))].set(0).reshape(x.shape)

        return jax.tree_util.tree_map_with_path(prune, params)
    flat = jnp.concatenate([k.reshape(-1) for k in kernels])
    flat = flat.at[smallest(flat, int(round(fraction * flat.size)))].set(0)
    sizes = np.cumsum([0] + [k.size for k in kernels])
    pieces = iter(
        flat[a:b].reshape(k.shape) for a, b, k in zip(sizes[:-1], sizes[1:], kernels, strict=True)
    )
    return jax.tree_util.tree_map_with_path(
        lambda path, x: next(pieces) if is_kernel(path) else x, params
    )


def count_params(params: Any) -> tuple[int, int]:
    """`(entries, non-zero entries)` of a parameter tree."""
    leaves = jax.tree.leaves(params)
    return sum(x.size for x in leaves), sum(int(jnp.count_nonzero(x)) for x in leaves)


def _legal_q(spec, q: Array, obs: Array) -> Array:
    """`q` masked to the legal actions of a masked env's observations (`agent.masks`)."""
    return mask_q(q, legal_actions(obs, spec.num_actions) if spec.action_mask else None)


def _rollout(env_name: str, episodes: int, steps: int, act: Callable, key: Array):
    """Run `episodes` envs for `steps` steps with `act(obs, key) -> actions`; returns the
    observations `[steps, episodes, ...]` and each env's first episode return `[episodes]`."""
    env = make_env(env_name, num_envs=episodes)

    def step(carry, key):
        state, obs, total, finished = carry
        key_act, key_env = jax.random.split(key)
        state, next_obs, reward, done, _ = env.step(key_env, state, act(obs, key_act))
        total = total + jnp.where(finished, 0.0, reward)
        return (state, next_obs, total, finished | done), obs

    key_reset, key_steps = jax.random.split(key)
    state, obs = env.reset(key_reset)
    init = (state, obs, jnp.zeros(episodes), jnp.zeros(episodes, bool))
    (_, _, total, _), seen = jax.lax.scan(step, init, jax.random.split(key_steps, steps))
    return seen, total


def greedy_return(
    apply: ApplyFn, params: Any, env_name: str, *, episodes: int = 64, seed: int = 0
) -> float:
    """Mean return of the first episode of `episodes` envs under the greedy policy."""
    spec = make_env(env_name).spec
    horizon = spec.max_episode_steps + 1

    def act(obs, key):
        return jnp.argmax(_legal_q(spec, apply(params, obs), obs), axis=-1)

    run = jax.jit(lambda key: _rollout(env_name, episodes, horizon, act, key)[1])
    return float(jnp.mean(run(jax.random.key(seed))))


def collect_observations(
    apply: ApplyFn,
    params: Any,
    env_name: str,
    *,
    envs: int = 64,
    steps: int = 500,
    epsilon: float = 0.1,
    seed: int = 0,
) -> Array:
    """`[envs * steps, *obs_shape]` observations visited by the epsilon-greedy policy."""
    spec = make_env(env_name).spec

    def act(obs, key):
        if spec.action_mask:  # legal actions only, greedy or random
            q = _legal_q(spec, apply(params, obs), obs)
            legal = legal_actions(obs, spec.num_actions)
            return epsilon_greedy(key, q, epsilon, spec.num_actions, legal)
        key_explore, key_random = jax.random.split(key)
        greedy = jnp.argmax(apply(params, obs), axis=-1)
        random = jax.random.randint(key_random, greedy.shape, 0, spec.num_actions)
        explore = jax.random.uniform(key_explore, greedy.shape) < epsilon
        return jnp.where(explore, random, greedy)

    seen, _ = jax.jit(lambda key: _rollout(env_name, envs, steps, act, key))(jax.random.key(seed))
    return seen.reshape(-1, *seen.shape[2:])


def distil(
    teacher: ApplyFn,
    teacher_params: Any,
    student: ApplyFn,
    student_params: Any,
    observations: Array,
    *,
    steps: int = 3000,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    loss: str = "advantage",
    keep: Any = None,
    seed: int = 0,
) -> tuple[Any, np.ndarray]:
    """Train `student` to give `teacher`'s Q-values on `observations`.

    Args:
      loss: "advantage" (default): the squared error of the advantages `Q - mean_a Q`,
        normalised by the teacher's mean |advantage|, plus that of the values `mean_a Q`,
        normalised by the teacher's mean |Q|; "q": the squared error of the Q-values.
      keep: a 0/1 tree like `student_params`: entries held at 0 (fine-tuning a pruned net).

    Returns:
      `(student_params, losses [steps])`.
    """
    targets = jax.jit(teacher)(teacher_params, observations)
    tx = optax.adam(learning_rate)
    n = observations.shape[0]

    def loss_fn(params, idx):
        q, target = student(params, observations[idx]), targets[idx]
        if loss == "q":
            return jnp.mean((q - target) ** 2)
        # advantages: the greedy policy depends only on them, and CartPole's action gaps are a
        # percent of its Q-values, which a plain Q regression washes out; plus the values
        adv = q - q.mean(-1, keepdims=True)
        adv_t = target - target.mean(-1, keepdims=True)
        scale = jnp.mean(jnp.abs(adv_t)) + 1e-6
        value_err = (q.mean(-1) - target.mean(-1)) / (jnp.mean(jnp.abs(target)) + 1e-6)
        return jnp.mean(((adv - adv_t) / scale) ** 2) + jnp.mean(value_err**2)

    def step(carry, key):
        params, opt_state = carry
        idx = jax.random.randint(key, (batch_size,), 0, n)
        value, grads = jax.value_and_grad(loss_fn)(params, idx)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        if keep is not None:  # pruned weights stay 0
            params = jax.tree.map(lambda p, k: p * k, params, keep)
        return (params, opt_state), value

    @jax.jit
    def train(params, key):
        carry = (params, tx.init(params))
        (params, _), losses = jax.lax.scan(step, carry, jax.random.split(key, steps))
        return params, losses

    params, losses = train(student_params, jax.random.key(seed))
    return params, np.asarray(losses)
