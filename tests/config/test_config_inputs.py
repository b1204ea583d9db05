"""One way to build a config: the constructor and `replace` take the same inputs, unknown
names get the nearest field, and a changed `num_envs` gets a fix."""

from __future__ import annotations

import pytest

from jaxrl_fast import presets
from jaxrl_fast.config import DQNConfig, EnvConfig, TrainConfig


def test_the_constructor_takes_dicts_for_parts_as_replace_does():
    made = TrainConfig(dqn={"gamma": 0.9}, env={"num_envs": 5, "atari": {"frame_skip": 2}},
                       train_frequency=5, learning_starts=50, total_env_steps=1050)  # fmt: skip
    replaced = TrainConfig().replace(
        dqn={"gamma": 0.9}, env={"num_envs": 5, "atari": {"frame_skip": 2}},
        train_frequency=5, learning_starts=50, total_env_steps=1050,
    )  # fmt: skip
    assert made == replaced
    assert made.dqn.gamma == 0.9 and made.dqn.learning_rate == DQNConfig().learning_rate
    assert made.env.atari.frame_skip == 2 and isinstance(made.env, EnvConfig)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: TrainConfig(num_seed=2), "TrainConfig has no field 'num_seed'. Did you mean "
         "'num_seeds'?"),
        (lambda: TrainConfig(dqn={"learnin_rate": 1e-3}), "DQNConfig has no field "
         "'learnin_rate'. Did you mean 'learning_rate'?"),
        (lambda: TrainConfig().replace(dqn={"learnin_rate": 1e-3}), "DQNConfig has no field "
         "'learnin_rate'. Did you mean 'learning_rate'?"),
        (lambda: TrainConfig().replace(env={"atari": {"frameskip": 2}}), "AtariConfig has no "
         "field 'frameskip'. Did you mean 'frame_skip'?"),
        (lambda: DQNConfig(gama=0.9), "DQNConfig has no field 'gama'. Did you mean 'gamma'?"),
    ],
)  # fmt: skip
def test_unknown_names_get_the_nearest_field(build, message):
    with pytest.raises(TypeError, match=message.replace("?", r"\?").replace(".", r"\.")):
        build()


def test_a_changed_num_envs_names_the_fix_and_with_num_envs_applies_it():
    with pytest.raises(ValueError, match=r"nearest valid: 7\. To change num_envs, "
                       r"config\.with_num_envs\(7\) moves"):  # fmt: skip
        TrainConfig().replace(env={"num_envs": 7})
    for name in presets.names():
        cfg = presets.get(name)
        for e in (3, 7, 16):
            moved = cfg.with_num_envs(e)
            assert moved.env.num_envs == e and moved.train_frequency % e == 0
            assert moved.learning_starts % e == 0 and moved.dqn.target_period % e == 0
            # the budget stays within one block of the preset's
            assert abs(moved.total_env_steps - cfg.total_env_steps) <= moved.train_frequency + e
    assert TrainConfig().with_num_envs(10) == TrainConfig()  # nothing to move
