"""The conventional host replay: numpy arrays in host memory, `obs` and `next_obs` stored."""

from __future__ import annotations

import numpy as np

from jaxrl_fast.types import Batch

__all__ = ["HostReplay"]


class HostReplay:
    """Uniform ring replay in host (numpy) memory, storing `obs` and `next_obs` explicitly.

    This is the conventional buffer (SB3/CleanRL style): one row per transition, sampled
    uniformly with replacement. Reset steps of the env (next-step auto-reset, see
    `envs/base.py`) are not transitions: `add` drops their rows, so every stored row goes from an
    observation to the next observation of the *same* episode.

    Args:
      capacity: rows kept; the oldest row is overwritten once full.
      obs_shape: shape of one observation.
      obs_dtype: storage dtype of observations (the env's own dtype).
      seed: seed of the numpy generator used by `sample`.

    Raises:
      ValueError: `capacity` is not a positive int.

    Examples:
      >>> import numpy as np
      >>> replay = HostReplay(4, (2,), np.float32, seed=0)
      >>> obs = np.eye(2, dtype=np.float32)
      >>> replay.add(obs, np.array([0, 1]), np.array([1.0, 0.0]), np.array([True, False]),
      ...            obs[::-1], np.array([False, True]))
      1
      >>> replay.size, replay.sample(3).obs.shape
      (1, (3, 2))
    """

    def __init__(
        self, capacity: int, obs_shape: tuple[int, ...], obs_dtype, seed: int, gamma: float = 0.99
    ) -> None:
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity <= 0:
            raise ValueError(
                f"HostReplay capacity={capacity!r} is not allowed; expected a positive int."
            )
        self.capacity = capacity
        self.gamma = float(gamma)
        self.obs = np.zeros((capacity, *obs_shape), obs_dtype)
        self.next_obs = np.zeros((capacity, *obs_shape), obs_dtype)
        self.action = np.zeros((capacity,), np.int32)
        self.reward = np.zeros((capacity,), np.float32)
        self.terminated = np.zeros((capacity,), bool)
        self.insert_pos = 0
        self.size = 0
        self._rng = np.random.default_rng(seed)

    def add(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        next_obs: np.ndarray,
        reset: np.ndarray,
    ) -> int:
        """Store one env step of every env, skipping reset-step rows.

        Args:
          obs: `[E, *obs_shape]` observations the actions were taken in.
          action: `[E]` int actions.
          reward: `[E]` float rewards.
          terminated: `[E]` bool, the episode ended in a terminal state.
          next_obs: `[E, *obs_shape]` observations the step returned (the real final observation
            where the episode ended).
          reset: `[E]` bool, the step was a reset step (its action was ignored); such rows are not
            transitions and are not stored.

        Returns:
          The number of rows stored.
        """
        keep = ~np.asarray(reset, bool)
        n = int(keep.sum())
        if n == 0:
            return 0
        if n > self.capacity:  # more new rows than room: only the newest ones survive
            keep[np.flatnonzero(keep)[: n - self.capacity]] = False
            n = self.capacity
        rows = (self.insert_pos + np.arange(n)) % self.capacity
        self.obs[rows] = obs[keep]
        self.next_obs[rows] = next_obs[keep]
        self.action[rows] = action[keep]
        self.reward[rows] = reward[keep]
        self.terminated[rows] = terminated[keep]
        self.insert_pos = (self.insert_pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        return n

    def sample(self, batch_size: int) -> Batch:
        """Draw `batch_size` stored transitions uniformly, with replacement.

        Returns:
          A `Batch` of numpy arrays with leading `[batch_size]`; `weight` is all ones and `index`
          holds the sampled rows.

        Raises:
          ValueError: the buffer is empty.
        """
        if self.size == 0:
            raise ValueError("HostReplay.sample: the buffer is empty; add transitions first.")
        idx = self._rng.integers(0, self.size, size=batch_size)
        return Batch(
            obs=self.obs[idx],
            action=self.action[idx],
            reward=self.reward[idx],
            discount=np.where(self.terminated[idx], 0.0, self.gamma).astype(np.float32),
            next_obs=self.next_obs[idx],
            weight=np.ones((batch_size,), np.float32),
            index=idx.astype(np.int32),
        )
