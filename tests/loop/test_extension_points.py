"""The public extension points, exercised as a user would: a toy value head, a toy loss and a toy
loop extension, each defined in this file only, plugged into a full training run (`train`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import tiny_config

from jaxrl_fast.agent import heads, losses
from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.envs import make_probe_env, optimal_q
from jaxrl_fast.loop import Extension, make_train
from jaxrl_fast.run.train import train


def _two_linear(features, num_actions, dense):
    """Toy head: the sum of two linear layers (one parameter set more than the scalar head)."""
    return dense(num_actions, heads.head_init)(features) + dense(num_actions, heads.head_init)(
        features
    )


def _l1_rows(x: losses.LossInput):
    """Toy loss: |td| (double-Q selection kept)."""
    td = losses.td_errors(x.q_tm1(), x.action, x.reward, x.discount, x.q_t(), x.q_t_select())
    return jnp.abs(td), td


def _double_reward(parts):
    """Toy loop extension: the agent learns from twice the env's reward."""
    return Extension("double_reward", reward=lambda obs, a, r, next_obs, info, gamma: 2.0 * r)


@pytest.fixture(scope="module")
def toy_parts():
    heads.register("test-two-linear", heads.ValueHead("test-two-linear", _two_linear))
    losses.register("test-l1", losses.Loss("test-l1", _l1_rows))


@pytest.mark.slow
@pytest.mark.learning
def test_toy_head_loss_and_extension_in_a_training_run(toy_parts):
    cfg = tiny_config(
        network={"hidden_sizes": (32,), "head": "test-two-linear"},
        dqn={"loss": "test-l1", "learning_rate": 1e-3, "target_period": 40, "gamma": 0.9},
        total_env_steps=8_080,
        num_chunks=2,
        eval_episodes=4,
    )
    records = []
    result = train(cfg, progress=False, extensions=[_double_reward], on_chunk=records.append)
    params = result.runner.seeds.agent.params["params"]
    assert sorted(params) == ["Dense_0", "Dense_1", "Dense_2"]  # torso + the head's two layers
    # the loss is the toy's: mean |td| over the batch, which is also what abs_td reports
    for rec in records:
        np.testing.assert_allclose(rec["loss"], rec["abs_td"], rtol=1e-5)
    # the agent learned Q* of the doubled reward (1.8, 1.8; 0, 2: the env's own are 0.9 and 1,
    # L1's constant-size steps leave it within 0.1); the env's own returns are not doubled
    net = QNetwork.from_config(cfg.network, make_probe_env("probe-chain", 1).spec, cfg.algo)
    expected = 2.0 * np.asarray([optimal_q("probe-chain", 0.9)[s] for s in (0, 1)])
    for s in range(cfg.num_seeds):
        q = net.apply(jax.tree.map(lambda x, s=s: x[s], result.runner.seeds.agent.params),
                      np.eye(2, dtype=np.float32))  # fmt: skip
        np.testing.assert_allclose(np.asarray(q), expected, atol=0.1)
    np.testing.assert_allclose(result.final_return, [1.0, 1.0])


def test_extensions_are_folded_in_order_and_named(toy_parts):
    fns = make_train(tiny_config(env={"reward_shaping": None}), extensions=[_double_reward])
    assert fns.extensions == ("double_reward",)
    spill = make_train(
        tiny_config(replay={"l3": "host", "l3_capacity": 400}), extensions=[_double_reward]
    )
    assert spill.extensions == ("replay_spill", "double_reward")


def test_a_builder_must_return_an_extension():
    with pytest.raises(TypeError, match=r"returned dict; expected an Extension"):
        make_train(tiny_config(), extensions=[lambda parts: {"reward": None}])
    with pytest.raises(ValueError, match=r"same name"):
        make_train(tiny_config(), extensions=[_double_reward, _double_reward])


def test_unknown_and_clashing_names_are_refused(toy_parts):
    with pytest.raises(ValueError, match=r"NetworkConfig.head='nope' is not allowed.*scalar"):
        tiny_config(network={"head": "nope"})
    with pytest.raises(ValueError, match=r"DQNConfig.loss='nope' is not allowed.*test-l1"):
        tiny_config(dqn={"loss": "nope"})
    with pytest.raises(ValueError, match=r"dueling=True and head='test-two-linear'"):
        tiny_config(network={"dueling": True, "head": "test-two-linear"})
    with pytest.raises(ValueError, match=r"already registered"):
        heads.register("test-two-linear", heads.ValueHead("test-two-linear", _l1_rows))
    with pytest.raises(ValueError, match=r"built-in"):
        losses.register("mse", losses.Loss("mse", _l1_rows))
    with pytest.raises(ValueError, match=r"recurrent network.*DQNConfig.loss='test-l1'"):
        train(
            tiny_config(
                env={"name": "MemoryChain-bsuite", "num_envs": 4},
                network={"lstm": 8},
                replay={"sequence_length": 4, "capacity": 400},
                dqn={"loss": "test-l1"},
            ),
            progress=False,
        )
