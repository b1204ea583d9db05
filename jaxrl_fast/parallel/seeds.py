"""Seeds as a batch axis: seed vmap / seed map, the choices of how seeds run, key derivation.

Everything here is shared by the fused loop (`loop/loop.py`), its evaluation and the conventional
baseline (`baseline/`), so the two loops derive the same keys and make the same choices:

- `seed_vmap` / `seed_map`: the per-seed work batched (`jax.vmap`) or one seed after another
  (`lax.map`), with the same `in_axes` / `out_axes` meaning (0: per seed, None: shared);
- `SeedChoices` / `resolve_choices`: `TrainConfig.seed_loop` and `NetworkConfig.conv_impl`
  resolved once, for the platform the run is on, at make time (never while tracing);
- `train_keys` / `eval_keys`: the `[S]` keys a config's seeds train and evaluate with.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax

from jaxrl_fast.config import TrainConfig
from jaxrl_fast.types import PRNGKey

SEED_AXIS = "seed"


def seed_vmap(fn: Callable, in_axes: Any, out_axes: Any) -> Callable:
    """`jax.vmap(fn, in_axes, out_axes)` over the seed axis (named `SEED_AXIS`)."""
    return jax.vmap(fn, in_axes=in_axes, out_axes=out_axes, axis_name=SEED_AXIS)


def _axes_of_leaves(axes: Any, tree: Any) -> Any:
    """Expand a vmap-style axes prefix (0 or None per subtree) to one int per leaf of `tree`
    (-1 for None: a value shared by the seeds)."""
    if axes is None or isinstance(axes, int):
        return jax.tree.map(lambda _: -1 if axes is None else axes, tree)
    parts = [_axes_of_leaves(a, t) for a, t in zip(axes, tree, strict=True)]
    return type(tree)(*parts) if hasattr(tree, "_fields") else type(tree)(parts)


def seed_map(fn: Callable, in_axes: Any, out_axes: Any) -> Callable:
    """`seed_vmap(fn, in_axes, out_axes)` computed as a `lax.map`: one seed after another.

    Leaves with axis 0 are split by seed; leaves with axis None are passed whole to every
    seed. An output with axis None is shared by the seeds (the same for each, as vmap
    requires), so the first seed's is returned.

    Raises:
      ValueError: `in_axes` does not match the arguments' structure.
    """

    def mapped(*args):
        leaves, treedef = jax.tree.flatten(args)
        try:
            axes = jax.tree.leaves(_axes_of_leaves(tuple(in_axes), args))
        except (ValueError, TypeError):
            axes = None
        if axes is None or len(axes) != len(leaves):
            raise ValueError(
                f"seed_map: in_axes={in_axes!r} do not match the structure of the {len(args)} "
                f"argument(s)"
            )
        per_seed = [x for x, a in zip(leaves, axes, strict=True) if a == 0]

        def one(xs):
            it = iter(xs)
            full = [next(it) if a == 0 else x for x, a in zip(leaves, axes, strict=True)]
            return fn(*jax.tree.unflatten(treedef, full))

        out = jax.lax.map(one, per_seed)
        out_leaf_axes = _axes_of_leaves(out_axes, out)
        return jax.tree.map(lambda x, a: x if a == 0 else x[0], out, out_leaf_axes)

    return mapped


class SeedChoices(NamedTuple):
    """How a run's seeds and convolutions compute, resolved once.

    Attributes:
      seed_loop: "vmap" (seeds batched) or "map" (one seed after another).
      conv_impl: the Nature torso's `networks.Conv.impl`, never "auto".
    """

    seed_loop: str
    conv_impl: str

    @property
    def seeds_fn(self) -> Callable:
        """`seed_vmap` or `seed_map`, as `seed_loop` says."""
        return seed_vmap if self.seed_loop == "vmap" else seed_map

    def describe(self, config: TrainConfig) -> str:
        """One line for the start of a run, e.g. 'seeds: 4 one after another (lax.map)'."""
        how = "batched (vmap)" if self.seed_loop == "vmap" else "one after another (lax.map)"
        nature = config.network.kind == "nature"
        conv = f", Nature torso conv_impl {self.conv_impl}" if nature else ""
        return f"seeds: {config.num_seeds} {how}{conv}"


def resolve_choices(config: TrainConfig, platform: str, *, fused: bool = True) -> SeedChoices:
    """The `SeedChoices` a config runs with on `platform` ("cpu", "gpu", "tpu").

    `seed_loop="auto"` maps the seeds (one after another) on CPU for the Nature torso: on a
    few cores a batch of seeds runs no faster per FLOP, and vmapped convolutions with a kernel
    per seed become grouped ones, which XLA:CPU runs slowly. `conv_impl="auto"` on CPU is
    conv_canonical_grads inside the fused loop, or patches when several seeds are vmapped
    (`networks.Conv`). A conventional loop (`fused=False`) calls each update on its own, where
    XLA:CPU's plain convolutions are fastest, so "auto" is "conv" there; off the CPU "auto" is
    "conv" too.

    Examples:
      >>> from jaxrl_fast import presets
      >>> resolve_choices(presets.get("cartpole").replace(num_seeds=4), "cpu").seed_loop
      'vmap'
    """
    cpu = platform == "cpu"
    seed_loop = config.seed_loop
    if seed_loop == "auto":
        nature = config.network.kind == "nature"
        seed_loop = "map" if fused and cpu and nature and config.num_seeds > 1 else "vmap"
    conv_impl = config.network.conv_impl
    if conv_impl == "auto":
        if not (fused and cpu):
            conv_impl = "conv"
        elif seed_loop == "vmap" and config.num_seeds > 1:
            conv_impl = "patches"
        else:
            conv_impl = "conv_canonical_grads"
    return SeedChoices(seed_loop=seed_loop, conv_impl=conv_impl)


def base_key(config: TrainConfig) -> PRNGKey:
    """The run's typed root key: `config.seed` under `config.prng_impl`."""
    return jax.random.key(config.seed, impl=config.prng_impl)


def train_keys(config: TrainConfig) -> PRNGKey:
    """`[S]` typed keys, one per seed: seed `i` of a run trains with key `i`."""
    return jax.random.split(base_key(config), config.num_seeds)


def eval_keys(config: TrainConfig) -> PRNGKey:
    """`[S]` typed keys for the final evaluation, independent of the training keys."""
    return jax.random.split(jax.random.fold_in(base_key(config), 1), config.num_seeds)
