"""Named `TrainConfig` presets.

* `cartpole` (default): tuned for wall time to solve CartPole-v1 on a small CPU.
* `cartpole-cleanrl`: exactly the CleanRL / PureJaxRL DQN hyperparameters (10 envs, buffer 10,000,
  batch 128, lr 2.5e-4, learning starts 10,000, one update per 10 env steps, target copy every 500
  env steps, epsilon 1 -> 0.05 over half the run, gamma 0.99, MLP 120-84, MSE loss, no double-Q,
  no gradient clipping, 500k env steps).
* `acrobot`: the `cartpole` settings on Acrobot-v1 (201k env steps).
* `catch`: the `cartpole` settings on Catch-bsuite, 51k env steps.
* `pendulum-discrete`: the `cartpole` settings on Pendulum-v1, its torque discretised into 9
  values (`EnvConfig.discretise=9`), 201k env steps.
* `reacher-81`: the article's 2-joint arm: gymnax Reacher-misc with 9 torques per joint, their
  joint grid of 81 actions; the `cartpole` settings with gamma 0.95, 401k env steps.
* `mountaincar-shaped`: the `cartpole` settings on MountainCar-v0 with potential-based reward
  shaping by the car's energy (`EnvConfig.reward_shaping="potential:mountaincar-energy"`), 301k
  env steps.
* `mountaincar-curriculum`: the `cartpole` settings on MountainCar-v0 with a curriculum on the
  engine's force (0.0025 down to the env's own 0.001, advanced per seed by return), 301k env
  steps.
* `cartpole-poles`: CartPole with 4 pole lengths (0.25, 0.5, 1, 2 m) as `EnvConfig.variants`,
  2 seeds each, in one program.
* `article-recipe`: the seed article's training recipe (`article_recipe`) over the `cartpole`
  preset: Adam lr 3e-4 with cosine annealing restarted every tenth of the run, gamma 0.99 for
  the first 30% of the run, 0.95 for the next 40%, 0.9 for the last 30%, epsilon 1.0 x 0.995
  every 1,000 env steps down to 0.01, gradient clipping at norm 1.0 (He-normal hidden layers and
  a 0.01-std output layer are every network's init). `benchmarks/article_recipe.py` compares it
  with the presets on CartPole and MinAtar.
* `minatar-breakout`: Breakout-MinAtar, CNN (3x3 conv 16 channels, dense 128), 16 envs, 100k
  replay, 2 updates per 16 env steps, lr 2.5e-4 decayed linearly to 0, 154k env steps.
* `minatar-space-invaders`: the `minatar-breakout` settings on SpaceInvaders-MinAtar.
* `minatar-freeway`: the `minatar-breakout` settings on Freeway-MinAtar, 106k env steps.
* `atari-pong`, `atari-breakout` (the `atari` extra): Nature-DQN settings (84x84 grayscale,
  4-frame stacks, frame skip 4, up to 30 no-op starts, episodic life, reward clipping, Nature
  CNN, batch 32, gamma 0.99, Huber loss, double Q) scaled for a 2-core CPU: 8 envs, 100k replay
  (frame-deduplicated: 0.7 GB), 3-step returns, Adam lr 1e-4 (eps 1.5e-4, as Dopamine), one
  update per 8 env steps (Nature: per 4), target copy every 1,000 updates, epsilon 1 -> 0.01
  over the first 25% of the run, 400k env steps (1.6M frames; Nature: 50M); evaluated
  epsilon-greedily with epsilon 0.05, as in Nature.

* The DQN family (`jaxrl_fast.dqn_family`): `c51-minatar`, `qr-dqn-minatar`, `iqn-minatar`,
  `m-dqn-minatar`, `hl-gauss-minatar`, `noisy-minatar` (an algorithm's parts on
  `minatar-breakout`), `rainbow-minatar` ("Revisiting Rainbow"'s MinAtar settings), and
  `c51-atari-pong`, `qr-dqn-atari-pong`, `iqn-atari-pong`, `m-dqn-atari-pong`,
  `rainbow-atari-pong`, `full-rainbow-atari-pong` (Dopamine's settings on `atari-pong`).
* PQN (`jaxrl_fast.pqn`): `pqn-cartpole`, `pqn-minatar-<game>`, `pqn-atari-pong` (purejaxql's).
* Board games (`jaxrl_fast.board_presets`): `connect-four`, `selfplay-connect-four`.

Each gymnax preset was checked to learn with 2 seeds (both seeds' final greedy return well above
a random policy's); its function's comment gives the measured returns and wall time.
`python benchmarks/presets.py` re-measures them all. The Atari presets are measured by
`python benchmarks/atari.py --learn` (`benchmarks/results/atari/atari.md`).
"""

from __future__ import annotations

import difflib
from typing import Callable

from jaxrl_fast import board_presets, dqn_family, pqn
from jaxrl_fast.config import (
    DQNConfig,
    EnvConfig,
    NetworkConfig,
    ReplayConfig,
    ScheduleConfig,
    TrainConfig,
)


def _cartpole_cleanrl() -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name="CartPole-v1", num_envs=10),
        network=NetworkConfig(kind="mlp", hidden_sizes=(120, 84)),
        replay=ReplayConfig(capacity=10_000, batch_size=128),
        dqn=DQNConfig(
            gamma=0.99,
            learning_rate=2.5e-4,
            double_q=False,
            loss="mse",
            target_period=500,
            tau=1.0,
            max_grad_norm=None,
        ),
        schedule=ScheduleConfig(epsilon_start=1.0, epsilon_end=0.05, epsilon_fraction=0.5),
        total_env_steps=500_000,
        learning_starts=10_000,
        train_frequency=10,
    )


def _quick_mlp() -> TrainConfig:
    # Tuned for wall time to a solved agent; what differs from CleanRL's settings: short prefill,
    # double-Q, clipping, a higher learning rate decayed linearly to 0 (a stable final greedy
    # policy) and a faster epsilon decay. The base of `acrobot` and `catch`.
    return _cartpole_cleanrl().replace(
        dqn={"learning_rate": 1e-3, "double_q": True, "max_grad_norm": 10.0},
        schedule={"epsilon_fraction": 0.25, "lr_schedule": "linear", "lr_end_fraction": 0.0},
        total_env_steps=201_000,
        learning_starts=1_000,
    )


def _cartpole() -> TrainConfig:
    # The default: `_quick_mlp` with 3-step returns and epsilon at its floor after 10% of the run,
    # which solve in fewer updates: 151k env steps (15k updates). Chosen on base seed 0 (8 seeds);
    # benchmarks/results/solve_rate/solve_rate.md: 37 of 40 seeds (base seeds 0-4) end solved,
    # against 26 of
    # 40 with the `_quick_mlp` settings at 201k steps.
    return _quick_mlp().replace(
        replay={"n_step": 3},
        schedule={"epsilon_fraction": 0.1},
        total_env_steps=151_000,
    )


def _acrobot() -> TrainConfig:
    # `_quick_mlp` settings on Acrobot-v1. benchmarks/results/presets/presets.md, 201k steps:
    # 2-seed final
    # greedy -90.0, -105.4 (random -500), 11 s wall incl. compile on a 2-core CPU.
    return _quick_mlp().replace(env={"name": "Acrobot-v1"})


def _catch() -> TrainConfig:
    # `_quick_mlp` settings on Catch-bsuite, 51k steps. benchmarks/results/presets/presets.md:
    # 2-seed final
    # greedy 1.0, 1.0 (the maximum; random -0.59), 6.5 s wall incl. compile on a 2-core CPU.
    return _quick_mlp().replace(env={"name": "Catch-bsuite"}, total_env_steps=51_000)


def _pendulum_discrete() -> TrainConfig:
    # `cartpole` settings on Pendulum-v1 with its torque in 9 values (-2, -1.5, ..., 2), 201k
    # env steps. 2 seeds while choosing: final greedy -141.4, -202.0 (gamma 0.95: -130.8,
    # -176.2), 7.8 s wall on a 2-core CPU; benchmarks/results/applications/applications.md for 4
    # seeds
    # against a random policy and a scripted swing-up controller.
    return _cartpole().replace(
        env={"name": "Pendulum-v1", "discretise": 9}, total_env_steps=201_000
    )


def _reacher_81() -> TrainConfig:
    # The article's arm: gymnax Reacher-misc (2 links, torques in [-1, 1]) with 9 values per
    # joint, 81 actions; `cartpole` settings with gamma 0.95 and 401k env steps. While choosing
    # (2 seeds): gamma 0.99 at 201k 17.6, 26.3; gamma 0.95 at 201k 39.7, 46.5; gamma 0.95 at
    # 401k 50.2, 49.2 (19 s wall on a 2-core CPU). Rewards are exp(-distance^2) per step over
    # 100-step episodes with a fixed goal, so the short horizon of gamma 0.95 fits the task.
    return _cartpole().replace(
        env={"name": "Reacher-misc", "discretise": 9},
        dqn={"gamma": 0.95},
        total_env_steps=401_000,
    )


def _mountaincar_shaped() -> TrainConfig:
    # `cartpole` settings on MountainCar-v0 (reward -1 per step until the flag) with
    # potential-based shaping by the car's mechanical energy, 301k env steps. While choosing
    # (4 seeds): unshaped -200.0, -197.7, -200.0, -200.0 (never out of the valley); energy x 10
    # -137.1 and 3 x -200.0; energy x 100 (the built-in) -116.9, -126.1, -116.9, -136.6.
    return _cartpole().replace(
        env={"name": "MountainCar-v0", "reward_shaping": "potential:mountaincar-energy"},
        total_env_steps=301_000,
    )


def _mountaincar_curriculum() -> TrainConfig:
    # `cartpole` settings on MountainCar-v0 (unshaped) with a curriculum on the engine's force:
    # from 0.0025 (drives straight up) to the env's own 0.001 in 5 stages, a seed moving on
    # after a block whose episodes average -150 or better; evaluated at 0.001. 301k env steps.
    # While choosing (4 seeds): final greedy -110.7, -99.1, -200.0 (that seed never left the
    # first stage), -109.7; trained on 0.001 directly: none solved
    # (benchmarks/results/applications/applications.md).
    return _cartpole().replace(
        env={
            "name": "MountainCar-v0",
            "curriculum": {
                "param": "force",
                "start": 0.0025,
                "end": 0.001,
                "stages": 5,
                "advance": "return",
                "success_return": -150.0,
            },
        },
        total_env_steps=301_000,
    )


def _cartpole_poles() -> TrainConfig:
    # Four CartPole variants in one program (the article's many policies at once): pole
    # lengths 0.25, 0.5 (the env's own), 1 and 2 m, 2 seeds each (seed i on variant i mod 4);
    # the `cartpole` settings. benchmarks/results/applications/applications.md gives results per
    # variant.
    return _cartpole().replace(
        env={
            "variants": ";".join(
                f"length={x:g},polemass_length={0.1 * x:g}" for x in (0.25, 0.5, 1.0, 2.0)
            )
        },
        num_seeds=8,
    )


def _memorychain_lstm() -> TrainConfig:
    # MemoryChain-bsuite (memory length 5): the context bit is shown at the episode's start and
    # asked for 5 steps later (+1 right, -1 wrong). A 32-wide LSTM on 8-step sequences (the
    # 6-step episodes fit) from the stored state; 40k env steps. An MLP stays at chance (0):
    # benchmarks/results/applications/applications.md ("recurrent").
    return TrainConfig(
        env=EnvConfig(name="MemoryChain-bsuite", num_envs=8),
        network=NetworkConfig(kind="mlp", hidden_sizes=(64,), lstm=32),
        replay=ReplayConfig(capacity=16_000, batch_size=32, sequence_length=8),
        dqn=DQNConfig(learning_rate=1e-3, gamma=0.99, target_period=400),
        total_env_steps=40_000,
        learning_starts=800,
        train_frequency=8,
        num_seeds=2,
        eval_episodes=50,
    )


def _cartpole_hidden_lstm() -> TrainConfig:
    # CartPole seeing only the cart's position and the pole's angle (`observe=(0, 2)`): the
    # velocities must be inferred from the last steps. The `cartpole` settings with a 64-wide
    # torso and LSTM on sequences of 4 burn-in + 8 trained steps (32 per batch), 1-step returns,
    # a target copy every 2,000 env steps, 201k env steps. Chosen on 2-4 seeds of base seed 0
    # against n_step 3, Huber, target every 500, 16-step sequences (benchmarks/results/
    # applications.md, "recurrent", for the MLPs beside it).
    return _cartpole().replace(
        env={"observe": (0, 2)},
        network={"hidden_sizes": (64,), "lstm": 64},
        replay={"n_step": 1, "sequence_length": 8, "burn_in": 4, "batch_size": 32},
        dqn={"target_period": 2000},
        total_env_steps=201_000,
    )


def _minatar_base(name: str) -> TrainConfig:
    # Shared MinAtar settings: 16 envs, 3x3 conv 16 channels + dense 128, 100k replay, two updates
    # per 16 env steps, lr 2.5e-4 decayed linearly to 0, epsilon 1 -> 0.05 over 20% of the run.
    return TrainConfig(
        env=EnvConfig(name=name, num_envs=16),
        network=NetworkConfig(kind="cnn", conv_channels=(16,), hidden_sizes=(128,)),
        replay=ReplayConfig(capacity=100_000, batch_size=64),
        dqn=DQNConfig(
            gamma=0.99,
            learning_rate=2.5e-4,
            double_q=True,
            loss="mse",
            target_period=1_024,
            max_grad_norm=10.0,
        ),
        schedule=ScheduleConfig(
            epsilon_start=1.0,
            epsilon_end=0.05,
            epsilon_fraction=0.2,
            lr_schedule="linear",
            lr_end_fraction=0.0,
        ),
        total_env_steps=154_000,
        learning_starts=10_000,
        train_frequency=16,
        updates_per_block=2,
    )


def _minatar_breakout() -> TrainConfig:
    # benchmarks/results/presets/presets.md, 154k steps: 2-seed final greedy 8.7, 5.2 (random 0.36),
    # 73 s wall incl. compile on a 2-core CPU.
    return _minatar_base("Breakout-MinAtar")


def _minatar_space_invaders() -> TrainConfig:
    # benchmarks/results/presets/presets.md, 154k steps: 2-seed final greedy 23.0, 23.0 (random
    # 4.2),
    # 103 s wall incl. compile on a 2-core CPU.
    return _minatar_base("SpaceInvaders-MinAtar")


def _minatar_freeway() -> TrainConfig:
    # benchmarks/results/presets/presets.md, 106k steps: 2-seed final greedy 25.6, 35.2 (random
    # 0.53),
    # 72 s wall incl. compile on a 2-core CPU.
    return _minatar_base("Freeway-MinAtar").replace(total_env_steps=106_000)


def article_recipe(base: TrainConfig) -> TrainConfig:
    """The seed article's training recipe over `base`'s env, network, replay and budget.

    Every value it sets is a traced hyperparameter (`jaxrl_fast.hparams.SWEEPABLE`), so a
    preset and its recipe version run as two points of one sweep program.

      >>> article_recipe(get("minatar-breakout")).schedule.gamma_schedule
      '0.99:0.3,0.95:0.7,0.9'
    """
    return base.replace(
        dqn={"learning_rate": 3e-4, "max_grad_norm": 1.0},
        schedule={
            "lr_schedule": "cosine_restarts",
            "lr_period_fraction": 0.1,
            "lr_end_fraction": 0.0,
            "gamma_schedule": "0.99:0.3,0.95:0.7,0.9",
            "epsilon_schedule": "factor",
            "epsilon_start": 1.0,
            "epsilon_factor": 0.995,
            "epsilon_every": 1000,
            "epsilon_end": 0.01,
        },
    )


def _article_recipe() -> TrainConfig:
    # benchmarks/results/article_recipe/article_recipe.md compares it with `cartpole` (one sweep
    # program).
    return article_recipe(_cartpole())


def _atari_base(game: str) -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name=f"envpool:{game}-v5", num_envs=8),  # AtariConfig(): DQN settings
        network=NetworkConfig(kind="nature", hidden_sizes=(512,)),
        replay=ReplayConfig(capacity=100_000, batch_size=32, n_step=3),
        dqn=DQNConfig(
            gamma=0.99,
            learning_rate=1e-4,
            adam_eps=1.5e-4,
            double_q=True,
            loss="huber",
            target_period=8_000,
            max_grad_norm=10.0,
        ),
        schedule=ScheduleConfig(epsilon_start=1.0, epsilon_end=0.01, epsilon_fraction=0.25),
        total_env_steps=400_000,
        learning_starts=20_000,
        train_frequency=32,
        updates_per_block=4,
        eval_episodes=4,
        eval_epsilon=0.05,  # Nature DQN's evaluation policy
    )


def _atari_pong() -> TrainConfig:
    # benchmarks/results/atari/atari.md has the measured learning run.
    return _atari_base("Pong")


def _atari_breakout() -> TrainConfig:
    # Not yet measured on this CPU (benchmarks/atari.py runs Pong).
    return _atari_base("Breakout")


_PRESETS: dict[str, Callable[[], TrainConfig]] = {
    "cartpole": _cartpole,
    "cartpole-cleanrl": _cartpole_cleanrl,
    "acrobot": _acrobot,
    "catch": _catch,
    "pendulum-discrete": _pendulum_discrete,
    "reacher-81": _reacher_81,
    "mountaincar-shaped": _mountaincar_shaped,
    "mountaincar-curriculum": _mountaincar_curriculum,
    "cartpole-poles": _cartpole_poles,
    "memorychain-lstm": _memorychain_lstm,
    "cartpole-hidden-lstm": _cartpole_hidden_lstm,
    "article-recipe": _article_recipe,
    "minatar-breakout": _minatar_breakout,
    "minatar-freeway": _minatar_freeway,
    "minatar-space-invaders": _minatar_space_invaders,
    "atari-pong": _atari_pong,
    "atari-breakout": _atari_breakout,
}


def _base(name: str) -> TrainConfig:
    return _PRESETS[name]()


_PRESETS.update(dqn_family.presets(_base), **pqn.presets(_base), **board_presets.PRESETS)

DEFAULT = "cartpole"


def names() -> list[str]:
    """Return the preset names."""
    return sorted(_PRESETS)


def get(name: str = DEFAULT) -> TrainConfig:
    """Return the named preset.

    Raises:
      ValueError: unknown name, with a did-you-mean suggestion and the valid names.

    Examples:
      >>> get("cartpole-cleanrl").replay.batch_size
      128
    """
    if name not in _PRESETS:
        close = difflib.get_close_matches(name, list(_PRESETS), n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"unknown preset {name!r}.{hint} Valid presets: {', '.join(names())}.")
    return _PRESETS[name]()
