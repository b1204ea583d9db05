"""Learning from demonstrations (issue 17, part 2): the large-margin loss and its decaying
weight, scripted and recorded demonstrations (`jaxrl_fast.loop.demos`), the refusals, and the loop
learning the demonstrator's actions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import tiny_config

from jaxrl_fast.agent.dqn import make_agent
from jaxrl_fast.agent.losses import make_loss as _make_loss
from jaxrl_fast.agent.margin import MarginSpec
from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.config import DemoConfig, DQNConfig, NetworkConfig, ReplayConfig, TrainConfig
from jaxrl_fast.loop import demos
from jaxrl_fast.trained.demos import record
from jaxrl_fast.types import Batch

Q = np.array([[1.0, 0.5, 0.2], [0.0, 0.3, 0.9], [2.0, 2.0, 2.0], [0.1, 0.0, 0.0]], np.float32)


class _FixedQ:
    """A stand-in network: the same Q-values for any input and parameters."""

    @staticmethod
    def apply(params, obs):
        return jnp.asarray(Q) + 0.0 * jnp.sum(params)


def _batch(demo):
    return Batch(
        obs=jnp.zeros((4, 1)),
        action=jnp.array([1, 2, 0, 0]),
        reward=jnp.zeros(4),
        discount=jnp.zeros(4),  # terminal: the TD target is the reward
        next_obs=jnp.zeros((4, 1)),
        weight=jnp.ones(4),
        index=jnp.arange(4),
        demo=None if demo is None else jnp.asarray(demo),
    )


def test_the_margin_loss_on_demonstration_rows():
    config = DQNConfig(loss="mse", double_q=False)
    loss_fn = _make_loss(config, _FixedQ, margin=0.8)
    params = jnp.zeros(())
    demo = [True, True, False, True]
    td_loss, _ = _make_loss(config, _FixedQ)(params, params, _batch(demo))
    # row 0: a_E = 1 (0.5): max(1.0 + 0.8, 0.5, 0.2 + 0.8) - 0.5 = 1.3
    # row 1: a_E = 2 (0.9): max(0.8, 1.1, 0.9) - 0.9 = 0.2
    # row 3: a_E = 0 (0.1): max(0.1, 0.8, 0.8) - 0.1 = 0.7; row 2 is not a demonstration
    gaps = (1.3 + 0.2 + 0.7) / 3
    for weight in (0.0, 0.5, 2.0):
        loss, _ = loss_fn(params, params, _batch(demo), None, weight)
        np.testing.assert_allclose(float(loss), float(td_loss) + weight * gaps, rtol=1e-6)
    no_demos, _ = loss_fn(params, params, _batch(None), None, 1.0)  # a batch without the flag
    np.testing.assert_allclose(float(no_demos), float(td_loss), rtol=1e-6)


@pytest.mark.slow
def test_the_margin_weight_decays_linearly_over_the_updates():
    net = QNetwork(3, (8,))
    agent = make_agent(DQNConfig(loss="mse"), net, 3, demo=MarginSpec(0.8, 2.0, 10))
    state = agent.init(jax.random.key(0), jnp.zeros((4, 1)))
    batch = _batch([True, True, False, True])

    def loss_at(step):
        s = state.replace(grad_steps=jnp.asarray(step, jnp.int32))
        return float(agent.update(s, batch)[2].loss)

    base = loss_at(10)  # weight 0 from update 10 on
    assert loss_at(25) == pytest.approx(base)
    full = loss_at(0) - base
    assert full > 0
    assert loss_at(5) - base == pytest.approx(full / 2, rel=1e-4)
    assert loss_at(8) - base == pytest.approx(full * 0.2, rel=1e-4)


@pytest.mark.slow
def test_scripted_cartpole_demonstrations_balance_the_pole():
    cfg = TrainConfig(demo=DemoConfig(source="scripted", steps=5_000))
    steps = demos.scripted_steps(cfg)
    assert steps.obs.shape == (500, 10, 4)  # 5,000 steps over 10 envs
    # no episode ends within 500 steps: the controller never drops the pole
    assert not steps.terminated.any() and not steps.reset.any()


@pytest.mark.slow
def test_scripted_policy_on_a_discretised_arm():
    from jaxrl_fast.envs.scripted import scripted_policy

    policy = scripted_policy("Reacher-misc", 9)
    obs = jnp.array([1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.5, 1.2])
    action = int(policy(obs))
    assert 0 <= action < 81
    with pytest.raises(ValueError, match="without EnvConfig.discretise"):
        scripted_policy("Reacher-misc")
    with pytest.raises(ValueError, match="no scripted policy for 'Acrobot-v1'"):
        scripted_policy("Acrobot-v1")


@pytest.fixture(scope="module")
def probe_run():
    from jaxrl_fast.run.train import train

    return train(tiny_config(), progress=False)


@pytest.mark.slow
def test_record_and_load_round_trip(probe_run, tmp_path):
    path = tmp_path / "probe.npz"
    steps = record(probe_run, path, steps=60)
    assert steps.obs.shape == (15, 4, 2)
    loaded = demos.load(path, probe_run.config)
    for a, b in zip(loaded[:6], steps[:6], strict=True):
        np.testing.assert_array_equal(a, b)
    # the greedy agent takes action 1 in state 1 (probe-chain's reward)
    state_one = steps.obs[..., 1] == 1
    assert (steps.action[state_one] == 1).all()
    cfg = probe_run.config.replace(demo={"source": str(path)})
    rows = demos.load_demos(cfg)
    assert rows is not None and len(rows.action) > 20


@pytest.mark.slow
def test_load_refuses_other_envs_and_bad_files(probe_run, tmp_path):
    path = tmp_path / "probe.npz"
    record(probe_run, path, steps=40)
    other = probe_run.config.replace(env={"name": "probe-bandit"})
    with pytest.raises(ValueError, match="recorded with env='probe-chain'"):
        demos.load(path, other)
    with pytest.raises(ValueError, match="no such file"):
        demos.load(tmp_path / "missing.npz", probe_run.config)
    broken = tmp_path / "broken.npz"
    broken.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="cannot be read"):
        demos.load(broken, probe_run.config)
    with pytest.raises(ValueError, match="seed_index=5"):
        record(probe_run, path, steps=40, seed_index=5)


def test_config_refusals():
    with pytest.raises(ValueError, match="DemoConfig.share=1.5"):
        DemoConfig(source="scripted", share=1.5)
    with pytest.raises(ValueError, match="gives 0 demonstration rows"):
        TrainConfig(
            replay=ReplayConfig(batch_size=4), demo=DemoConfig(source="scripted", share=0.1)
        )
    with pytest.raises(ValueError, match="lstm=0, l3='off'"):
        TrainConfig(
            network=NetworkConfig(lstm=8),
            replay=ReplayConfig(sequence_length=4),
            demo=DemoConfig(source="scripted"),
        )
    with pytest.raises(ValueError, match="not supported by the conventional baseline"):
        from jaxrl_fast.baseline import train_unfused

        train_unfused(tiny_config(demo={"source": "scripted"}))


@pytest.mark.slow
def test_the_loop_learns_the_demonstrators_actions():
    """CartPole with half of every batch from the scripted controller and a strong margin
    loss: after 100 updates the greedy policy takes the controller's action on most
    demonstrated states; trained the same way without demonstrations it does not yet."""
    from jaxrl_fast import presets
    from jaxrl_fast.envs.scripted import cartpole_balance
    from jaxrl_fast.run.train import train

    cfg = presets.get("cartpole").replace(
        total_env_steps=2_000,
        learning_starts=1_000,
        num_seeds=2,
        eval_episodes=0,
        schedule={"lr_schedule": "constant"},
        demo={"source": "scripted", "steps": 2_000, "share": 0.5, "weight": 5.0},
    )
    obs = jnp.asarray(demos.scripted_steps(cfg).obs.reshape(-1, 4))
    want = jax.vmap(cartpole_balance)(obs)
    net = QNetwork.from_config(cfg.network, demos.env_of(cfg).spec, cfg.algo)

    def agreement(result):
        out = []
        for s in range(cfg.num_seeds):
            params = jax.tree.map(lambda x, s=s: x[s], result.runner.seeds.agent.params)
            greedy = jnp.argmax(net.apply(params, obs), axis=-1)
            out.append(float(jnp.mean(greedy == want)))
        return out

    with_demos = agreement(train(cfg, progress=False))
    without = agreement(train(cfg.replace(demo={"source": ""}), progress=False))
    # measured: 0.80 and 0.83 with demonstrations, 0.50 and 0.50 (one action) without
    assert min(with_demos) >= 0.75, with_demos
    assert max(without) <= 0.6, without


@pytest.mark.slow
def test_recorded_demonstrations_with_prioritised_replay(probe_run, tmp_path):
    """Prioritised replay with demonstration rows (index -1, not L2 rows): finite priorities,
    and the run learns probe-chain."""
    from jaxrl_fast.run.train import train

    path = tmp_path / "probe.npz"
    record(probe_run, path, steps=200)
    cfg = tiny_config(
        replay=ReplayConfig(capacity=400, batch_size=16, prioritised=True),
        demo={"source": str(path), "share": 0.25},
        eval_episodes=2,
    )
    result = train(cfg, progress=False)
    assert result.final_return.tolist() == [1.0, 1.0]
    priorities = np.asarray(result.runner.seeds.replay.priorities)
    assert np.isfinite(priorities).all()


def test_demonstrations_refuse_a_gamma_schedule():
    with pytest.raises(ValueError, match=r"gamma_schedule='0\.99:0\.5,0\.9'.*staged once"):
        TrainConfig().replace(
            demo={"source": "scripted"}, schedule={"gamma_schedule": "0.99:0.5,0.9"}
        )


def test_demonstration_files_are_read_when_the_run_is_resolved_not_when_built(tmp_path):
    """`resolve` reads the file once; building the loop (and so tracing it) reads nothing."""
    from jaxrl_fast.loop import make_train
    from jaxrl_fast.loop.resolve import resolve

    cfg = TrainConfig(demo=DemoConfig(source="scripted", steps=400))
    path = tmp_path / "cartpole.npz"
    demos.save(path, demos.scripted_steps(cfg), cfg)
    cfg = cfg.replace(demo={"source": str(path)}, replay={"capacity": 1_000})
    run = resolve(cfg)
    assert run.demos is not None and run.demos.obs.shape[0] == 400 - 10  # the last step's rows wait
    path.unlink()  # nothing below may read it
    fns = make_train(run)
    assert fns.buffer.init().demo.obs.shape == run.demos.obs.shape
    with pytest.raises(ValueError, match="cartpole.npz"):
        resolve(cfg)  # the file is gone: resolving again says so, naming it
