"""Schedules of traced hyperparameters: each formula against optax at fixed values, the gamma
phases, per-seed values under vmap, and the config's schedule and priority-formula checks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from conftest import tiny_config

from jaxrl_fast.agent.schedules import cosine_restarts, factor_decay, make_schedules
from jaxrl_fast.config import ReplayConfig, ScheduleConfig, parse_gamma_schedule
from jaxrl_fast.config.hparams import hparams_of, kinds_of, stack
from jaxrl_fast.replay import staging
from jaxrl_fast.types import Transition


def _cfg(**schedule):
    # 880 env steps, 4 envs, 200 updates (tiny_config)
    return tiny_config(schedule=schedule)


def test_linear_epsilon_matches_optax():
    cfg = _cfg(epsilon_start=1.0, epsilon_end=0.1, epsilon_fraction=0.5)
    eps = make_schedules(cfg).epsilon
    ref = optax.linear_schedule(1.0, 0.1, 440)
    for t in (0, 1, 100, 439, 440, 441, 879):
        np.testing.assert_allclose(float(eps(t)), float(ref(t)), rtol=1e-6, atol=1e-7)


def test_factor_epsilon_matches_optax_staircase_decay():
    # the seed article: 1.0 x 0.995 every 1,000 steps, never below 0.01
    ref = optax.exponential_decay(1.0, 1000, 0.995, staircase=True, end_value=0.01)
    for t in (0, 999, 1000, 1999, 2000, 250_000, 918_999, 919_000, 2_000_000):
        got = factor_decay(1.0, 0.995, 1000.0, 0.01, jnp.float32(t))
        np.testing.assert_allclose(float(got), float(ref(t)), rtol=2e-5)
    assert float(factor_decay(1.0, 0.995, 1000.0, 0.01, jnp.float32(5e6))) == pytest.approx(0.01)


def test_factor_epsilon_through_the_config():
    cfg = _cfg(epsilon_schedule="factor", epsilon_factor=0.5, epsilon_every=100, epsilon_end=0.2)
    eps = make_schedules(cfg).epsilon
    np.testing.assert_allclose(
        [float(eps(t)) for t in (0, 99, 100, 250, 800)], [1, 1, 0.5, 0.25, 0.2]
    )


def test_cosine_restarts_match_optax_sgdr():
    lr, floor, period = 3e-4, 0.1, 20
    cycle = dict(
        init_value=lr, peak_value=lr, warmup_steps=0, decay_steps=period, end_value=lr * floor
    )
    ref = optax.sgdr_schedule([cycle] * 5)
    for t in (0, 1, 7, 10, 19, 20, 21, 35, 40, 59, 99):
        got = cosine_restarts(lr, floor, float(period), jnp.float32(t))
        np.testing.assert_allclose(float(got), float(ref(t)), rtol=1e-5)


def test_cosine_restarts_through_the_config():
    # 200 updates, periods of a tenth: 20 updates; back at the peak at 20, 40, ...
    cfg = _cfg(lr_schedule="cosine_restarts", lr_period_fraction=0.1, lr_end_fraction=0.0)
    lr = make_schedules(cfg).learning_rate
    peak = cfg.dqn.learning_rate
    np.testing.assert_allclose(
        [float(lr(t)) for t in (0, 10, 20, 40, 180, 190)],
        [peak, peak / 2, peak, peak, peak, peak / 2],
        rtol=1e-5,
    )
    assert float(lr(19)) < 0.01 * peak


def test_linear_learning_rate_matches_optax():
    cfg = _cfg(lr_schedule="linear", lr_end_fraction=0.1)
    lr = make_schedules(cfg).learning_rate
    ref = optax.linear_schedule(1e-3, 1e-4, cfg.total_updates)
    for t in (0, 50, 199, 200, 300):
        np.testing.assert_allclose(float(lr(t)), float(ref(t)), rtol=1e-5)


def test_gamma_phases_by_training_fraction():
    cfg = _cfg(gamma_schedule="0.99:0.3,0.95:0.7,0.9")
    s = make_schedules(cfg)
    got = [float(s.gamma(f)) for f in (0.0, 0.29, 0.3, 0.69, 0.7, 1.0)]
    np.testing.assert_allclose(got, [0.99, 0.99, 0.95, 0.95, 0.9, 0.9], rtol=1e-7)
    # collect steps count all envs of a seed: 880 env steps / 4 envs = 220 collect steps
    np.testing.assert_allclose(float(s.collect_gamma(65)), 0.99, rtol=1e-7)  # 260 steps: 29.5%
    np.testing.assert_allclose(float(s.collect_gamma(66)), 0.95, rtol=1e-7)  # 264: 30%
    np.testing.assert_allclose(float(s.update_gamma(140)), 0.9, rtol=1e-7)  # 70% of 200
    # a constant schedule is DQNConfig.gamma (tiny: 0.9) everywhere
    np.testing.assert_allclose(float(make_schedules(tiny_config()).gamma(0.8)), 0.9, rtol=1e-7)


def test_a_horizon_makes_a_shorter_run_follow_a_longer_runs_schedules():
    # tiny: 880 env steps, 200 updates; its fractions of a 1,760-step horizon (400 updates)
    sched = dict(epsilon_start=1.0, epsilon_end=0.1, epsilon_fraction=0.5, lr_schedule="linear",
                 lr_end_fraction=0.1, gamma_schedule="0.99:0.3,0.95:0.7,0.9")  # fmt: skip
    s = make_schedules(_cfg(**sched, horizon=1_760))
    eps, lr = optax.linear_schedule(1.0, 0.1, 880), optax.linear_schedule(1e-3, 1e-4, 400)
    for t in (0, 440, 879):  # epsilon over 880 env steps: the run ends mid-decay
        np.testing.assert_allclose(float(s.epsilon(t)), float(eps(t)), rtol=1e-6)
    for t in (0, 100, 199):  # the rate at the run's end: (1e-3 + 1e-4) / 2, not 1e-4
        np.testing.assert_allclose(float(s.learning_rate(t)), float(lr(t)), rtol=1e-5)
    np.testing.assert_allclose(float(s.update_gamma(100)), 0.99, rtol=1e-7)  # 25% of 400
    np.testing.assert_allclose(float(s.update_gamma(199)), 0.95, rtol=1e-7)  # 50%: not 0.9
    np.testing.assert_allclose(float(s.collect_gamma(220)), 0.95, rtol=1e-7)  # 880 / 1760 = 50%
    # None (the default) is the run's own budget: the same numbers as a horizon of 880
    own, same = make_schedules(_cfg(**sched)), make_schedules(_cfg(**sched, horizon=880))
    for t in (0, 300, 879):
        assert float(own.epsilon(t)) == float(same.epsilon(t))
    assert float(own.learning_rate(150)) == float(same.learning_rate(150))


def test_schedules_take_each_seeds_hparams_under_vmap():
    a = tiny_config()
    b = a.replace(
        schedule={"lr_schedule": "linear", "epsilon_schedule": "factor", "epsilon_every": 10},
        dqn={"learning_rate": 5e-3},
    )
    hp = stack([hparams_of(a), hparams_of(b)])
    kinds = kinds_of(hp)  # the kinds present (constant and linear lr; linear and factor eps)
    assert (kinds.lr, kinds.epsilon, kinds.clip) == ((0, 1), (0, 1), True)
    s = make_schedules(a, kinds)  # b's values come in as data only
    lr = jax.vmap(s.learning_rate, (None, 0))(100, hp)
    np.testing.assert_allclose(lr, [1e-3, 2.5e-3], rtol=1e-5)
    eps = jax.vmap(s.epsilon, (None, 0))(25, hp)
    np.testing.assert_allclose(eps, [1.0 - 0.95 * 25 / 440, 0.995**2], rtol=1e-5)


def _step(reward, terminated):
    e = len(reward)
    flag = jnp.zeros(e, bool)
    return Transition(
        obs=jnp.zeros((e, 1)),
        action=jnp.zeros(e, jnp.int32),
        reward=jnp.asarray(reward, jnp.float32),
        terminated=jnp.asarray(terminated),
        truncated=flag,
        reset=flag,
    )


@pytest.mark.slow
def test_staging_with_a_traced_gamma_matches_a_constant_one():
    example = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), _step([0.0], [False]))
    rows = {}
    for gamma in (0.9, jnp.float32(0.9)):
        state = staging.init(3, example)
        for r, term in ((1.0, False), (2.0, False), (4.0, True)):
            state, row = staging.stage(state, _step([r], [term]), gamma)
        rows[type(gamma).__name__] = row
    a, b = rows.values()
    np.testing.assert_allclose(a.reward, [1.0 + 0.9 * 2.0 + 0.81 * 4.0], rtol=1e-6)
    np.testing.assert_allclose(b.reward, a.reward, rtol=1e-6)
    np.testing.assert_array_equal(b.discount, [0.0])


@pytest.mark.parametrize(
    "text",
    [
        "0.99:0.7,0.9:0.3,0.8",
        "0.99:0.3",
        "1.5",
        "0.9:0,0.8",
        "0.9:1.0,0.8",
        "a:0.2,0.9",
        "0.9,0.8",
        "0.9:0.1,0.8:0.2,0.7:0.3,0.6:0.4,0.5",
    ],
)
def test_bad_gamma_schedules_are_refused(text):
    assert parse_gamma_schedule(text) is None
    with pytest.raises(
        ValueError, match=r"ScheduleConfig\.gamma_schedule=.*0\.99:0\.3,0\.95:0\.7,0\.9"
    ):
        ScheduleConfig(gamma_schedule=text)


@pytest.mark.parametrize(
    "field, value, allowed",
    [
        ("epsilon_schedule", "cosine", r"\('linear', 'factor'\)"),
        ("epsilon_factor", 1.5, r"\(0, 1\]"),
        ("epsilon_every", 0, "positive int"),
        ("lr_schedule", "step", "cosine_restarts"),
        ("lr_period_fraction", 0.0, r"\(0, 1\]"),
        ("horizon", 0, "an int >= 1"),
    ],
)
def test_bad_schedule_fields_are_refused(field, value, allowed):
    with pytest.raises(ValueError, match=rf"ScheduleConfig\.{field}=.*{allowed}"):
        ScheduleConfig(**{field: value})


@pytest.mark.parametrize(
    "formula, rule",
    [
        ("sqrt(td_error) + 0.1", "sqrt"),
        ("sqrt(|td|)+0.1", "sqrt"),
        ("(|td| + eps)^alpha", "power"),
        ("(|td_error| + eps) ** alpha", "power"),
        ("power", "power"),
    ],
)
def test_article_priority_formulas_parse_to_rules(formula, rule):
    assert ReplayConfig(priority=formula, prioritised=True).priority_rule == rule


def test_other_priority_formulas_are_refused_with_the_allowed_forms():
    for formula in ("td^2", "sqrt(td_error) + 0.2", "(|td| + eps)^beta"):
        with pytest.raises(ValueError, match=r"ReplayConfig\.priority=.*sqrt\(td_error\) \+ 0\.1"):
            ReplayConfig(priority=formula)


@pytest.mark.slow
def test_the_loop_commits_each_transition_with_the_gamma_of_its_step():
    from jaxrl_fast.run.train import train

    # 220 collect steps of 4 envs; the ring holds them all; gamma 0.9 until half the run, then 0.5
    cfg = tiny_config(
        replay={"capacity": 880}, schedule={"gamma_schedule": "0.9:0.5,0.5"}, num_seeds=1
    )
    result = train(cfg, progress=False)
    ring = result.runner.seeds.replay.ring
    discount = np.asarray(ring.discount)[0]  # [slots, E] of seed 0
    valid = np.asarray(ring.valid)[0]
    assert discount.shape[0] >= 220
    live = valid & (discount > 0)  # transitions that bootstrap (not terminal)
    early, late = discount[:110][live[:110]], discount[110:220][live[110:220]]
    assert early.size > 100 and late.size > 100
    np.testing.assert_allclose(early, 0.9, rtol=1e-7)  # committed before 50%: 440 env steps
    np.testing.assert_allclose(late, 0.5, rtol=1e-7)


def test_only_the_kinds_present_are_traced():
    cfg = tiny_config()
    hp = hparams_of(cfg.replace(schedule={"lr_schedule": "linear"}))
    constant_only = make_schedules(cfg)  # the config's kinds: a constant learning rate
    assert float(constant_only.learning_rate(100, hp)) == pytest.approx(1e-3)
    both = make_schedules(cfg, kinds_of(stack([hparams_of(cfg), hp])))
    assert float(both.learning_rate(100, hp)) == pytest.approx(5e-4)
    no_phases = make_schedules(cfg)
    assert float(no_phases.gamma(0.9)) == pytest.approx(0.9)


def test_a_shrunk_preset_gets_a_warning_that_names_the_fix():
    from jaxrl_fast import presets
    from jaxrl_fast.agent.schedules import budget_warnings

    assert not any(budget_warnings(presets.get(name)) for name in presets.names())
    shrunk = presets.get("minatar-breakout").replace(total_env_steps=30_000)
    (line,) = budget_warnings(shrunk)
    assert "epsilon_fraction=0.2 ends the decay of epsilon at env step 6,000" in line
    assert "learning_starts=10,000" in line and "total_env_steps >= 100,000" in line
    assert budget_warnings(shrunk.replace(total_env_steps=100_000)) == []  # the fix works
    long_prefill = shrunk.replace(total_env_steps=100_000, learning_starts=60_000)
    lines = budget_warnings(long_prefill)
    assert any("learning_starts=60,000 is 60% of total_env_steps=100,000" in x for x in lines)
    assert any("total_env_steps >= 120,000" in x for x in lines)


def test_the_factor_schedule_is_checked_too():
    from jaxrl_fast.agent.schedules import budget_warnings

    cfg = tiny_config(
        total_env_steps=8_080,
        learning_starts=1_000,
        num_chunks=1,
        schedule={"epsilon_schedule": "factor", "epsilon_factor": 0.5, "epsilon_every": 100},
    )
    # 1.0 x 0.5^5 < 0.05 = epsilon_end: the floor at 5 x 100 = 500 env steps
    (line,) = budget_warnings(cfg)
    assert "epsilon at env step 500" in line and "smaller epsilon_every" in line
    assert budget_warnings(cfg.replace(schedule={"epsilon_every": 400})) == []


def test_train_warns_before_compiling():
    from jaxrl_fast import train

    with pytest.warns(UserWarning) as caught:
        train(tiny_config(learning_starts=800, eval_episodes=0, num_chunks=1), progress=False)
    said = [str(w.message) for w in caught]
    assert any("learning_starts=800 is 91% of total_env_steps=880" in x for x in said)
    assert any("ends the decay of epsilon at env step 440, inside the prefill" in x for x in said)
