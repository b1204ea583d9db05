"""Q-learning maths against hand-computed numbers (`agent.dqn`, `agent.network`)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxrl_fast.agent.dqn import make_agent, make_optimizer, td_errors
from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.config import DQNConfig, NetworkConfig
from jaxrl_fast.envs import EnvSpec
from jaxrl_fast.types import Batch

# --------------------------------------------------------------------------- td_errors

Q_TM1 = jnp.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]])
A_TM1 = jnp.array([1, 0, 0])
R_T = jnp.array([1.0, 0.5, -1.0])
# Target-net argmax per row: 0, 1, 1.
Q_T_TARGET = jnp.array([[10.0, 4.0], [2.0, 6.0], [1.0, 5.0]])
# Online-net argmax per row: 1, 0, 1 (differs from the target's in rows 0 and 1).
Q_T_SELECT = jnp.array([[0.0, 1.0], [3.0, 1.0], [0.0, 1.0]])
# gamma 0.9; row 2 terminal.
DISCOUNT = jnp.array([0.9, 0.9, 0.0])


def test_td_errors_q_learning_by_hand():
    td = td_errors(Q_TM1, A_TM1, R_T, DISCOUNT, Q_T_TARGET)
    # targets: 1 + 0.9*10 = 10, 0.5 + 0.9*6 = 5.9, -1 + 0 = -1; minus q(a): 2, 0.5, 3
    np.testing.assert_allclose(td, [8.0, 5.4, -4.0], rtol=1e-6)


def test_td_errors_double_q_by_hand():
    td = td_errors(Q_TM1, A_TM1, R_T, DISCOUNT, Q_T_TARGET, Q_T_SELECT)
    # online picks a=1, 0, 1; the target net evaluates them: 4, 2, 5
    # targets: 1 + 0.9*4 = 4.6, 0.5 + 0.9*2 = 2.3, -1 + 0 = -1; minus q(a): 2, 0.5, 3
    np.testing.assert_allclose(td, [2.6, 1.8, -4.0], rtol=1e-6)


def test_td_errors_terminal_vs_truncated():
    q_tm1 = jnp.zeros((2, 2))
    a = jnp.array([0, 0])
    r = jnp.array([1.0, 1.0])
    q_t = jnp.array([[3.0, 5.0], [3.0, 5.0]])
    # Row 0 terminated: no bootstrap. Row 1 truncated: bootstrap with gamma 0.5.
    td = td_errors(q_tm1, a, r, jnp.array([0.0, 0.5]), q_t)
    np.testing.assert_allclose(td, [1.0, 1.0 + 0.5 * 5.0])


def test_td_errors_target_is_stop_gradient():
    def total(q_tm1, q_t_target, q_t_select):
        return jnp.sum(td_errors(q_tm1, A_TM1, R_T, DISCOUNT, q_t_target, q_t_select))

    g_tm1, g_target, g_select = jax.grad(total, argnums=(0, 1, 2))(Q_TM1, Q_T_TARGET, Q_T_SELECT)
    np.testing.assert_array_equal(g_tm1, [[0.0, -1.0], [-1.0, 0.0], [-1.0, 0.0]])
    np.testing.assert_array_equal(g_target, 0.0)
    np.testing.assert_array_equal(g_select, 0.0)


# --------------------------------------------------------------------------- agent with a table net


class TableQ(nn.Module):
    """Q-values are the observation plus a learned per-action bias (zero at init)."""

    @nn.compact
    def __call__(self, obs):
        bias = self.param("b", nn.initializers.zeros, (obs.shape[-1],))
        return obs.astype(jnp.float32) + bias


def _agent(**dqn):
    config = DQNConfig(**{"gamma": 0.5, "learning_rate": 0.1, **dqn})
    agent = make_agent(config, TableQ(), num_actions=2)
    return agent, agent.init(jax.random.key(0), jnp.zeros((1, 2)))


def _bias(params):
    return np.asarray(params["params"]["b"])


def _with_bias(b):
    return {"params": {"b": jnp.asarray(b, jnp.float32)}}


def _batch(obs, action, reward, terminated, next_obs, weight=None, gamma=0.5):
    n = len(action)
    return Batch(
        obs=jnp.asarray(obs, jnp.float32),
        action=jnp.asarray(action, jnp.int32),
        reward=jnp.asarray(reward, jnp.float32),
        discount=jnp.where(jnp.asarray(terminated, bool), 0.0, gamma),
        next_obs=jnp.asarray(next_obs, jnp.float32),
        weight=jnp.ones(n, jnp.float32) if weight is None else jnp.asarray(weight, jnp.float32),
        index=jnp.arange(n, dtype=jnp.int32),
    )


@pytest.mark.slow
def test_agent_terminated_row_does_not_bootstrap_truncated_row_does():
    agent, state = _agent(double_q=False)
    # Same transition twice; only `terminated` differs (a truncated row has terminated=False).
    batch = _batch(
        obs=[[1.0, 2.0]] * 2,
        action=[1, 1],
        reward=[1.0, 1.0],
        terminated=[True, False],
        next_obs=[[4.0, 6.0]] * 2,
    )
    _, td, _ = agent.update(state, batch)
    # q(s, 1) = 2; row 0: 1 - 2 = -1; row 1: 1 + 0.5 * max(4, 6) - 2 = 2
    np.testing.assert_allclose(td, [-1.0, 2.0])


@pytest.mark.slow
@pytest.mark.parametrize(
    "double_q, expected_td", [(False, 0.5), (True, 0.0)], ids=["dqn", "double"]
)
def test_agent_double_q_selects_with_online_net(double_q, expected_td):
    agent, state = _agent(double_q=double_q)
    # Online net: Q(s') = [1, 0] + [0, 10] -> argmax 1; target net: Q(s') = [1, 0] -> argmax 0.
    state = state.replace(params=_with_bias([0.0, 10.0]), target_params=_with_bias([0.0, 0.0]))
    batch = _batch(
        obs=[[0.0, -10.0]], action=[0], reward=[0.0], terminated=[False], next_obs=[[1.0, 0.0]]
    )
    _, td, _ = agent.update(state, batch)
    # q(s, 0) = 0; DQN target 0.5 * max([1, 0]) = 0.5; double target 0.5 * Q_target(s', 1) = 0.
    np.testing.assert_allclose(td, [expected_td])


@pytest.mark.parametrize(
    "loss, delta, expected_loss",
    [
        # td = 0.5, 3: mse 0.5*td^2 = 0.125, 4.5
        pytest.param("mse", 1.0, (0.125 + 4.5) / 2, id="mse"),
        # huber delta 1: 0.5*0.5^2 = 0.125; 3 - 0.5 = 2.5
        pytest.param("huber", 1.0, (0.125 + 2.5) / 2, id="huber-1"),
        # huber delta 2: 0.125; 2 * (3 - 1) = 4
        pytest.param("huber", 2.0, (0.125 + 4.0) / 2, id="huber-2"),
    ],
)
def test_loss_per_item_by_hand(loss, delta, expected_loss):
    agent, state = _agent(loss=loss, huber_delta=delta)
    batch = _batch(
        obs=[[0.0, 0.0]] * 2,
        action=[0, 0],
        reward=[0.5, 3.0],
        terminated=[True, True],
        next_obs=[[0.0, 0.0]] * 2,
    )
    _, td, metrics = agent.update(state, batch)
    np.testing.assert_allclose(td, [0.5, 3.0])
    np.testing.assert_allclose(metrics.loss, expected_loss, rtol=1e-6)


def test_weight_zero_rows_contribute_nothing():
    agent, state = _agent(max_grad_norm=None)
    kept = dict(
        obs=[[0.5, 0.0], [0.0, 1.0]],
        action=[0, 1],
        reward=[1.0, -2.0],
        terminated=[False, True],
        next_obs=[[1.0, 2.0], [0.0, 0.0]],
    )
    junk = dict(
        obs=[[9.0, 9.0]] * 2,
        action=[1, 0],
        reward=[1e6, -1e6],
        terminated=[False, False],
        next_obs=[[1e3, 1e3]] * 2,
    )
    small = _batch(**kept)
    big = _batch(**{k: kept[k] + junk[k] for k in kept}, weight=[1.0, 1.0, 0.0, 0.0])
    new_small, _, m_small = agent.update(state, small)
    new_big, td_big, m_big = agent.update(state, big)
    np.testing.assert_allclose(m_big.loss, m_small.loss, rtol=1e-6)
    np.testing.assert_allclose(m_big.q, m_small.q, rtol=1e-6)
    np.testing.assert_allclose(_bias(new_big.params), _bias(new_small.params), rtol=1e-6)
    # td of the junk rows is still reported (for priorities), just not trained on.
    assert abs(float(td_big[2])) > 1e5
    # loss = mean over weighted rows: td = 1 + 0.5*2 - 0.5 = 1.5 and -2 - 1 = -3
    np.testing.assert_allclose(m_small.loss, (0.5 * 1.5**2 + 0.5 * 3.0**2) / 2, rtol=1e-6)
    assert int(new_big.grad_steps) == 1


@pytest.mark.slow
def test_fractional_weights_give_the_textbook_per_loss():
    """mean(w * l) over the valid rows (Schaul et al.), not sum(w * l) / sum(w)."""
    agent, state = _agent(max_grad_norm=None, loss="mse")
    batch = _batch(
        obs=[[0.0, 0.0]] * 3,
        action=[0, 0, 0],
        reward=[1.0, 2.0, 4.0],
        terminated=[True] * 3,
        next_obs=[[0.0, 0.0]] * 3,
        weight=[0.25, 0.5, 0.0],  # the last row is not stored yet
    )
    _, td, m = agent.update(state, batch)
    np.testing.assert_allclose(td, [1.0, 2.0, 4.0])
    # (0.25 * 0.5 * 1 + 0.5 * 0.5 * 4) / 2 valid rows = 0.5625; the self-normalised form would
    # give 1.125 / 0.75 = 1.5
    np.testing.assert_allclose(m.loss, 0.5625, rtol=1e-6)
    np.testing.assert_allclose(m.abs_td, (0.25 * 1 + 0.5 * 2) / 2, rtol=1e-6)
    np.testing.assert_allclose(m.q, 0.0, atol=1e-7)
    # d loss / d b[0] = sum(w * -td) / 2 = -(0.25 + 1.0) / 2; halving every weight halves it
    half = batch._replace(weight=batch.weight / 2)
    g_full = jax.grad(lambda b: _loss_at(agent, state, batch, b))(0.0)
    g_half = jax.grad(lambda b: _loss_at(agent, state, half, b))(0.0)
    np.testing.assert_allclose(g_full, -0.625, rtol=1e-6)
    np.testing.assert_allclose(g_half, g_full / 2, rtol=1e-6)


def _loss_at(agent, state, batch, b0):
    """The loss as a function of b[0], through one update's reported loss (no optimiser)."""
    params = {"params": {"b": jnp.stack([b0, jnp.float32(0.0)])}}
    _, _, m = agent.update(state.replace(params=params, target_params=params), batch)
    return m.loss


def test_all_zero_weights_give_zero_loss_and_no_change():
    agent, state = _agent(max_grad_norm=None)
    batch = _batch(
        obs=[[0.0, 0.0]],
        action=[0],
        reward=[5.0],
        terminated=[True],
        next_obs=[[0.0, 0.0]],
        weight=[0.0],
    )
    new, _, metrics = agent.update(state, batch)
    assert float(metrics.loss) == 0.0
    np.testing.assert_array_equal(_bias(new.params), 0.0)


def _adam_mu(opt_state):
    return np.asarray(optax.tree_utils.tree_get(opt_state, "mu")["params"]["b"])


@pytest.mark.parametrize(
    "max_grad_norm, expected_mu",
    [
        # grad of 0.5 * td^2 w.r.t. b[0] is -td = -30; clipped to norm 0.5: -0.5. mu = 0.1 * g.
        pytest.param(0.5, [-0.05, 0.0], id="clip-0.5"),
        pytest.param(100.0, [-3.0, 0.0], id="clip-above-norm"),
        pytest.param(None, [-3.0, 0.0], id="no-clip"),
    ],
)
def test_max_grad_norm_clips(max_grad_norm, expected_mu):
    agent, state = _agent(max_grad_norm=max_grad_norm)
    batch = _batch(
        obs=[[0.0, 0.0]], action=[0], reward=[30.0], terminated=[True], next_obs=[[0.0, 0.0]]
    )
    new, _, _ = agent.update(state, batch)
    np.testing.assert_allclose(_adam_mu(new.opt_state), expected_mu, rtol=1e-6)


def test_make_optimizer_clip_norm():
    params = {"w": jnp.zeros(4)}
    grads = {"w": jnp.array([3.0, 4.0, 0.0, 0.0])}  # norm 5
    for max_norm, norm in ((1.0, 1.0), (None, 5.0)):
        tx = make_optimizer(DQNConfig(max_grad_norm=max_norm), 1e-3)
        _, opt_state = tx.update(grads, tx.init(params), params)
        mu = optax.tree_utils.tree_get(opt_state, "mu")["w"]
        # Adam's first moment after one step is (1 - b1) * the (clipped) gradient.
        np.testing.assert_allclose(jnp.linalg.norm(mu / 0.1), norm, rtol=1e-6)


def test_hard_target_update_copies():
    agent, state = _agent(tau=1.0)
    state = state.replace(params=_with_bias([2.0, 4.0]))
    np.testing.assert_array_equal(_bias(state.target_params), [0.0, 0.0])
    state = agent.update_target(state)
    np.testing.assert_array_equal(_bias(state.target_params), [2.0, 4.0])
    np.testing.assert_array_equal(_bias(state.params), [2.0, 4.0])


@pytest.mark.parametrize(
    "tau, expected",
    [
        # target <- tau * online + (1 - tau) * target, online = [2, 4], target starts at 0
        pytest.param(0.5, ([1.0, 2.0], [1.5, 3.0]), id="tau-0.5"),
        # 0.25 * [2, 4] = [0.5, 1]; 0.25 * [2, 4] + 0.75 * [0.5, 1] = [0.875, 1.75]
        pytest.param(0.25, ([0.5, 1.0], [0.875, 1.75]), id="tau-0.25"),
    ],
)
def test_polyak_target_update_by_hand(tau, expected):
    agent, state = _agent(tau=tau)
    state = state.replace(params=_with_bias([2.0, 4.0]))
    state = agent.update_target(state)
    np.testing.assert_allclose(_bias(state.target_params), expected[0], rtol=1e-6)
    state = agent.update_target(state)
    np.testing.assert_allclose(_bias(state.target_params), expected[1], rtol=1e-6)
    np.testing.assert_array_equal(_bias(state.params), [2.0, 4.0])


def test_update_moves_q_toward_target_and_counts_steps():
    agent, state = _agent(max_grad_norm=None)
    batch = _batch(
        obs=[[0.0, 0.0]], action=[1], reward=[1.0], terminated=[True], next_obs=[[0.0, 0.0]]
    )
    new, _, _ = agent.update(state, batch)
    # Adam's first step moves each parameter with a non-zero gradient by ~lr=0.1 toward the target.
    np.testing.assert_allclose(_bias(new.params), [0.0, 0.1], atol=1e-5)
    # The target net is untouched by update.
    np.testing.assert_array_equal(_bias(new.target_params), 0.0)
    assert int(new.grad_steps) == 1


def test_act_epsilon_greedy():
    agent, state = _agent()
    state = state.replace(params=_with_bias([0.0, 0.0]))
    obs = jnp.array([[1.0, 0.0], [0.0, 1.0], [5.0, 2.0], [-1.0, 3.0]] * 8)
    greedy = agent.act(state, jax.random.key(0), obs, 0.0)
    assert greedy.dtype == jnp.int32
    np.testing.assert_array_equal(greedy, [0, 1, 0, 1] * 8)
    random = agent.act(state, jax.random.key(0), obs, 1.0)
    assert set(np.asarray(random).tolist()) == {0, 1}
    assert not np.array_equal(random, greedy)


# --------------------------------------------------------------------------- networks


@pytest.mark.slow
def test_qnetwork_output_shape_and_dtype():
    net = QNetwork(num_actions=3, hidden_sizes=(8, 8))
    obs = jnp.ones((5, 4), jnp.uint8)
    params = net.init(jax.random.key(0), obs)
    q = net.apply(params, obs)
    assert q.shape == (5, 3) and q.dtype == jnp.float32
    net16 = QNetwork(num_actions=3, hidden_sizes=(8, 8), dtype=jnp.bfloat16)
    q16 = net16.apply(net16.init(jax.random.key(0), obs), obs)
    assert q16.shape == (5, 3) and q16.dtype == jnp.float32


def test_dueling_head():
    net = QNetwork(num_actions=3, hidden_sizes=(8,), dueling=True)
    obs = jnp.ones((5, 4))
    params = net.init(jax.random.key(0), obs)
    q = net.apply(params, obs)
    assert q.shape == (5, 3) and q.dtype == jnp.float32
    p = params["params"]
    # hidden, value (1 output) and advantage (3 outputs) layers
    assert [p[k]["kernel"].shape for k in sorted(p)] == [(4, 8), (8, 1), (8, 3)]
    # Q = V + A - mean(A): the mean over actions is V.
    h = nn.relu(obs @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"])
    value = h @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"]
    np.testing.assert_allclose(q.mean(axis=-1, keepdims=True), value, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_final_layer_init_is_small():
    net = QNetwork(num_actions=2, hidden_sizes=(120, 84))
    obs = jnp.ones((4, 4))
    keys = jax.random.split(jax.random.key(0), 16)
    params = jax.vmap(net.init, in_axes=(0, None))(keys, obs)
    q = jax.vmap(net.apply, in_axes=(0, None))(params, obs)
    head = params["params"]["Dense_2"]["kernel"]
    # normal(stddev=0.01) head; He-normal hidden layers would give std sqrt(2/84) ~ 0.15.
    assert 0.008 < float(jnp.std(head)) < 0.012
    np.testing.assert_array_equal(params["params"]["Dense_2"]["bias"], 0.0)
    # For unit inputs, Q-values at init are near zero (std ~ 0.01 * sqrt(84) ~ 0.09).
    assert float(jnp.mean(jnp.abs(q))) < 0.1
    assert float(jnp.max(jnp.abs(q))) < 0.5


def _spec(obs_shape):
    return EnvSpec(
        name="test",
        obs_shape=obs_shape,
        obs_dtype=jnp.float32,
        num_actions=3,
        num_envs=1,
        max_episode_steps=10,
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["cnn", "auto"])
def test_cnn_on_image_obs(kind):
    net = QNetwork.from_config(
        NetworkConfig(kind=kind, conv_channels=(4,), hidden_sizes=(8,)), _spec((10, 10, 4))
    )
    assert net.conv_channels == (4,)
    obs = jnp.ones((2, 10, 10, 4))
    params = net.init(jax.random.key(0), obs)
    # the 3x3 conv as im2col: 9 * C_in patch features -> C_out channels
    assert params["params"]["Dense_0"]["kernel"].shape == (9 * 4, 4)
    # VALID 3x3 conv: 8 x 8 x 4 features into the dense layer.
    assert params["params"]["Dense_1"]["kernel"].shape == (8 * 8 * 4, 8)
    q = net.apply(params, obs)
    assert q.shape == (2, 3) and q.dtype == jnp.float32


@pytest.mark.parametrize("kind", ["mlp", "auto"])
def test_mlp_on_vector_obs(kind):
    net = QNetwork.from_config(NetworkConfig(kind=kind, hidden_sizes=(8,)), _spec((4,)))
    assert net.conv_channels == ()
    params = net.init(jax.random.key(0), jnp.ones((2, 4)))
    assert params["params"]["Dense_0"]["kernel"].shape == (4, 8)  # no conv layer first
    assert net.apply(params, jnp.ones((2, 4))).shape == (2, 3)


@pytest.mark.slow
def test_im2col_layer_equals_a_3x3_valid_convolution():
    net = QNetwork(num_actions=3, hidden_sizes=(), conv_channels=(5,))
    obs = jax.random.normal(jax.random.key(1), (2, 6, 7, 3))
    params = net.init(jax.random.key(0), obs)
    kernel = params["params"]["Dense_0"]["kernel"]  # [C_in * 9, C_out], channel-major patches
    bias = params["params"]["Dense_0"]["bias"]
    hwio = kernel.reshape(3, 3, 3, 5).transpose(1, 2, 0, 3)  # [C_in, kh, kw, O] -> HWIO
    conv = jax.lax.conv_general_dilated(
        obs, hwio, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    features = jax.nn.relu(conv + bias).reshape(2, -1)
    head = params["params"]["Dense_1"]
    expected = features @ head["kernel"] + head["bias"]
    np.testing.assert_allclose(net.apply(params, obs), expected, rtol=1e-5, atol=1e-5)


def test_cnn_on_vector_obs_raises():
    with pytest.raises(ValueError, match=r"NetworkConfig\.kind='cnn' needs image observations"):
        QNetwork.from_config(NetworkConfig(kind="cnn"), _spec((4,)))
