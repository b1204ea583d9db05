"""The optimiser: Adam with global-norm clipping, 1-bit Adam over data replicas, the
precision policy's skip of non-finite steps; built from a seed's traced `HParams`."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import optax

from jaxrl_fast.agent import precision as mp
from jaxrl_fast.config import DQNConfig
from jaxrl_fast.config.hparams import HParams
from jaxrl_fast.parallel.exchange import Exchange
from jaxrl_fast.parallel.onebit import onebit_adam

_OPTIMIZERS = {"adam": optax.adam, "radam": optax.radam}  # DQNConfig.optimizer


def make_optimizer(
    config: DQNConfig, learning_rate, exchange: Exchange | None = None, max_norm=None
) -> optax.GradientTransformation:
    """Adam (or RAdam: `config.optimizer`) with global-norm clipping before it; 1-bit Adam
    over data replicas when `exchange` compresses (clipping then acts on each replica's local
    gradient). `max_norm` (traced) overrides `config.max_grad_norm` (a seed that does not clip
    among seeds that do has `inf`: its gradients pass bitwise unchanged); with neither, no
    clip."""
    onebit = exchange is not None and exchange.onebit
    if onebit and config.optimizer != "adam":
        raise ValueError(
            f"DQNConfig.optimizer={config.optimizer!r}: the 1-bit exchange "
            "(ParallelConfig) compresses Adam's moments; use optimizer='adam' with it."
        )
    if onebit:
        adam = onebit_adam(
            learning_rate,
            axis=exchange.axis,
            warmup_updates=exchange.warmup_updates,
            eps=config.adam_eps,
        )
    else:
        adam = _OPTIMIZERS[config.optimizer](learning_rate, eps=config.adam_eps)
    if max_norm is None:
        max_norm = config.max_grad_norm
    if max_norm is None:
        return adam
    return optax.chain(optax.clip_by_global_norm(max_norm), adam)


def optimizer_of(config: DQNConfig, learning_rate, exchange: Exchange, precision, clip: bool):
    """`hp -> optimiser` of a seed's hyperparameters (its structure never depends on them);
    `learning_rate` a `(count, hp) -> lr` schedule, a float, or None (`hp.learning_rate`)."""
    if learning_rate is None or not callable(learning_rate):
        constant = learning_rate

        def learning_rate(count, hp):
            return jnp.asarray(hp.learning_rate if constant is None else constant, jnp.float32)

    def optimizer(hp: HParams) -> optax.GradientTransformation:
        lr = lambda count: learning_rate(count, hp)  # noqa: E731
        if clip:
            tx = make_optimizer(config, lr, exchange, hp.max_grad_norm)
        else:  # no seed clips: no clip transformation
            tx = make_optimizer(dataclasses.replace(config, max_grad_norm=None), lr, exchange)
        return mp.skip_nonfinite(tx, exchange.all) if precision.skip_nonfinite else tx

    return optimizer
