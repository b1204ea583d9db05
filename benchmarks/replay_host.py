"""The host numpy baseline of `benchmarks/replay.py`: the "original method" of a typical Python
DQN codebase, written here: a segment-tree PER sampled with a per-sample Python descent and
per-item Python priority updates (`SegmentSumTree`), the same tree vectorised over the batch
(`VectorSumTree`), and a uniform sampler, over numpy views of our ring's rows."""

from __future__ import annotations

import numpy as np
from replay_timing import ALPHA, BATCH, BETA, EPS, Timer, host_timer, td_of

from jaxrl_fast.replay import sum_tree
from jaxrl_fast.replay.tiered import ReplayState


class SegmentSumTree:
    """A sum tree as a typical Python PER codebase writes it: one float64 numpy array, leaf
    `j` at `size + j`, one Python walk per sampled item and per updated priority."""

    def __init__(self, capacity: int):
        self.size = 1
        while self.size < capacity:
            self.size *= 2
        self.tree = np.zeros(2 * self.size, np.float64)

    def total(self) -> float:
        return self.tree[1]

    def __setitem__(self, idx: int, value: float) -> None:
        node = idx + self.size
        self.tree[node] = value
        node //= 2
        while node >= 1:
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]
            node //= 2

    def __getitem__(self, idx: int) -> float:
        return self.tree[idx + self.size]

    def find_prefixsum_idx(self, mass: float) -> int:
        node = 1
        while node < self.size:
            if self.tree[2 * node] > mass:
                node = 2 * node
            else:
                mass -= self.tree[2 * node]
                node = 2 * node + 1
        return node - self.size

    def rebuild(self) -> None:
        """Recompute every parent from the leaves (after writing leaves directly)."""
        level = self.size // 2
        while level >= 1:
            n = np.arange(level, 2 * level)
            self.tree[n] = self.tree[2 * n] + self.tree[2 * n + 1]
            level //= 2


class VectorSumTree(SegmentSumTree):
    """The same tree with the descent and the update vectorised over the batch in numpy."""

    def find(self, mass: np.ndarray) -> np.ndarray:
        node = np.ones(mass.shape, np.int64)
        while node[0] < self.size:  # every node is at the same depth
            left = self.tree[2 * node]
            right = mass >= left
            mass = np.where(right, mass - left, mass)
            node = 2 * node + right
        return node - self.size

    def set(self, idx: np.ndarray, value: np.ndarray) -> None:
        node = idx + self.size
        self.tree[node] = value
        while node[0] > 1:
            node = node // 2
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]


def host_timers(state: ReplayState, num_envs: int, capacity: int, iters: int) -> dict[str, Timer]:
    """Host samplers on numpy views of our ring's rows (row `r`'s next row is `r + E`)."""
    ring = state.ring
    obs = np.asarray(ring.obs).reshape(capacity, *ring.obs.shape[2:])  # a view, no copy
    action = np.asarray(ring.action).reshape(capacity)
    reward = np.asarray(ring.reward).reshape(capacity)
    discount = np.asarray(ring.discount).reshape(capacity)
    prios = np.asarray(sum_tree.leaves(state.priorities, capacity), np.float64)
    rng = np.random.default_rng(0)

    def gather(idx):
        nxt = (idx + num_envs) % capacity
        return obs[idx], action[idx], reward[idx], discount[idx], obs[nxt]

    def per_host(tree, sample_idx, update):
        def step(i):
            seg = tree.total() / BATCH
            mass = (np.arange(BATCH) + rng.random(BATCH)) * seg
            idx = np.minimum(sample_idx(mass), capacity - 1)  # float rounding at the end
            o, a, r, d, o2 = gather(idx)
            p = tree.tree[idx + tree.size] / tree.total()
            w = (capacity * p) ** -BETA
            w /= w.max()
            td = td_of(r, o, o2, i, xp=np)
            update(idx, (np.abs(td) + EPS) ** ALPHA)
            return float(np.sum(w * td) + 1e-3 * np.sum(d + a))

        return step

    py, vec = SegmentSumTree(capacity), VectorSumTree(capacity)
    for t in (py, vec):  # the same priorities as ours
        t.tree[t.size : t.size + capacity] = prios
        t.rebuild()

    def py_sample(mass):
        return np.array([py.find_prefixsum_idx(m) for m in mass.tolist()], np.int64)

    def py_update(idx, value):
        for j, v in zip(idx.tolist(), value.tolist(), strict=True):
            py[j] = v

    def uniform(i):
        idx = rng.integers(0, capacity, BATCH)
        o, a, r, d, o2 = gather(idx)
        return float(np.sum(td_of(r, o, o2, i, xp=np)) + 1e-3 * np.sum(d + a))

    return {
        # ~10-20 ms per iteration at 1e6 rows: fewer iterations per round
        "numpy_tree_python": host_timer(per_host(py, py_sample, py_update), max(5, iters // 5)),
        "numpy_tree_vectorised": host_timer(per_host(vec, vec.find, vec.set), iters),
        "numpy_uniform": host_timer(uniform, iters),
    }


# ---- driver ------------------------------------------------------------------------------------
