"""The DQN family as configs: each algorithm is a change to a base preset, and its presets.

`ALGORITHMS[name](base) -> TrainConfig` puts an algorithm's parts (value head, loss, exploration,
replay) on `base`, keeping its env, torso, budget and schedules, so two algorithms on one base
differ only in what defines them (`benchmarks/dqn_family.py` compares them so). Their settings
are their source's:

* `dqn`: `base` unchanged.
* `c51` (Bellemare et al. 2017; Dopamine's C51): 51 atoms on [-10, 10], cross-entropy to the
  projected target, Adam eps 3.125e-4 (0.01 / 32).
* `qr-dqn` (Dabney et al. 2018; Dopamine's QR-DQN): 200 quantiles, kappa 1, Adam eps 3.125e-4.
* `iqn` (Dabney et al. 2018b; Dopamine's IQN): implicit quantiles with N = N' = 64, K = 32 and
  a 64-cosine embedding, kappa 1, Adam eps 3.125e-4.
* `m-dqn` (Vieillard et al. 2020): the Munchausen target with alpha 0.9, tau 0.03, l0 -1 and the
  Huber loss.
* `hl-gauss` (Farebrother et al. 2024): 51 bins on [-10, 10], sigma 0.75 bin widths.
* `noisy`: factorised noisy layers (sigma0 0.5, Fortunato et al. 2018), epsilon 0.
* `rainbow` (Dopamine's Rainbow: the three components Hessel et al. found to matter most): C51,
  3-step returns and prioritised replay (alpha 0.5, beta 0.5 fixed, as Dopamine).
* `full-rainbow` (Hessel et al. 2018; Dopamine's full Rainbow): `rainbow` with noisy layers,
  the dueling form of the C51 head and double-Q selection, epsilon 0.

The learning rate stays the base's: the base presets' rates are tuned for their budgets, which
are far shorter than the papers' (200M Atari frames); the Atari presets below use Dopamine's.

Presets (`presets.get`): `ALGORITHM-minatar` on Breakout-MinAtar (the `minatar-breakout` preset,
154k env steps; change the game with `--env.name`), `ALGORITHM-atari-pong` on Pong (the
`atari-pong` preset), and `rainbow-minatar`, the MinAtar settings of "Revisiting Rainbow"
(Obando-Ceron & Castro 2021) within this loop: full Rainbow with 51 atoms on [-100, 100], 3-step
returns, Adam lr 1e-4 and eps 3.125e-4, batch 32, 1,008 env steps of prefill (theirs 1,000),
one update per 4 env steps, a target copy every 1,008 env steps (theirs 1,000), 100k replay,
no epsilon; 16 envs where they step one, and this library's 154k-step budget where they train
10M frames.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from jaxrl_fast.config import TrainConfig

__all__ = ["ALGORITHMS", "PRESETS", "apply"]


def _net(cfg: TrainConfig, **changes) -> TrainConfig:
    return cfg.replace(network=dataclasses.replace(cfg.network, **changes))


def _dqn(cfg: TrainConfig, **changes) -> TrainConfig:
    return cfg.replace(dqn=dataclasses.replace(cfg.dqn, **changes))


def _algo(cfg: TrainConfig, section: str, **changes) -> TrainConfig:
    return cfg.replace(algo={section: changes})


def _no_epsilon(cfg: TrainConfig) -> TrainConfig:
    schedule = dataclasses.replace(cfg.schedule, epsilon_start=0.0, epsilon_end=0.0)
    return cfg.replace(schedule=schedule)


def c51(cfg: TrainConfig) -> TrainConfig:
    cfg = _net(cfg, head="c51")
    cfg = _algo(cfg, "distributional", num_atoms=51, v_min=-10.0, v_max=10.0)
    return _dqn(cfg, loss="c51", adam_eps=3.125e-4)


def qr_dqn(cfg: TrainConfig) -> TrainConfig:
    cfg = _algo(_net(cfg, head="qr-dqn"), "distributional", num_quantiles=200)
    return _dqn(cfg, loss="qr-dqn", huber_delta=1.0, adam_eps=3.125e-4)


def iqn(cfg: TrainConfig) -> TrainConfig:
    cfg = _algo(_net(cfg, head="iqn"), "iqn", samples=(64, 64, 32), embedding=64)
    return _dqn(cfg, loss="iqn", huber_delta=1.0, adam_eps=3.125e-4)


def m_dqn(cfg: TrainConfig) -> TrainConfig:
    cfg = _dqn(cfg, loss="m-dqn", huber_delta=1.0)
    return _algo(cfg, "munchausen", alpha=0.9, tau=0.03, l0=-1.0)


def hl_gauss(cfg: TrainConfig) -> TrainConfig:
    cfg = _net(cfg, head="hl-gauss")
    cfg = _algo(cfg, "distributional", num_atoms=51, v_min=-10.0, v_max=10.0, hl_sigma=0.75)
    return _dqn(cfg, loss="hl-gauss")


def noisy(cfg: TrainConfig) -> TrainConfig:
    return _no_epsilon(_algo(_net(cfg, dense="noisy"), "noisy", sigma0=0.5))


def rainbow(cfg: TrainConfig) -> TrainConfig:
    cfg = c51(cfg)
    replay = dataclasses.replace(cfg.replay, n_step=3, prioritised=True, alpha=0.5, beta=0.5)
    return cfg.replace(replay=replay)


def full_rainbow(cfg: TrainConfig) -> TrainConfig:
    cfg = _dqn(rainbow(cfg), double_q=True)
    return noisy(_net(cfg, dueling=True))


ALGORITHMS: dict[str, Callable[[TrainConfig], TrainConfig]] = {
    "dqn": lambda cfg: cfg,
    "c51": c51,
    "qr-dqn": qr_dqn,
    "iqn": iqn,
    "m-dqn": m_dqn,
    "hl-gauss": hl_gauss,
    "noisy": noisy,
    "rainbow": rainbow,
    "full-rainbow": full_rainbow,
}


def apply(name: str, base: TrainConfig) -> TrainConfig:
    """`base` with algorithm `name`'s parts (module docstring).

    Raises:
      ValueError: an unknown name, listing the known ones.
    """
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; expected one of {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name](base)


def _rainbow_minatar(base: TrainConfig) -> TrainConfig:
    cfg = _algo(full_rainbow(base), "distributional", v_min=-100.0, v_max=100.0)
    cfg = _dqn(cfg, learning_rate=1e-4, adam_eps=3.125e-4, target_period=1_008)
    return cfg.replace(
        replay=dataclasses.replace(cfg.replay, batch_size=32),
        schedule=dataclasses.replace(cfg.schedule, lr_schedule="constant"),
        learning_starts=1_008,
        train_frequency=16,
        updates_per_block=4,
    )


def _dopamine_atari(name: str, base: TrainConfig) -> TrainConfig:
    """Dopamine's Atari optimiser settings for `name` on the `atari-pong` preset: Adam lr
    6.25e-5 / eps 1.5e-4 (Rainbow), 5e-5 / 3.125e-4 (QR-DQN, IQN, M-DQN), 2.5e-4 / 3.125e-4
    (C51)."""
    cfg = apply(name, base)
    lr, eps = {
        "c51": (2.5e-4, 3.125e-4),
        "qr-dqn": (5e-5, 3.125e-4),
        "iqn": (5e-5, 3.125e-4),
        "m-dqn": (5e-5, 3.125e-4),
        "rainbow": (6.25e-5, 1.5e-4),
        "full-rainbow": (6.25e-5, 1.5e-4),
    }[name]
    return _dqn(cfg, learning_rate=lr, adam_eps=eps)


def presets(get: Callable[[str], TrainConfig]) -> dict[str, Callable[[], TrainConfig]]:
    """The family's presets over the base presets `get` returns."""
    out: dict[str, Callable[[], TrainConfig]] = {}
    for name in ("c51", "qr-dqn", "iqn", "m-dqn", "hl-gauss", "noisy"):
        out[f"{name}-minatar"] = lambda n=name: apply(n, get("minatar-breakout"))
    out["rainbow-minatar"] = lambda: _rainbow_minatar(get("minatar-breakout"))
    for name in ("c51", "qr-dqn", "iqn", "m-dqn", "rainbow", "full-rainbow"):
        out[f"{name}-atari-pong"] = lambda n=name: _dopamine_atari(n, get("atari-pong"))
    return out


PRESETS = (
    "c51-minatar", "qr-dqn-minatar", "iqn-minatar", "m-dqn-minatar", "hl-gauss-minatar",
    "noisy-minatar", "rainbow-minatar", "c51-atari-pong", "qr-dqn-atari-pong", "iqn-atari-pong",
    "m-dqn-atari-pong", "rainbow-atari-pong", "full-rainbow-atari-pong",
)  # fmt: skip
