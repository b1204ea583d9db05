"""One's own gymnax env: given as an instance, registered by name, and named by import path on
the command line (`jaxrl_fast.envs.custom`)."""

from __future__ import annotations

import importlib
import json
import sys

import jax
import numpy as np
import pytest
from conftest import assert_learned_probe_chain, tiny_config

from jaxrl_fast import envs, train
from jaxrl_fast.envs import make_env

# probe-chain written as a user would write a gymnax env: its Q* is known (`envs.probe`).
MODULE = """
import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces


@struct.dataclass
class State(environment.EnvState):
    s: jax.Array


@struct.dataclass
class Params(environment.EnvParams):
    max_steps_in_episode: int = 2


class UserChain(environment.Environment):
    @property
    def default_params(self):
        return Params()

    def reset_env(self, key, params):
        state = State(time=0, s=jnp.int32(0))
        return jax.nn.one_hot(state.s, 2), state

    def step_env(self, key, state, action, params):
        reward = jnp.where(state.s == 1, (action == 1).astype(jnp.float32), 0.0)
        nxt = State(time=state.time + 1, s=jnp.minimum(state.s + 1, 1))
        return jax.nn.one_hot(nxt.s, 2), nxt, reward, state.s == 1, {}

    def action_space(self, params):
        return spaces.Discrete(2)

    def observation_space(self, params):
        return spaces.Box(0.0, 1.0, (2,))


class Pendulumish(UserChain):
    def action_space(self, params):
        return spaces.Box(-1.0, 1.0, (1,))


def make_chain():
    return UserChain(), Params()


def not_an_env():
    return 42
"""

LEARN = dict(total_env_steps=8_080, num_chunks=1, eval_episodes=4)


@pytest.fixture(scope="module")
def user_envs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("user_envs")
    (folder / "user_chain_env.py").write_text(MODULE)
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module("user_chain_env")
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("user_chain_env", None)
        for name in envs.registered_envs():
            envs.unregister(name)


@pytest.fixture(scope="module")
def learned(user_envs):
    cfg = tiny_config(**LEARN)
    return cfg, train(cfg, env=user_envs.UserChain(), progress=False)


@pytest.mark.slow
@pytest.mark.learning
def test_an_env_instance_trains_and_evaluates(learned):
    cfg, result = learned
    assert result.config.env.name == "user:UserChain"
    assert_learned_probe_chain(result, cfg)
    np.testing.assert_allclose(result.final_return, [1.0, 1.0])  # the evaluation used it too


@pytest.mark.slow
def test_a_registered_name_trains_the_same_program(user_envs, learned):
    cfg, by_instance = learned
    envs.register("user-chain", user_envs.UserChain)
    assert "user-chain" in envs.list_envs()
    by_name = train(cfg.replace(env={"name": "user-chain"}), progress=False)
    same = jax.tree.map(
        np.array_equal, by_name.runner.seeds.agent.params, by_instance.runner.seeds.agent.params
    )
    assert all(jax.tree.leaves(same))  # one program, the same seeds: bitwise equal
    np.testing.assert_allclose(by_name.final_return, [1.0, 1.0])


@pytest.mark.slow
def test_the_cli_names_an_env_by_import_path(user_envs, tmp_path):
    from jaxrl_fast.cli import main

    out = tmp_path / "run"
    argv = ["train", "--env", "user_chain_env:make_chain", "--no-progress", "--out", str(out)]
    argv += ["--env.num-envs", "4", "--network.hidden-sizes", "32", "--replay.capacity", "400"]
    argv += ["--replay.batch-size", "16", "--dqn.gamma", "0.9", "--dqn.learning-rate", "1e-3"]
    argv += ["--dqn.target-period", "40", "--total-env-steps", "880", "--learning-starts", "80"]
    argv += ["--train-frequency", "4", "--num-seeds", "1", "--eval-episodes", "2"]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["env"]["name"] == "user_chain_env:make_chain"
    assert summary["env_steps_per_seed"] == 880 and len(summary["seeds"]) == 1


@pytest.mark.slow
def test_a_sweep_and_a_resume_take_the_env_instance(user_envs, learned, tmp_path):
    cfg, _ = learned
    swept = train(
        cfg.replace(num_seeds=1),
        env=user_envs.UserChain(),
        sweep={"dqn.gamma": [0.9, 0.5]},
        progress=False,
    )
    assert len(swept.points) == 2
    run = tmp_path / "run"
    small = tiny_config(num_seeds=1, eval_episodes=0)
    first = train(small, env=user_envs.UserChain(), run_dir=run, progress=False)
    again = train(small, env=user_envs.UserChain(), run_dir=run, resume=True, progress=False)
    assert again.config.env.name == first.config.env.name == "user:UserChain"


def test_make_env_builds_registered_and_imported_envs(user_envs):
    envs.register("user-chain-2", user_envs.make_chain)
    for name in ("user-chain-2", "user_chain_env:UserChain", "user_chain_env:make_chain"):
        env = make_env(name, num_envs=3)
        assert env.spec.name == name and env.spec.num_actions == 2
        assert env.spec.obs_shape == (2,) and env.spec.max_episode_steps == 2
        state, obs = env.reset(jax.random.key(0))
        state, obs, reward, done, info = env.step(jax.random.key(1), state, np.ones(3, int))
        state, obs, reward, done, info = env.step(jax.random.key(2), state, np.ones(3, int))
        np.testing.assert_array_equal(reward, [1.0, 1.0, 1.0])
        assert bool(info["terminated"].all())


def test_a_box_action_env_is_discretised(user_envs):
    with pytest.raises(ValueError, match="discretise"):
        make_env("user_chain_env:Pendulumish", num_envs=2)
    env = make_env("user_chain_env:Pendulumish", num_envs=2, discretise=5)
    assert env.spec.num_actions == 5


@pytest.mark.parametrize(
    "name, message",
    [
        ("user_chain_env:nothing", "has no 'nothing'"),
        ("no_such_module_here:make", "cannot import 'no_such_module_here'"),
        ("user_chain_env:not_an_env", "returned a int"),
        ("user:Elsewhere", "in another process"),
    ],
)
def test_bad_env_names_are_clear_errors(user_envs, name, message):
    with pytest.raises(ValueError, match=message):
        make_env(name, num_envs=2)


def test_register_refuses_built_in_names_and_silent_overwrites(user_envs):
    with pytest.raises(ValueError, match="built-in"):
        envs.register("CartPole-v1", user_envs.UserChain)
    with pytest.raises(ValueError, match="':'"):
        envs.register("a:b", user_envs.UserChain)
    envs.register("user-chain-3", user_envs.UserChain)
    with pytest.raises(ValueError, match="overwrite=True"):
        envs.register("user-chain-3", user_envs.make_chain)
    envs.register("user-chain-3", user_envs.make_chain, overwrite=True)
    with pytest.raises(TypeError, match="callable"):
        envs.register("user-chain-4", user_envs.UserChain())


def test_train_refuses_what_is_not_an_env():
    with pytest.raises(TypeError, match="gymnax Environment instance"):
        train(tiny_config(), env=object(), progress=False)
