"""Env parameters varying over seeds (variants) and over training (curriculum):
`envs/variation.py`, `EnvConfig.variants`, `CurriculumConfig`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import child_env

from jaxrl_fast import presets
from jaxrl_fast.config import CurriculumConfig, EnvConfig, TrainConfig
from jaxrl_fast.envs import make_env
from jaxrl_fast.envs.variation import make_variation
from jaxrl_fast.loop import make_train

POLES = "length=0.25,polemass_length=0.025;length=1.0,polemass_length=0.1"


def _cartpole(num_seeds=2, **env):
    return presets.get("cartpole").replace(
        env=env, num_seeds=num_seeds, total_env_steps=2_000, learning_starts=1_000
    )


@pytest.mark.slow
def test_env_params_live_in_the_state_and_survive_auto_resets():
    env = make_env("MountainCar-v0", 4, param_fields=("goal_position",))
    state, obs = env.reset_with(jax.random.key(0), {"goal_position": jnp.float32(-0.45)})
    default_state, default_obs = env.reset(jax.random.key(0))
    np.testing.assert_array_equal(np.asarray(obs), np.asarray(default_obs))  # same draws
    assert float(env.params_of(default_state)["goal_position"]) == pytest.approx(0.5)
    # goal just right of the start: pushing right ends episodes, which reset with the goal kept
    dones = 0
    for i in range(60):
        state, obs, _, done, info = env.step(jax.random.key(i), state, jnp.full((4,), 2))
        dones += int(jnp.sum(info["terminated"]))
    assert dones >= 4
    assert float(env.params_of(state)["goal_position"]) == pytest.approx(-0.45)
    state = env.with_params(state, {"goal_position": jnp.float32(0.1)})
    assert float(env.params_of(state)["goal_position"]) == pytest.approx(0.1)


def test_variant_and_curriculum_config_errors():
    with pytest.raises(ValueError, match=r"EnvConfig\.variants='length' is not allowed"):
        EnvConfig(variants="length")
    with pytest.raises(ValueError, match=r"every variant must set the same fields"):
        EnvConfig(variants="length=1;masspole=2")
    with pytest.raises(ValueError, match=r"TrainConfig\.num_seeds=3 .* multiple of 2"):
        TrainConfig(env=EnvConfig(variants=POLES), num_seeds=3)
    with pytest.raises(ValueError, match=r"not allowed with an envpool env"):
        EnvConfig(name="envpool:Pong-v5", variants="x=1")
    with pytest.raises(ValueError, match=r"CurriculumConfig\.end=1 is not allowed"):
        CurriculumConfig(param="length", start=1, end=1)
    with pytest.raises(ValueError, match=r"CurriculumConfig\.advance='later'"):
        CurriculumConfig(param="length", start=1, end=2, advance="later")
    with pytest.raises(ValueError, match=r"curriculum\.param='length' is also set by"):
        EnvConfig(variants="length=1;length=2", curriculum=CurriculumConfig(param="length", end=2))
    with pytest.raises(ValueError, match=r"no env parameter 'lenght'.*Did you mean 'length'"):
        make_train(_cartpole(variants="lenght=1;lenght=2"))
    with pytest.raises(ValueError, match=r"vary gymnax env parameters; probe-chain has none"):
        make_env("probe-chain", 2, param_fields=("x",))


@pytest.mark.slow
def test_each_seed_trains_and_evaluates_on_its_variant():
    cfg = _cartpole(4, variants=POLES)
    fns = make_train(cfg)
    runner = jax.jit(fns.init)(jax.random.split(jax.random.key(0), 4))
    values = fns.run.env.params_of(runner.seeds.env_state)
    np.testing.assert_allclose(np.asarray(values["length"]), [0.25, 1.0, 0.25, 1.0])
    np.testing.assert_allclose(np.asarray(values["polemass_length"]), [0.025, 0.1, 0.025, 0.1])
    # global seed ids pick the variant: a device holding seeds 2 and 3 sees ids [2, 3]
    runner = jax.jit(fns.init)(jax.random.split(jax.random.key(0), 2), jnp.array([3, 2]))
    np.testing.assert_allclose(
        np.asarray(fns.run.env.params_of(runner.seeds.env_state)["length"]), [1.0, 0.25]
    )


@pytest.mark.slow
def test_variant_dynamics_differ_from_the_same_start():
    """Same keys, same actions: the 0.25 m pole falls faster than the 1 m one."""
    cfg = _cartpole(2, variants=POLES)
    env = make_train(cfg).run.env
    keys = jnp.stack([jax.random.key(7)] * 2)
    variation = make_variation(cfg)
    state, obs = env.reset_with(keys, variation.initial(jnp.arange(2)))
    np.testing.assert_array_equal(np.asarray(obs[0]), np.asarray(obs[1]))
    start = np.asarray(obs[0, :, 3])
    for i in range(2):  # two pushes: no episode ends yet
        step_keys = jnp.stack([jax.random.key(100 + i)] * 2)
        state, obs, _, done, _ = env.step(step_keys, state, jnp.ones((2, 10), jnp.int32))
        assert not bool(jnp.any(done))
    change = np.abs(np.asarray(obs[..., 3]) - start)  # angular velocity change [2, 10 envs]
    assert np.all(change[0] > 2 * change[1])


def test_progress_curriculum_by_hand():
    """stages 5 over 20 blocks: after block b the next block runs at stage (b+1)*5 // 20."""
    cfg = presets.get("cartpole").replace(
        env={"name": "MountainCar-v0", "curriculum": {"param": "goal_position", "start": -0.3,
                                                      "end": 0.5, "stages": 5}},
        total_env_steps=1_000 + 20 * 10, learning_starts=1_000, num_chunks=1,
    )  # fmt: skip
    v = make_variation(cfg)
    assert v.num_blocks == 20
    values = v.initial(jnp.arange(3))
    np.testing.assert_allclose(np.asarray(values["goal_position"]), [-0.3] * 3)
    zeros = jnp.zeros(3)
    for block, want in [(0, -0.3), (3, -0.1), (8, 0.1), (14, 0.3), (15, 0.5), (19, 0.5)]:
        got = v.advance(values, zeros, zeros, jnp.int32(block))["goal_position"]
        np.testing.assert_allclose(np.asarray(got), [want] * 3, atol=1e-6)
    assert float(v.for_evaluation(values)["goal_position"][0]) == pytest.approx(0.5)


def test_return_curriculum_moves_only_the_seeds_that_pass():
    cfg = presets.get("cartpole").replace(
        env={"name": "MountainCar-v0", "curriculum": {"param": "goal_position", "start": -0.3,
             "end": 0.5, "stages": 5, "advance": "return", "success_return": -150.0}},
    )  # fmt: skip
    v = make_variation(cfg)
    values = {"goal_position": jnp.array([-0.3, -0.1, 0.5, -0.3], jnp.float32)}
    returns = jnp.array([-280.0, -200.0, -100.0, 0.0])  # summed over the block's episodes
    episodes = jnp.array([2.0, 1.0, 1.0, 0.0])  # means -140, -200, -100; no episode
    got = v.advance(values, returns, episodes, jnp.int32(0))["goal_position"]
    np.testing.assert_allclose(np.asarray(got), [-0.1, -0.1, 0.5, -0.3], atol=1e-6)


@pytest.mark.slow
@pytest.mark.learning
def test_curriculum_runs_in_the_loop_and_reaches_the_end():
    cfg = presets.get("cartpole").replace(
        env={"name": "MountainCar-v0", "curriculum": {"param": "goal_position", "start": -0.3,
                                                      "end": 0.5, "stages": 4}},
        total_env_steps=21_000, num_seeds=2, num_chunks=4,
    )  # fmt: skip
    from jaxrl_fast.run.train import train

    result = train(cfg, progress=False)
    fns = make_train(cfg)
    seen = np.asarray(fns.run.env.params_of(result.runner.seeds.env_state)["goal_position"])
    np.testing.assert_allclose(seen, [0.5, 0.5], atol=1e-6)
    assert result.final_return.shape == (2,)


SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jaxrl_fast.parallel as par
    assert par.use_cpu_cores(2)
    import jax, numpy as np
    from jaxrl_fast import presets
    from jaxrl_fast.loop import make_train
    from jaxrl_fast.run.train import train
    cfg = presets.get("cartpole").replace(
        env={"variants": "length=0.25,polemass_length=0.025;length=1.0,polemass_length=0.1"},
        num_seeds=4, total_env_steps=1_400, learning_starts=1_000, num_chunks=1)
    result = train(cfg, progress=False)
    env = make_train(cfg).run.env
    lengths = np.asarray(env.params_of(result.runner.seeds.env_state)["length"]).tolist()
    print(json.dumps({"devices": result.num_devices, "lengths": lengths,
                      "variants": result.summary()["variants"]}))
    """
)


@pytest.mark.slow
def test_variants_over_two_devices_follow_the_global_seed_index():
    env = child_env()
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=env,
        cwd=os.path.join(os.path.dirname(__file__), "..", ".."),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["devices"] == 2
    np.testing.assert_allclose(out["lengths"], [0.25, 1.0, 0.25, 1.0])
    assert [v["seed_indices"] for v in out["variants"]] == [[0, 2], [1, 3]]
    assert out["variants"][1]["params"] == {"length": 1.0, "polemass_length": 0.1}


@pytest.mark.slow
def test_recipes_together_with_replay_tiers_and_precision():
    """Discretised actions, shaping, a curriculum and variants in one run, with prioritised
    replay, the host L3 tier and bf16 compute: it trains, finite, and the env parameters end
    where the curriculum and the variants put them."""
    from jaxrl_fast.run.train import train

    cfg = presets.get("reacher-81").replace(
        env={
            "num_envs": 4,
            "reward_shaping": "potential:reacher-distance",
            "variants": "dt=0.05;dt=0.04",
            "curriculum": {"param": "torque_scale", "start": 2.0, "end": 1.0, "stages": 2},
        },
        replay={"capacity": 400, "prioritised": True, "l3": "host", "l3_capacity": 800,
                "l3_share": 0.25},
        precision={"compute": "bf16"},
        num_seeds=2, total_env_steps=2_400, learning_starts=400, train_frequency=4,
        num_chunks=2, eval_episodes=2,
    )  # fmt: skip
    result = train(cfg, progress=False)
    assert np.all(np.isfinite([h["loss"] for h in result.history]))
    assert np.all(np.isfinite(result.final_return)) and result.final_return.shape == (2,)
    assert np.all((result.final_return >= 0.0) & (result.final_return <= 100.0))  # env's own
    values = make_train(cfg).run.env.params_of(result.runner.seeds.env_state)
    np.testing.assert_allclose(np.asarray(values["torque_scale"]), [1.0, 1.0])
    np.testing.assert_allclose(np.asarray(values["dt"]), [0.05, 0.04], rtol=1e-6)
    assert result.history[-1]["replay"]  # the tiers report their counters
