"""The PQN presets against purejaxql's published configs, field by field (issue 51): each
reference value is written down from its file and commit, and our preset is mapped onto the
same keys. A field that differs must be listed, with why, in `presets.pqn.DIFFERS`."""

from __future__ import annotations

import pytest

from jaxrl_fast import presets
from jaxrl_fast.presets import pqn

# mttga/purejaxql purejaxql/config/alg/pqn_cartpole.yaml @ 970ecce
CARTPOLE = {
    "TOTAL_TIMESTEPS": 500_000, "TOTAL_TIMESTEPS_DECAY": 500_000, "NUM_ENVS": 32,
    "NUM_STEPS": 64, "EPS_START": 1.0, "EPS_FINISH": 0.2, "EPS_DECAY": 0.2,
    "NUM_MINIBATCHES": 16, "NUM_EPOCHS": 4, "HIDDEN_SIZE": 256, "NUM_LAYERS": 2,
    "NORM_TYPE": "layer_norm", "LR": 1e-4, "MAX_GRAD_NORM": 10, "LR_LINEAR_DECAY": True,
    "REW_SCALE": 0.1, "GAMMA": 0.99, "LAMBDA": 0.95, "ENV_NAME": "CartPole-v1", "EPS_TEST": 0.0,
}  # fmt: skip
# purejaxql/config/alg/pqn_minatar.yaml @ 0cd95ed (ENV_NAME per game)
MINATAR = {
    "TOTAL_TIMESTEPS": 10_000_000, "TOTAL_TIMESTEPS_DECAY": 10_000_000, "NUM_ENVS": 128,
    "NUM_STEPS": 32, "EPS_START": 1.0, "EPS_FINISH": 0.05, "EPS_DECAY": 0.1,
    "NUM_MINIBATCHES": 32, "NUM_EPOCHS": 2, "NORM_TYPE": "layer_norm", "LR": 5e-4,
    "MAX_GRAD_NORM": 10, "LR_LINEAR_DECAY": True, "GAMMA": 0.99, "LAMBDA": 0.65,
    "EPS_TEST": 0.0,
}  # fmt: skip
# purejaxql/config/alg/pqn_atari.yaml @ 0436c80
ATARI = {
    "TOTAL_TIMESTEPS": 10_000_000, "TOTAL_TIMESTEPS_DECAY": 10_000_000, "NUM_ENVS": 128,
    "NUM_STEPS": 32, "EPS_START": 1.0, "EPS_FINISH": 0.001, "EPS_DECAY": 0.1,
    "NUM_MINIBATCHES": 32, "NUM_EPOCHS": 2, "NORM_TYPE": "layer_norm", "LR": 2.5e-4,
    "MAX_GRAD_NORM": 10, "LR_LINEAR_DECAY": False, "GAMMA": 0.99, "LAMBDA": 0.65,
    "ENV_NAME": "envpool:Pong-v5", "EPS_TEST": 0.0, "episodic_life": True, "reward_clip": True,
    "repeat_action_probability": 0.0, "frame_skip": 4, "noop_max": 30,
}  # fmt: skip


def _as_purejaxql(cfg) -> dict:
    """Our config under purejaxql's names."""
    envs, rollout = cfg.env.num_envs, cfg.algo.rollout
    scale = cfg.env.reward_shaping
    out = {
        "TOTAL_TIMESTEPS": cfg.total_env_steps,
        "TOTAL_TIMESTEPS_DECAY": cfg.schedule.horizon or cfg.total_env_steps,
        "NUM_ENVS": envs, "NUM_STEPS": cfg.train_frequency // envs,
        "EPS_START": cfg.schedule.epsilon_start, "EPS_FINISH": cfg.schedule.epsilon_end,
        "EPS_DECAY": cfg.schedule.epsilon_fraction, "NUM_MINIBATCHES": rollout.num_minibatches,
        "NUM_EPOCHS": cfg.updates_per_block // rollout.num_minibatches,
        "HIDDEN_SIZE": cfg.network.hidden_sizes[0], "NUM_LAYERS": len(cfg.network.hidden_sizes),
        "NORM_TYPE": "layer_norm" if cfg.network.layer_norm else None,
        "LR": cfg.dqn.learning_rate, "MAX_GRAD_NORM": cfg.dqn.max_grad_norm,
        "LR_LINEAR_DECAY": cfg.schedule.lr_schedule == "linear"
        and cfg.schedule.lr_end_fraction == 0.0,
        "REW_SCALE": float(scale.split(":")[1]) if scale and scale.startswith("scale:") else 1.0,
        "GAMMA": cfg.dqn.gamma, "LAMBDA": rollout.td_lambda, "ENV_NAME": cfg.env.name,
        "EPS_TEST": cfg.eval_epsilon, "episodic_life": cfg.env.atari.episodic_life,
        "reward_clip": cfg.env.atari.reward_clip,
        "repeat_action_probability": 0.25 if cfg.env.atari.sticky_actions else 0.0,
        "frame_skip": cfg.env.atari.frame_skip, "noop_max": cfg.env.atari.noop_max,
    }  # fmt: skip
    return out


CASES = [("pqn-cartpole", CARTPOLE), ("pqn-atari-pong", ATARI)] + [
    (f"pqn-minatar-{game}", MINATAR) for game in pqn.MINATAR_GAMES
]


@pytest.mark.parametrize(("name", "reference"), CASES, ids=[n for n, _ in CASES])
def test_each_pqn_preset_is_purejaxqls_or_says_why_not(name, reference):
    cfg = presets.get(name)
    ours = _as_purejaxql(cfg)
    differs = pqn.DIFFERS.get(name, {})
    # purejaxql runs whole rollouts: TOTAL_TIMESTEPS // NUM_STEPS // NUM_ENVS of them
    rows = reference["NUM_STEPS"] * reference["NUM_ENVS"]
    reference = {**reference, "TOTAL_TIMESTEPS": reference["TOTAL_TIMESTEPS"] // rows * rows}
    for key, want in reference.items():
        if key in differs:  # said, with why; and it does differ
            assert ours[key] != want, f"{name}: {key} is listed in DIFFERS but matches"
        else:
            assert ours[key] == pytest.approx(want), f"{name}: {key} {ours[key]!r} != {want!r}"
    assert set(differs) <= set(reference), set(differs) - set(reference)
    assert all(why for why in differs.values())
    # the rollout learner: Q(lambda) targets without a target network, RAdam, no replay
    assert (cfg.learner, cfg.dqn.optimizer, cfg.dqn.double_q) == ("rollout", "radam", False)
    assert name in pqn.REFERENCES


def test_the_minatar_games_are_purejaxqls_env_names():
    for game, env in pqn.MINATAR_GAMES.items():
        assert presets.get(f"pqn-minatar-{game}").env.name == env and env.endswith("-MinAtar")
