"""Presets on gymnax's classic-control and bsuite envs (`presets.get`), the recurrent probes and the
seed article's recipe.

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
"""

from __future__ import annotations

from typing import Callable

from jaxrl_fast.config import (
    DQNConfig,
    EnvConfig,
    NetworkConfig,
    ReplayConfig,
    ScheduleConfig,
    TrainConfig,
)

__all__ = ["DIFFERS", "PRESETS", "REFERENCES", "article_recipe"]


# Where `cartpole-cleanrl`'s settings come from (tests/presets/test_classic.py holds it against
# them), and the fields where it is not that file's, each with why.
REFERENCES = {
    "cartpole-cleanrl": "luchris429/purejaxrl purejaxrl/dqn.py @ 19f8284 (`main`'s config: "
    "CleanRL's dqn_jax.py defaults, which step 1 env, on 10 envs)",
}
DIFFERS = {
    "cartpole-cleanrl": {
        "loss": "0.5 td^2 where theirs is td^2: the same Adam step up to Adam's eps (Adam divides "
        "the gradient's scale out)",
    },
}


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


def article_recipe(base: TrainConfig) -> TrainConfig:
    """The seed article's training recipe over `base`'s env, network, replay and budget.

    Every value it sets is a traced hyperparameter (`jaxrl_fast.config.hparams.SWEEPABLE`), so a
    preset and its recipe version run as two points of one sweep program.

      >>> from jaxrl_fast import presets
      >>> article_recipe(presets.get("minatar-breakout")).schedule.gamma_schedule
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


PRESETS: dict[str, Callable[[], TrainConfig]] = {
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
}
