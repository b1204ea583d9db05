"""Config validation, presets and derived numbers (`jaxrl_fast.config`, `jaxrl_fast.presets`)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from jaxrl_fast import presets
from jaxrl_fast.config import (
    AtariConfig,
    DQNConfig,
    EnvConfig,
    NetworkConfig,
    PrecisionConfig,
    ReplayConfig,
    ScheduleConfig,
    TrainConfig,
)


def _small(**changes) -> TrainConfig:
    """A small valid run: 4 envs, 100 blocks of 8 env steps after a 200-step prefill."""
    kwargs = dict(
        env=EnvConfig(name="CartPole-v1", num_envs=4),
        replay=ReplayConfig(capacity=400, batch_size=32),
        dqn=DQNConfig(target_period=40),
        total_env_steps=1_000,
        learning_starts=200,
        train_frequency=8,
    )
    kwargs.update(changes)
    return TrainConfig(**kwargs)


# --------------------------------------------------------------------------- per-field errors


def _cases(cases):
    """Turn `(id, kwargs)` pairs into parametrize values with ids."""
    return [pytest.param(kwargs, id=case_id) for case_id, kwargs in cases]


@pytest.mark.parametrize(
    "bad",
    _cases(
        [
            ("name-empty", {"name": ""}),
            ("name-not-str", {"name": 3}),
            ("num_envs-zero", {"num_envs": 0}),
            ("num_envs-negative", {"num_envs": -2}),
            ("num_envs-float", {"num_envs": 4.0}),
            ("num_envs-bool", {"num_envs": True}),
        ]
    ),
)
def test_env_config_rejects(bad):
    (field,) = bad
    with pytest.raises(ValueError, match=rf"EnvConfig\.{field}="):
        EnvConfig(**bad)


@pytest.mark.parametrize(
    "bad",
    _cases(
        [
            ("kind-unknown", {"kind": "rnn"}),
            ("hidden_sizes-list", {"hidden_sizes": [64, 64]}),
            ("hidden_sizes-zero", {"hidden_sizes": (64, 0)}),
            ("hidden_sizes-float", {"hidden_sizes": (64.0,)}),
            ("conv_channels-empty", {"conv_channels": ()}),
            ("conv_channels-negative", {"conv_channels": (-16,)}),
            ("conv_channels-list", {"conv_channels": [16]}),
            ("dueling-int", {"dueling": 1}),
            ("dueling-none", {"dueling": None}),
            ("conv_impl-unknown", {"conv_impl": "winograd"}),
        ]
    ),
)
def test_network_config_rejects(bad):
    (field,) = bad
    with pytest.raises(ValueError, match=rf"NetworkConfig\.{field}="):
        NetworkConfig(**bad)


@pytest.mark.parametrize(
    "bad, field",
    [
        pytest.param({"capacity": 1, "batch_size": 1}, "capacity", id="capacity-one"),
        pytest.param({"capacity": 1e4}, "capacity", id="capacity-float"),
        pytest.param({"capacity": True, "batch_size": 1}, "capacity", id="capacity-bool"),
        pytest.param({"batch_size": 0}, "batch_size", id="batch_size-zero"),
        pytest.param(
            {"capacity": 100, "batch_size": 101}, "batch_size", id="batch_size-over-capacity"
        ),
        pytest.param({"batch_size": 32.0}, "batch_size", id="batch_size-float"),
    ],
)
def test_replay_config_rejects(bad, field):
    with pytest.raises(ValueError, match=rf"ReplayConfig\.{field}="):
        ReplayConfig(**bad)


def test_replay_batch_size_message_names_capacity():
    with pytest.raises(ValueError, match=r"ReplayConfig\.batch_size=101 .*\[1, capacity=100\]"):
        ReplayConfig(capacity=100, batch_size=101)


@pytest.mark.parametrize(
    "bad",
    _cases(
        [
            ("gamma-negative", {"gamma": -0.1}),
            ("gamma-above-one", {"gamma": 1.01}),
            ("gamma-nan", {"gamma": math.nan}),
            ("gamma-str", {"gamma": "0.99"}),
            ("learning_rate-zero", {"learning_rate": 0.0}),
            ("learning_rate-inf", {"learning_rate": math.inf}),
            ("adam_eps-zero", {"adam_eps": 0.0}),
            ("double_q-int", {"double_q": 1}),
            ("loss-unknown", {"loss": "l1"}),
            ("huber_delta-zero", {"huber_delta": 0.0}),
            ("target_period-zero", {"target_period": 0}),
            ("target_period-float", {"target_period": 500.0}),
            ("tau-zero", {"tau": 0.0}),
            ("tau-above-one", {"tau": 1.5}),
            ("max_grad_norm-zero", {"max_grad_norm": 0.0}),
            ("max_grad_norm-negative", {"max_grad_norm": -1.0}),
            ("max_grad_norm-inf", {"max_grad_norm": math.inf}),
        ]
    ),
)
def test_dqn_config_rejects(bad):
    (field,) = bad
    with pytest.raises(ValueError, match=rf"DQNConfig\.{field}="):
        DQNConfig(**bad)


@pytest.mark.parametrize(
    "bad",
    _cases(
        [
            ("epsilon_start-above-one", {"epsilon_start": 1.5}),
            ("epsilon_start-negative", {"epsilon_start": -0.1}),
            ("epsilon_end-above-one", {"epsilon_end": 2}),
            ("epsilon_end-none", {"epsilon_end": None}),
            ("epsilon_fraction-zero", {"epsilon_fraction": 0.0}),
            ("epsilon_fraction-above-one", {"epsilon_fraction": 1.5}),
            ("lr_schedule-unknown", {"lr_schedule": "cosine"}),
            ("lr_end_fraction-negative", {"lr_end_fraction": -0.1}),
            ("lr_end_fraction-above-one", {"lr_end_fraction": 1.1}),
        ]
    ),
)
def test_schedule_config_rejects(bad):
    (field,) = bad
    with pytest.raises(ValueError, match=rf"ScheduleConfig\.{field}="):
        ScheduleConfig(**bad)


@pytest.mark.parametrize(
    "bad, pattern",
    [
        # part configs must be the dataclasses (or dicts of their fields), not other values
        pytest.param({"network": None}, r"TrainConfig\.network=", id="network-none"),
        pytest.param({"dqn": NetworkConfig()}, r"TrainConfig\.dqn=", id="dqn-wrong-class"),
        pytest.param({"schedule": None}, r"TrainConfig\.schedule=", id="schedule-none"),
        # scalar fields
        pytest.param({"seed": -1}, r"TrainConfig\.seed=", id="seed-negative"),
        pytest.param({"seed": 1.0}, r"TrainConfig\.seed=", id="seed-float"),
        pytest.param({"num_seeds": 0}, r"TrainConfig\.num_seeds=", id="num_seeds-zero"),
        pytest.param({"eval_episodes": -1}, r"TrainConfig\.eval_episodes=", id="eval_episodes-neg"),
        pytest.param({"eval_epsilon": 1.5}, r"TrainConfig\.eval_epsilon=.*\[0, 1\]", id="eval_eps"),
        pytest.param(
            {"seed_loop": "pmap"}, r"TrainConfig\.seed_loop='pmap'.*'map'", id="seed_loop"
        ),
        pytest.param(
            {"prng_impl": "threefry"},
            r"TrainConfig\.prng_impl='threefry'.*'threefry2x32', 'rbg', 'unsafe_rbg'",
            id="prng_impl",
        ),
        pytest.param(
            {"updates_per_block": 0},
            r"TrainConfig\.updates_per_block=",
            id="updates_per_block-zero",
        ),
        pytest.param(
            {"train_frequency": 0}, r"TrainConfig\.train_frequency=", id="train_frequency-zero"
        ),
        # cross-field: train_frequency must be a multiple of num_envs=4
        pytest.param(
            {"train_frequency": 6, "dqn": DQNConfig(target_period=60)},
            r"TrainConfig\.train_frequency=6 .*multiple of env\.num_envs=4",
            id="train_frequency-not-multiple-of-num_envs",
        ),
        # learning_starts: multiple of num_envs, at least 2 * num_envs
        pytest.param(
            {"learning_starts": 4, "total_env_steps": 804},
            r"TrainConfig\.learning_starts=4 .*>= 8",
            id="learning_starts-below-2E",
        ),
        pytest.param(
            {"learning_starts": 202},
            r"TrainConfig\.learning_starts=202 ",
            id="learning_starts-not-multiple-of-num_envs",
        ),
        # total_env_steps: > learning_starts, aligned to train_frequency, with a hint
        pytest.param(
            {"total_env_steps": 1_003},
            r"TrainConfig\.total_env_steps=1003 .*nearest valid: 1000",
            id="total_env_steps-round-down-hint",
        ),
        pytest.param(
            {"total_env_steps": 1_005},
            r"TrainConfig\.total_env_steps=1005 .*nearest valid: 1008",
            id="total_env_steps-round-up-hint",
        ),
        pytest.param(
            {"total_env_steps": 200},
            r"TrainConfig\.total_env_steps=200 .*nearest valid: 208",
            id="total_env_steps-equal-learning_starts",
        ),
        pytest.param(
            {"total_env_steps": 100},
            r"TrainConfig\.total_env_steps=100 .*nearest valid: 208",
            id="total_env_steps-below-learning_starts",
        ),
        # replay capacity vs num_envs=4
        pytest.param(
            {"replay": ReplayConfig(capacity=402, batch_size=32)},
            r"ReplayConfig\.capacity=402 .*multiple of env\.num_envs=4; "
            r"nearest valid: 400",
            id="capacity-not-multiple-of-num_envs",
        ),
        pytest.param(
            {"replay": ReplayConfig(capacity=6, batch_size=2)},
            r"ReplayConfig\.capacity=6 .*nearest valid: 8",
            id="capacity-not-multiple-small-hint",
        ),
        pytest.param(
            {"replay": ReplayConfig(capacity=4, batch_size=2)},
            r"ReplayConfig\.capacity=4 .*at least 2 x env\.num_envs=8",
            id="capacity-below-2E",
        ),
        # target updates on block boundaries
        pytest.param(
            {"dqn": DQNConfig(target_period=44)},
            r"DQNConfig\.target_period=44 .*train_frequency=8",
            id="target_period-not-multiple-of-train_frequency",
        ),
        # chunks must divide the 100 blocks
        pytest.param(
            {"num_chunks": 3},
            r"TrainConfig\.num_chunks=3 .*blocks \(100\), e\.g\. 20",
            id="num_chunks-not-divisor",
        ),
        pytest.param({"num_chunks": 0}, r"TrainConfig\.num_chunks=0 ", id="num_chunks-zero"),
        pytest.param({"num_chunks": 4.0}, r"TrainConfig\.num_chunks=4\.0 ", id="num_chunks-float"),
    ],
)
def test_train_config_rejects(bad, pattern):
    with pytest.raises(ValueError, match=pattern):
        _small(**bad)


def test_small_config_is_valid():
    cfg = _small()
    assert cfg.env.num_envs == 4


@pytest.mark.parametrize(
    "cls",
    [
        EnvConfig,
        NetworkConfig,
        ReplayConfig,
        DQNConfig,
        ScheduleConfig,
        PrecisionConfig,
        TrainConfig,
    ],
    ids=lambda c: c.__name__,
)
def test_unknown_kwarg_and_positional_args_raise_type_error(cls):
    with pytest.raises(TypeError):
        cls(not_a_field=1)
    with pytest.raises(TypeError):
        cls(1)  # keyword-only


@pytest.mark.parametrize(
    "cfg, field",
    [
        pytest.param(EnvConfig(), "num_envs", id="EnvConfig"),
        pytest.param(ReplayConfig(), "capacity", id="ReplayConfig"),
        pytest.param(TrainConfig(), "seed", id="TrainConfig"),
    ],
)
def test_configs_are_frozen(cfg, field):
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(cfg, field, 2)


# --------------------------------------------------------------------------- presets


@pytest.mark.parametrize("name", presets.names())
def test_every_preset_constructs(name):
    cfg = presets.get(name)
    assert isinstance(cfg, TrainConfig)
    assert cfg.num_blocks >= 1
    assert cfg.num_blocks % cfg.chunks == 0
    # Each call builds a fresh, equal config.
    assert presets.get(name) == cfg


def test_default_preset():
    assert presets.DEFAULT in presets.names()
    assert presets.get() == presets.get(presets.DEFAULT)


def test_unknown_preset_suggests_close_match():
    with pytest.raises(ValueError, match=r"Did you mean 'cartpole'") as err:
        presets.get("cartpol")
    for name in presets.names():
        assert name in str(err.value)


def test_unknown_preset_without_close_match_lists_valid_names():
    with pytest.raises(ValueError, match=r"unknown preset 'zzzz'\. Valid presets: ") as err:
        presets.get("zzzz")
    assert "Did you mean" not in str(err.value)


def test_cartpole_cleanrl_has_cleanrl_hyperparameters():
    cfg = presets.get("cartpole-cleanrl")
    assert cfg.env == EnvConfig(name="CartPole-v1", num_envs=10)
    assert cfg.replay.capacity == 10_000
    assert cfg.replay.batch_size == 128
    assert cfg.dqn.learning_rate == 2.5e-4
    assert cfg.learning_starts == 10_000
    assert cfg.train_frequency == 10
    assert cfg.updates_per_block == 1
    assert cfg.dqn.target_period == 500
    assert cfg.dqn.tau == 1.0
    assert cfg.schedule.epsilon_start == 1.0
    assert cfg.schedule.epsilon_end == 0.05
    assert cfg.schedule.epsilon_fraction == 0.5
    assert cfg.schedule.lr_schedule == "constant"
    assert cfg.dqn.gamma == 0.99
    assert cfg.network.kind == "mlp"
    assert cfg.network.hidden_sizes == (120, 84)
    assert cfg.network.dueling is False
    assert cfg.dqn.loss == "mse"
    assert cfg.dqn.double_q is False
    assert cfg.dqn.max_grad_norm is None
    assert cfg.total_env_steps == 500_000
    # One update per 10 env steps = one per collect step of 10 envs; target copy every 50 blocks.
    assert cfg.collect_steps_per_block == 1
    assert cfg.prefill_steps == 1_000
    assert cfg.num_blocks == 49_000
    assert cfg.total_updates == 49_000
    assert cfg.target_period_blocks == 50


# --------------------------------------------------------------------------- derived numbers


def test_derived_properties_by_hand():
    cfg = _small()
    # 200 prefill env steps / 4 envs; (1000 - 200) / 8 blocks; 8 env steps / 4 envs per block.
    assert cfg.prefill_steps == 50
    assert cfg.num_blocks == 100
    assert cfg.collect_steps_per_block == 2
    assert cfg.chunks == 20
    assert cfg.blocks_per_chunk == 5
    assert cfg.target_period_blocks == 5
    assert cfg.total_updates == 100
    cfg = _small(num_chunks=4, updates_per_block=3)
    assert cfg.chunks == 4
    assert cfg.blocks_per_chunk == 25
    assert cfg.total_updates == 300
    # prefill + blocks * block length = the whole run
    assert (
        cfg.prefill_steps * 4 + cfg.num_blocks * cfg.collect_steps_per_block * 4
    ) == cfg.total_env_steps


@pytest.mark.parametrize(
    "num_blocks, chunks",
    [
        pytest.param(1, 1, id="1"),
        pytest.param(7, 7, id="prime-below-20"),
        pytest.param(20, 20, id="20"),
        pytest.param(38, 19, id="38-picks-19"),
        pytest.param(42, 21, id="42-picks-21"),
        pytest.param(198, 22, id="198-tie-18-22-picks-larger"),
        pytest.param(101, 1, id="prime-above-20"),
        pytest.param(49_000, 20, id="cleanrl"),
    ],
)
def test_chunks_picks_divisor_near_20(num_blocks, chunks):
    # 1 env, 1 env step per block: num_blocks = total_env_steps - learning_starts.
    cfg = TrainConfig(
        env=EnvConfig(num_envs=1),
        replay=ReplayConfig(capacity=16, batch_size=4),
        dqn=DQNConfig(target_period=1),
        learning_starts=2,
        train_frequency=1,
        total_env_steps=2 + num_blocks,
    )
    assert cfg.num_blocks == num_blocks
    assert cfg.chunks == chunks
    assert num_blocks % cfg.chunks == 0
    assert cfg.blocks_per_chunk == num_blocks // chunks


# --------------------------------------------------------------------------- replace / to_dict


def test_replace_with_dict_parts_does_not_mutate_original():
    cfg = _small()
    before = cfg.to_dict()
    new = cfg.replace(replay={"batch_size": 16}, dqn={"gamma": 0.9, "double_q": False}, num_seeds=3)
    # The original is untouched.
    assert cfg.to_dict() == before
    assert cfg.replay.batch_size == 32 and cfg.dqn.gamma == 0.99 and cfg.num_seeds == 1
    # Changed fields changed; the rest of each part is kept.
    assert new.replay == ReplayConfig(capacity=400, batch_size=16)
    assert new.dqn == dataclasses.replace(cfg.dqn, gamma=0.9, double_q=False)
    assert new.dqn.target_period == 40
    assert new.num_seeds == 3
    assert new.env is cfg.env
    assert isinstance(new.replay, ReplayConfig)


def test_replace_with_dataclass_part():
    cfg = _small()
    new = cfg.replace(network=NetworkConfig(kind="mlp", hidden_sizes=(8,)))
    assert new.network.hidden_sizes == (8,)
    assert cfg.network == NetworkConfig()


def test_replace_validates():
    cfg = _small()
    with pytest.raises(ValueError, match=r"ReplayConfig\.batch_size="):
        cfg.replace(replay={"batch_size": 10_000})
    with pytest.raises(ValueError, match=r"ReplayConfig\.capacity=402 "):
        cfg.replace(replay={"capacity": 402})
    with pytest.raises(ValueError, match=r"TrainConfig\.total_env_steps="):
        cfg.replace(learning_starts=204)
    with pytest.raises(TypeError):
        cfg.replace(replay={"not_a_field": 1})


def test_to_dict_is_json_ready():
    cfg = presets.get("cartpole-cleanrl")
    data = json.loads(json.dumps(cfg.to_dict()))
    assert data["replay"]["capacity"] == 10_000 and data["replay"]["batch_size"] == 128
    assert data["replay"]["l3"] == "off" and data["replay"]["spill_dir"] is None
    assert data["network"]["hidden_sizes"] == [120, 84]
    assert data["dqn"]["max_grad_norm"] is None
    assert data["total_env_steps"] == 500_000


@pytest.mark.parametrize(
    "field, value",
    [
        ("frame_skip", 0),
        ("img_size", 20),
        ("stack_num", 0),
        ("noop_max", -1),
        ("episodic_life", "yes"),
        ("reward_clip", 1),
        ("sticky_actions", None),
        ("max_episode_frames", 2),
    ],
)
def test_atari_config_rejects(field, value):
    with pytest.raises(ValueError, match=rf"AtariConfig\.{field}="):
        AtariConfig(**{field: value})


def test_atari_config_nested_replace_and_steps():
    cfg = TrainConfig().replace(env={"name": "envpool:Pong-v5", "atari": {"frame_skip": 2}})
    assert cfg.env.is_envpool and cfg.env.atari.frame_skip == 2
    assert cfg.env.atari.max_episode_steps == 108_000 // 2
    assert not TrainConfig().env.is_envpool
    # a dict for a part config is taken by the constructor as by replace (issue 32)
    assert EnvConfig(atari={"frame_skip": 2}).atari.frame_skip == 2
    with pytest.raises(ValueError, match=r"EnvConfig\.atari="):
        EnvConfig(atari=[2])
