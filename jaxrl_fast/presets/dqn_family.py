"""The DQN family as configs: each algorithm is a change to a base preset, and its presets.

`ALGORITHMS[name](base) -> TrainConfig` puts an algorithm's parts (value head, loss, exploration,
replay) on `base`, keeping its env, torso, budget and schedules, so two algorithms on one base
differ only in what defines them (`benchmarks/dqn_family.py` compares them so). Their settings
are their source's; C51, QR-DQN, IQN and Rainbow bootstrap from the target network's own greedy
action (no double Q), as Dopamine's agents of those names:

* `dqn`: `base` unchanged.
* `c51` (Bellemare et al. 2017; Dopamine's C51): 51 atoms on [-v_max, v_max], cross-entropy to
  the projected target, Adam eps 3.125e-4 (0.01 / 32).
* `qr-dqn` (Dabney et al. 2018; Dopamine's QR-DQN): 200 quantiles, kappa 1, Adam eps 3.125e-4.
* `iqn` (Dabney et al. 2018b; Dopamine's IQN): implicit quantiles with N = N' = 64, K = 32 and
  a 64-cosine embedding, kappa 1, Adam eps 3.125e-4.
* `m-dqn` (Vieillard et al. 2020): the Munchausen target with alpha 0.9, tau 0.03, l0 -1 and the
  Huber loss.
* `hl-gauss` (Farebrother et al. 2024): 51 bins on [-v_max, v_max], sigma 0.75 bin widths.
* `noisy`: factorised noisy layers (Fortunato et al. 2018: sigma0 0.5, mean weights uniform in
  +-1/sqrt(fan-in)), epsilon 0.
* `rainbow` (Dopamine's Rainbow: the three components Hessel et al. found to matter most): C51,
  3-step returns and prioritised replay as Dopamine's: priorities `sqrt(loss + 1e-10)` (alpha
  0.5, eps 1e-10) and weights `1 / sqrt(P)` over their largest (beta 0.5, fixed).
* `full-rainbow` (Hessel et al. 2018; Dopamine's full Rainbow): `rainbow` with noisy layers,
  the dueling form of the C51 head and double-Q selection, epsilon 0.

`v_max` is the return scale of the base's env (`EnvConfig.return_scale`, or
`apply(name, base, v_max=)`): 10 for Atari's clipped rewards (Dopamine's), 100 for MinAtar's
unclipped returns (Revisiting Rainbow's MinAtar configs, `vmax = 100.`) and classic control.
The learning rate stays the base's: the base presets' rates are tuned
for their budgets, which are far shorter than the papers' (200M Atari frames); the Atari presets
below use Dopamine's.

Presets (`presets.get`): `ALGORITHM-minatar` on Breakout-MinAtar (the `minatar-breakout` preset,
154k env steps, support [-100, 100]; change the game with `--env.name`), `ALGORITHM-atari-pong`
on Pong (Dopamine's agent and Atari protocol over the `atari-pong` preset's env, `DOPAMINE_ATARI`
and `DOPAMINE_ATARI_DIFFERS`), and `rainbow-minatar`, Revisiting Rainbow's MinAtar Rainbow
field by field (`REFERENCES`; `RAINBOW_MINATAR_DIFFERS` lists what differs and why).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from jaxrl_fast.config import TrainConfig

__all__ = [
    "ALGORITHMS",
    "DOPAMINE_ATARI",
    "DOPAMINE_ATARI_DIFFERS",
    "PRESETS",
    "RAINBOW_MINATAR_DIFFERS",
    "REFERENCES",
    "apply",
]

# Where each preset's settings come from: the paper and the config file (repository, path and
# commit) its fields copy. tests/presets/test_dqn_family.py holds each preset against that file's
# values.
REFERENCES = {
    "rainbow-minatar": "Obando-Ceron & Castro 2021, 'Revisiting Rainbow'; JohanSamir/"
    "revisiting_rainbow revisiting_rainbow/Configs/rainbow_breakout.gin @ 521a3c2 (its four "
    "MinAtar rainbow_*.gin differ only in the game), over Dopamine's JaxDQNAgent defaults",
    "c51-atari-pong": "Bellemare et al. 2017; google/dopamine "
    "dopamine/jax/agents/rainbow/configs/c51.gin @ 9f616b9",
    "qr-dqn-atari-pong": "Dabney et al. 2018; google/dopamine "
    "dopamine/jax/agents/quantile/configs/quantile.gin @ 8e49949",
    "iqn-atari-pong": "Dabney et al. 2018b; google/dopamine "
    "dopamine/jax/agents/implicit_quantile/configs/implicit_quantile.gin @ 9f616b9",
    "rainbow-atari-pong": "Hessel et al. 2018; google/dopamine "
    "dopamine/jax/agents/rainbow/configs/rainbow.gin @ 9f616b9",
    "full-rainbow-atari-pong": "Hessel et al. 2018; google/dopamine "
    "dopamine/jax/agents/full_rainbow/configs/full_rainbow.gin @ 1ee6fab",
}

# `rainbow-minatar`'s fields that are not Revisiting Rainbow's, each with why.
RAINBOW_MINATAR_DIFFERS = {
    "env.num_envs": "16 envs stepped at once where they step one: the update-to-data ratio is "
    "kept (one update per 4 env steps), the speed is this loop's",
    "learning_starts": "1,008 (theirs 1,000): a whole number of 16-env blocks",
    "dqn.target_period": "1,008 env steps (theirs 1,000): a whole number of blocks",
    "network": "conv 3x3 of 16 channels straight to the output, as theirs (hidden_layer = 0); "
    "their conv kernel is (3, 3, 3) over the frame's channels as a third axis and their layers "
    "Xavier-uniform, ours a 2-D conv over all channels and He-normal",
    "schedule.epsilon_fraction": "epsilon 1 -> 0.01 over 250k env steps (Dopamine's "
    "epsilon_decay_period: a 0.025 share of the 10M `schedule.horizon`, so a shortened run keeps "
    "it); theirs starts decaying after the 1,000 prefill steps, ours at step 0",
    "replay.sampler": "proportional draws; Dopamine's sum tree draws one per stratum",
}


def _net(cfg: TrainConfig, **changes) -> TrainConfig:
    return cfg.replace(network=dataclasses.replace(cfg.network, **changes))


def _dqn(cfg: TrainConfig, **changes) -> TrainConfig:
    return cfg.replace(dqn=dataclasses.replace(cfg.dqn, **changes))


def _algo(cfg: TrainConfig, section: str, **changes) -> TrainConfig:
    return cfg.replace(algo={section: changes})


def _no_epsilon(cfg: TrainConfig) -> TrainConfig:
    schedule = dataclasses.replace(cfg.schedule, epsilon_start=0.0, epsilon_end=0.0)
    return cfg.replace(schedule=schedule)


def c51(cfg: TrainConfig, v_max: float = 10.0) -> TrainConfig:
    cfg = _net(cfg, head="c51")
    cfg = _algo(cfg, "distributional", num_atoms=51, v_min=-v_max, v_max=v_max)
    return _dqn(cfg, loss="c51", adam_eps=3.125e-4, double_q=False)


def qr_dqn(cfg: TrainConfig) -> TrainConfig:
    cfg = _algo(_net(cfg, head="qr-dqn"), "distributional", num_quantiles=200)
    return _dqn(cfg, loss="qr-dqn", huber_delta=1.0, adam_eps=3.125e-4, double_q=False)


def iqn(cfg: TrainConfig) -> TrainConfig:
    cfg = _algo(_net(cfg, head="iqn"), "iqn", samples=(64, 64, 32), embedding=64)
    return _dqn(cfg, loss="iqn", huber_delta=1.0, adam_eps=3.125e-4, double_q=False)


def m_dqn(cfg: TrainConfig) -> TrainConfig:
    cfg = _dqn(cfg, loss="m-dqn", huber_delta=1.0)
    return _algo(cfg, "munchausen", alpha=0.9, tau=0.03, l0=-1.0)


def hl_gauss(cfg: TrainConfig, v_max: float = 10.0) -> TrainConfig:
    cfg = _net(cfg, head="hl-gauss")
    support = dict(num_atoms=51, v_min=-v_max, v_max=v_max, hl_sigma=0.75)
    return _dqn(_algo(cfg, "distributional", **support), loss="hl-gauss")


def noisy(cfg: TrainConfig) -> TrainConfig:
    cfg = _algo(_net(cfg, dense="noisy"), "noisy", sigma0=0.5, mu_init="uniform")
    return _no_epsilon(cfg)


def rainbow(cfg: TrainConfig, v_max: float = 10.0) -> TrainConfig:
    cfg = c51(cfg, v_max)
    replay = dataclasses.replace(
        cfg.replay,
        n_step=3,
        prioritised=True,
        alpha=0.5,
        priority_eps=1e-10,
        beta=0.5,
        beta_anneal=False,
    )
    return cfg.replace(replay=replay)


def full_rainbow(cfg: TrainConfig, v_max: float = 10.0) -> TrainConfig:
    cfg = _dqn(rainbow(cfg, v_max), double_q=True)
    return noisy(_net(cfg, dueling=True))


ALGORITHMS: dict[str, Callable[..., TrainConfig]] = {
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


_SUPPORTED = ("c51", "hl-gauss", "rainbow", "full-rainbow")  # the heads with a fixed support


def apply(name: str, base: TrainConfig, v_max: float | None = None) -> TrainConfig:
    """`base` with algorithm `name`'s parts (module docstring); a categorical head's support is
    `[-v_max, v_max]` (None: `base.env.return_scale`, the return scale of its env).

    Raises:
      ValueError: an unknown name, listing the known ones.
    """
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; expected one of {', '.join(ALGORITHMS)}")
    if name in _SUPPORTED:
        return ALGORITHMS[name](base, base.env.return_scale if v_max is None else v_max)
    return ALGORITHMS[name](base)


def _rainbow_minatar(base: TrainConfig) -> TrainConfig:
    """Revisiting Rainbow's MinAtar Rainbow (`REFERENCES`): C51 (51 atoms on [-100, 100]),
    3-step returns, Dopamine's PER; no noisy layers, no dueling, no double Q; Adam lr 1e-4 eps
    3.125e-4 (constant), no gradient clip, batch 32, gamma 0.99, one update per 4 env steps,
    a target copy every 1,000 env steps, 1,000 prefill steps, 100k replay, epsilon 1 -> 0.01
    over 250k env steps (0.001 at evaluation), 10M env steps; a conv of 16 channels straight to
    the output. What differs: `RAINBOW_MINATAR_DIFFERS`."""
    cfg = apply("rainbow", base, v_max=100.0)  # their `vmax = 100.`
    cfg = _dqn(cfg, learning_rate=1e-4, adam_eps=3.125e-4, target_period=1_008, gamma=0.99,
               double_q=False, max_grad_norm=None)  # fmt: skip
    total = 10_000_000
    return cfg.replace(
        network=dataclasses.replace(cfg.network, conv_channels=(16,), hidden_sizes=()),
        replay=dataclasses.replace(cfg.replay, capacity=100_000, batch_size=32),
        schedule=dataclasses.replace(
            cfg.schedule,
            epsilon_start=1.0,
            epsilon_end=0.01,
            epsilon_fraction=250_000 / total,
            lr_schedule="constant",
            horizon=total,  # a shortened run keeps the 250k-step decay
        ),
        eval_epsilon=0.001,
        learning_starts=1_008,
        train_frequency=16,
        updates_per_block=4,
        total_env_steps=total,
    )


# Dopamine's JAX agents on Atari, per agent (its `configs/<agent>.gin`, `REFERENCES`): Adam's lr
# and eps, the n of n-step returns, prioritised replay; M-DQN has no Dopamine config (its
# optimiser settings are Dopamine's QR-DQN/IQN ones; uniform 1-step replay, as the paper).
DOPAMINE_ATARI = {
    "c51": (2.5e-4, 3.125e-4, 1, False),
    "qr-dqn": (5e-5, 3.125e-4, 3, True),
    "iqn": (5e-5, 3.125e-4, 3, False),
    "m-dqn": (5e-5, 3.125e-4, 1, False),
    "rainbow": (6.25e-5, 1.5e-4, 3, True),
    "full-rainbow": (6.25e-5, 1.5e-4, 3, True),
}

# The Dopamine Atari presets' fields that are not Dopamine's, each with why.
DOPAMINE_ATARI_DIFFERS = {
    "env.num_envs": "8 envs stepped at once where Dopamine steps one: one update per 4 env "
    "steps is kept, the speed is this loop's",
    "replay.capacity": "100k rows (frame-deduplicated, 0.7 GB) where Dopamine keeps 1M: memory",
    "total_env_steps": "400k env steps (1.6M frames) where Dopamine trains 50M (200 x 250k): a "
    "CPU's budget; the epsilon decay stays 250k env steps (`schedule.horizon` 50M)",
    "replay.sampler": "proportional draws; Dopamine's sum tree draws one per stratum",
    "schedule.epsilon_fraction": "the decay starts at step 0; Dopamine's after the 20k prefill",
    "schedule.epsilon_start": "full Rainbow: epsilon 0 beside its noisy layers, and a uniform "
    "prefill; Dopamine's keeps epsilon_train 0.01 throughout (`identity_epsilon`), prefill "
    "included",
}


def _dopamine_atari(name: str, base: TrainConfig) -> TrainConfig:
    """`name` on the `atari-pong` preset with Dopamine's Atari protocol (`REFERENCES`): its
    optimiser, n-step and replay scheme (`DOPAMINE_ATARI`), one update per 4 env steps, a target
    copy every 8,000, 20k prefill steps, batch 32, no gradient clip, epsilon 1 -> 0.01 over 250k
    env steps (0.001 at evaluation), sticky actions (p 0.25), no life-loss terminals and no
    no-op starts, games cut at 27,000 agent steps. What differs: `DOPAMINE_ATARI_DIFFERS`."""
    lr, eps, n, per = DOPAMINE_ATARI[name]
    cfg = apply(name, base)
    cfg = _dqn(cfg, learning_rate=lr, adam_eps=eps, gamma=0.99, target_period=8_000,
               max_grad_norm=None)  # fmt: skip
    replay = dataclasses.replace(cfg.replay, n_step=n, batch_size=32, prioritised=per)
    if per:  # Dopamine's: priorities sqrt(loss + 1e-10), weights 1 / sqrt(P) (beta 0.5 fixed)
        replay = dataclasses.replace(
            replay, alpha=0.5, priority_eps=1e-10, beta=0.5, beta_anneal=False
        )
    atari = dataclasses.replace(
        cfg.env.atari,
        sticky_actions=True,
        episodic_life=False,
        noop_max=0,
        max_episode_frames=27_000 * 4,
    )
    horizon = 50_000_000
    epsilon = {"epsilon_start": 1.0, "epsilon_end": 0.01, "epsilon_fraction": 250_000 / horizon}
    if cfg.network.dense == "noisy":  # Dopamine's full Rainbow: no epsilon with noisy nets
        epsilon = {"epsilon_start": 0.0, "epsilon_end": 0.0, "epsilon_fraction": 1.0}
    return cfg.replace(
        env=dataclasses.replace(cfg.env, atari=atari),
        replay=replay,
        schedule=dataclasses.replace(
            cfg.schedule, **epsilon, lr_schedule="constant", horizon=horizon
        ),
        eval_epsilon=0.001,
        learning_starts=20_000,
        train_frequency=cfg.env.num_envs * 4,
        updates_per_block=cfg.env.num_envs,
    )


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
