"""`cartpole-cleanrl` against its reference, field by field (issue 51): PureJaxRL's DQN config
written down from its file, our preset mapped onto the same keys; what differs is listed, with
why, in `presets.classic.DIFFERS`."""

from __future__ import annotations

from jaxrl_fast import presets
from jaxrl_fast.presets import classic

# luchris429/purejaxrl purejaxrl/dqn.py @ 19f8284, `main`'s config, and its QNetwork (Dense 120,
# ReLU, Dense 84, ReLU, Dense actions), Adam (optax's eps 1e-8), its loss mean((q - y)^2), no
# double Q (the target network's max), no gradient clip
PUREJAXRL_DQN = {
    "NUM_ENVS": 10, "BUFFER_SIZE": 10_000, "BUFFER_BATCH_SIZE": 128, "TOTAL_TIMESTEPS": 500_000,
    "EPSILON_START": 1.0, "EPSILON_FINISH": 0.05, "EPSILON_ANNEAL_TIME": 250_000,
    "TARGET_UPDATE_INTERVAL": 500, "LR": 2.5e-4, "LEARNING_STARTS": 10_000,
    "TRAINING_INTERVAL": 10, "LR_LINEAR_DECAY": False, "GAMMA": 0.99, "TAU": 1.0,
    "ENV_NAME": "CartPole-v1", "hidden": (120, 84), "adam_eps": 1e-8, "double_q": False,
    "grad_clip": None, "loss": "td^2",
}  # fmt: skip


def test_cartpole_cleanrl_is_purejaxrls_dqn_field_by_field():
    cfg = presets.get("cartpole-cleanrl")
    s = cfg.schedule
    ours = {
        "NUM_ENVS": cfg.env.num_envs, "BUFFER_SIZE": cfg.replay.capacity,
        "BUFFER_BATCH_SIZE": cfg.replay.batch_size, "TOTAL_TIMESTEPS": cfg.total_env_steps,
        "EPSILON_START": s.epsilon_start, "EPSILON_FINISH": s.epsilon_end,
        "EPSILON_ANNEAL_TIME": s.epsilon_fraction * (s.horizon or cfg.total_env_steps),
        "TARGET_UPDATE_INTERVAL": cfg.dqn.target_period, "LR": cfg.dqn.learning_rate,
        "LEARNING_STARTS": cfg.learning_starts,
        # one update per TRAINING_INTERVAL env steps (theirs count all envs' steps)
        "TRAINING_INTERVAL": cfg.train_frequency // cfg.updates_per_block,
        "LR_LINEAR_DECAY": s.lr_schedule == "linear", "GAMMA": cfg.dqn.gamma,
        "TAU": cfg.dqn.tau, "ENV_NAME": cfg.env.name, "hidden": cfg.network.hidden_sizes,
        "adam_eps": cfg.dqn.adam_eps, "double_q": cfg.dqn.double_q,
        "grad_clip": cfg.dqn.max_grad_norm,
        "loss": {"mse": "0.5 td^2"}.get(cfg.dqn.loss, cfg.dqn.loss),
    }  # fmt: skip
    differs = classic.DIFFERS["cartpole-cleanrl"]
    for key, want in PUREJAXRL_DQN.items():
        if key in differs:
            assert ours[key] != want and differs[key], key
        else:
            assert ours[key] == want, (key, ours[key], want)
    assert (cfg.network.kind, cfg.replay.prioritised, cfg.replay.n_step) == ("mlp", False, 1)
    assert "cartpole-cleanrl" in classic.REFERENCES
