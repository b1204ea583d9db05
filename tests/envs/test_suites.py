"""The JAX env suites (`envs.suites`): the registry, and each adapter against the suite's own
reset and step with the same keys (observations, rewards, termination vs truncation, the
next-step auto-reset)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.envs import make_env, suites
from jaxrl_fast.envs.base import EnvSpec


def _require(package: str):
    return pytest.importorskip(package)


# -- the registry -----------------------------------------------------------------------------


def test_every_listed_name_is_one_of_the_suites_own():
    navix, xminigrid, pgx = _require("navix"), _require("xminigrid"), _require("pgx")
    jumanji = _require("jumanji")
    from jaxrl_fast.envs import craftax_env, jumanji_env, navix_env, pgx_env, xminigrid_env

    assert set(jumanji_env.NAMES) <= set(jumanji.registered_environments())
    assert set(navix_env.NAMES) <= set(navix.registry())
    assert set(xminigrid_env.NAMES) <= set(xminigrid.registered_environments())
    xland = {n for n in xminigrid.registered_environments() if n.startswith("XLand-")}
    assert set(xminigrid_env.XLAND) == xland  # every XLand env: rulesets from a file
    assert set(pgx_env.NAMES) <= set(pgx.available_envs())
    assert set(craftax_env.NAMES) == {"Craftax-Symbolic-v1", "Craftax-Classic-Symbolic-v1"}
    assert [s.prefix for s in suites.suites()][:6] == [
        "craftax", "navix", "xminigrid", "pgx", "jumanji", "brax"]  # fmt: skip
    listed = suites.suite_envs()
    assert "pgx:minatar-breakout" in listed and "navix:Navix-Empty-5x5-v0" in listed
    assert len(listed) == len(set(listed))


def test_find_splits_suite_names_only():
    suite, rest = suites.find("pgx:minatar-breakout")
    assert (suite.prefix, rest) == ("pgx", "minatar-breakout")
    assert suites.find("CartPole-v1") is None
    assert suites.find("envpool:Pong-v5") is None
    assert suites.find("my_module:make_env") is None  # an import path, not a suite


def test_bad_suite_env_name_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"'pgx:minatar-breakot' is not a pgx env.*"
                       r"Did you mean 'pgx:minatar-breakout'"):  # fmt: skip
        make_env("pgx:minatar-breakot")


def _fake_suite(package: str) -> suites.Suite:
    def build(name, num_envs):
        return make_env("probe-chain", num_envs)

    return suites.Suite("fakesuite", "fake", package, ("Chain",), build, "a test's suite")


def test_missing_extra_names_the_install_command():
    suite = suites.register_suite(_fake_suite("jaxrl_fast_no_such_package"))
    try:
        assert not suites.installed(suite)
        with pytest.raises(ImportError, match=r"needs the fake extra: pip install "
                           r"'jaxrl-fast\[fake\]'"):  # fmt: skip
            make_env("fakesuite:Chain")
    finally:
        suites.unregister_suite("fakesuite")


def test_register_suite_refusals_and_own_suite():
    with pytest.raises(ValueError, match="prefix='envpool' is not allowed"):
        suites.register_suite(_fake_suite("numpy")._replace(prefix="envpool"))
    with pytest.raises(ValueError, match="registered already"):
        suites.register_suite(suites.find("pgx:x")[0]._replace(about="another"))
    suites.register_suite(_fake_suite("numpy"))
    try:
        env = make_env("fakesuite:Chain", 3)
        assert env.spec.num_envs == 3 and env.spec.num_actions == 2
        with pytest.raises(ValueError, match="EnvConfig.observe=.*not a gymnax env"):
            make_env("fakesuite:Chain", 3, observe=(0,))
    finally:
        suites.unregister_suite("fakesuite")


# -- adapters against their suites ------------------------------------------------------------


def _check_against(env, ref_reset, ref_step, ref_done, steps: int, seed: int = 0):
    """Step `env` (2 envs) `steps` times with random actions and check each env's every step
    against the suite's own functions given the keys the `Env` contract hands out:
    `ref_reset(key) -> (state, obs)`; `ref_step(key, state, action) -> (state, obs, reward)`;
    `ref_done(state) -> (terminated, truncated)` from the suite's state. Returns the counts of
    terminations and truncations seen."""
    n = env.spec.num_envs
    key = jax.random.key(seed)
    state, obs = jax.jit(env.reset)(key)
    ref_reset, ref_step, ref_done = jax.jit(ref_reset), jax.jit(ref_step), jax.jit(ref_done)
    refs = [ref_reset(k) for k in jax.random.split(key, n)]
    for i in range(n):
        np.testing.assert_array_equal(obs[i], refs[i][1])
    step = jax.jit(env.step)
    ended = np.zeros(n, bool)
    counts = {"terminated": 0, "truncated": 0}
    for t in range(steps):
        k_step = jax.random.fold_in(key, t + 1)
        actions = jax.random.randint(jax.random.fold_in(k_step, 7), (n,), 0, env.spec.num_actions)
        state, obs, reward, done, info = step(k_step, state, actions)
        step_keys, reset_keys = jax.random.split(k_step, (2, n))
        for i in range(n):
            if ended[i]:  # a reset step: the suite's reset with this step's reset key
                ref_state, ref_obs = ref_reset(reset_keys[i])
                ref_reward, term, trunc = 0.0, False, False
                assert bool(info["reset"][i])
            else:
                ref_state, ref_obs, ref_reward = ref_step(step_keys[i], refs[i][0], actions[i])
                term, trunc = (bool(x) for x in ref_done(ref_state))
                trunc = trunc and not term
                assert not bool(info["reset"][i])
            refs[i] = (ref_state, ref_obs)
            np.testing.assert_array_equal(obs[i], ref_obs, err_msg=f"step {t}, env {i}")
            assert float(reward[i]) == pytest.approx(float(ref_reward), abs=1e-6)
            assert (bool(info["terminated"][i]), bool(info["truncated"][i])) == (term, trunc)
            counts["terminated"] += term
            counts["truncated"] += trunc
            ended[i] = term or trunc
        assert np.array_equal(np.asarray(done), ended)
    return counts


def test_pgx_minatar_matches_pgx():
    pgx = _require("pgx")
    from jaxrl_fast.envs.pgx_env import make_pgx_env

    game = pgx.make("minatar-breakout")
    limit = 25  # short, so that both endings occur
    env = make_pgx_env("minatar-breakout", 2, max_steps=limit)
    assert env.spec == EnvSpec("pgx:minatar-breakout", (10, 10, 4), jnp.bool_, 3, 2, limit)

    def ref_reset(key):
        s = game.init(key)
        return (s, 0), s.observation

    def ref_step(key, inner, action):
        s = game.step(inner[0], action, key)
        return (s, inner[1] + 1), s.observation, s.rewards[0]

    def ref_done(inner):
        return inner[0].terminated, inner[1] >= limit

    counts = _check_against(env, ref_reset, ref_step, ref_done, steps=80)
    assert counts["terminated"] >= 1 and counts["truncated"] >= 1, counts


def test_navix_matches_navix():
    navix = _require("navix")
    game = navix.make("Navix-Empty-5x5-v0")
    env = make_env("navix:Navix-Empty-5x5-v0", 2)
    assert env.spec.obs_shape == (5, 5, 3) and env.spec.num_actions == 7
    assert env.spec.max_episode_steps == game.max_steps == 100

    def ref_reset(key):
        ts = game.reset(key)
        return ts, ts.observation.astype(jnp.float32)

    def ref_step(key, ts, action):
        ts = game.step(ts, action)
        return ts, ts.observation.astype(jnp.float32), ts.reward

    def ref_done(ts):  # the goal reached: the only reward; the step limit: truncation
        return ts.reward > 0, ts.t >= game.max_steps

    counts = _check_against(env, ref_reset, ref_step, ref_done, steps=230)
    assert counts["truncated"] >= 1, counts


def test_xminigrid_matches_xminigrid():
    xminigrid = _require("xminigrid")
    game, params = xminigrid.make("MiniGrid-Empty-5x5")
    env = make_env("xminigrid:MiniGrid-Empty-5x5", 2)
    assert env.spec.obs_shape == (7, 7, 2) and env.spec.num_actions == 6
    assert env.spec.max_episode_steps == params.max_steps

    def ref_reset(key):
        ts = game.reset(params, key)
        return ts, ts.observation.astype(jnp.float32)

    def ref_step(key, ts, action):
        ts = game.step(params, ts, action)
        return ts, ts.observation.astype(jnp.float32), ts.reward

    def ref_done(ts):  # the goal reached: the only reward; the step limit: truncation
        return ts.reward > 0, ts.state.step_num >= params.max_steps

    counts = _check_against(env, ref_reset, ref_step, ref_done, steps=2 * params.max_steps + 10)
    assert counts["terminated"] + counts["truncated"] >= 2, counts


def _tiny_benchmark(path):
    """Two XLand rulesets: be next to a red ball (beside a green square), or next to a green
    square (beside a red ball); no production rules."""
    from xminigrid.core.constants import TILES_REGISTRY, Colors, Tiles
    from xminigrid.core.goals import AgentNearGoal
    from xminigrid.core.rules import EmptyRule

    from jaxrl_fast.envs.xminigrid_env import save_benchmark

    ball, square = (
        TILES_REGISTRY[Tiles.BALL, Colors.RED],
        TILES_REGISTRY[Tiles.SQUARE, Colors.GREEN],
    )
    save_benchmark(
        {
            "goals": np.stack(
                [AgentNearGoal(tile=ball).encode(), AgentNearGoal(tile=square).encode()]
            ),
            "rules": np.stack([EmptyRule().encode()[None]] * 2),
            "init_tiles": np.stack([np.stack([ball, square])] * 2),
            "num_rules": np.zeros(2, np.int32),
        },
        str(path),
    )
    return str(path)


def test_xland_rulesets_come_from_a_file_and_match_xminigrid(tmp_path):
    xminigrid = _require("xminigrid")
    from xminigrid.benchmarks import load_benchmark_from_path

    path = _tiny_benchmark(tmp_path / "rules.pkl")
    name = "XLand-MiniGrid-R1-9x9"
    with pytest.raises(ValueError, match=r"set EnvConfig.suite_file to a benchmark file"):
        make_env(f"xminigrid:{name}", 2)
    with pytest.raises(FileNotFoundError, match=r"EnvConfig.suite_file='nope.pkl': no such file"):
        make_env(f"xminigrid:{name}", 2, suite_file="nope.pkl")
    (tmp_path / "bad.pkl").write_bytes(b"not a benchmark")
    with pytest.raises(ValueError, match=r"is not a ruleset benchmark xminigrid can read"):
        make_env(f"xminigrid:{name}", 2, suite_file=str(tmp_path / "bad.pkl"))
    with pytest.raises(ValueError, match=r"XLand-MiniGrid-R\* envs; xminigrid:MiniGrid-Empty-5x5"):
        make_env("xminigrid:MiniGrid-Empty-5x5", 2, suite_file=path)
    with pytest.raises(ValueError, match=r"suite_file=.* navix:Navix-Empty-5x5-v0 reads none"):
        make_env("navix:Navix-Empty-5x5-v0", 2, suite_file=path)
    with pytest.raises(ValueError, match=r"suite_file=.*CartPole-v1 is not one"):
        make_env("CartPole-v1", 2, suite_file=path)

    game, params = xminigrid.make(name)
    bench = load_benchmark_from_path(path)
    env = make_env(f"xminigrid:{name}", 2, suite_file=path)

    def ref_reset(key):
        key_rules, key = jax.random.split(key)
        ruleset = bench.sample_ruleset(key_rules)
        ts = game.reset(params.replace(ruleset=ruleset), key)
        return (ts, ruleset), ts.observation.astype(jnp.float32)

    def ref_step(key, state, action):
        ts = game.step(params.replace(ruleset=state[1]), state[0], action)
        return (ts, state[1]), ts.observation.astype(jnp.float32), ts.reward

    def ref_done(state):
        return state[0].reward > 0, state[0].state.step_num >= params.max_steps

    counts = _check_against(env, ref_reset, ref_step, ref_done, steps=2 * params.max_steps + 10)
    assert counts["terminated"] + counts["truncated"] >= 2, counts
    # both rulesets are drawn over resets, and the config reaches the env
    from jaxrl_fast.config import EnvConfig
    from jaxrl_fast.envs import make_seeded

    seeded = make_seeded(EnvConfig(name=f"xminigrid:{name}", num_envs=8, suite_file=path), 2)
    state, _ = jax.jit(seeded.reset)(jax.random.split(jax.random.key(3), 2))
    assert set(np.asarray(state.inner[1].goal[..., 1]).ravel().tolist()) == {
        int(ball_or_square) for ball_or_square in np.asarray(bench.goals[:, 1])
    }


@pytest.mark.slow
def test_craftax_classic_matches_craftax_and_splits_its_done():
    _require("craftax")
    from craftax.craftax_env import make_craftax_env_from_name

    game = make_craftax_env_from_name("Craftax-Classic-Symbolic-v1", auto_reset=False)
    params = game.default_params
    env = make_env("craftax:Craftax-Classic-Symbolic-v1", 2)
    assert env.spec.obs_shape == (1345,) and env.spec.num_actions == 17
    assert env.spec.max_episode_steps == params.max_timesteps == 10_000

    def ref_reset(key):
        obs, s = game.reset_env(key, params)
        return s, obs

    def ref_step(key, s, action):
        obs, s, reward, _, _ = game.step_env(key, s, action, params)
        return s, obs, reward

    def ref_done(s):
        return s.player_health <= 0, s.timestep >= params.max_timesteps

    _check_against(env, ref_reset, ref_step, ref_done, steps=6)
    # the step limit is a truncation; death (or lava) a termination, also at the limit (the
    # reset jitted as `_check_against` did: the same program; run eagerly it took ~9 s)
    state, _ = jax.jit(env.reset)(jax.random.key(3))
    inner = state.inner
    at_limit = state._replace(inner=inner.replace(
        timestep=jnp.full_like(inner.timestep, params.max_timesteps - 1),
        player_health=jnp.asarray([5, -1], inner.player_health.dtype)))  # fmt: skip
    _, _, _, done, info = jax.jit(env.step)(jax.random.key(4), at_limit, jnp.zeros(2, jnp.int32))
    assert np.asarray(done).tolist() == [True, True]
    assert np.asarray(info["truncated"]).tolist() == [True, False]
    assert np.asarray(info["terminated"]).tolist() == [False, True]


def test_pgx_2048_matches_pgx_with_its_mask_appended():
    pgx = _require("pgx")
    from jaxrl_fast.envs.pgx_env import make_pgx_env

    game = pgx.make("2048")
    env = make_pgx_env("2048", 2, max_steps=40)
    assert env.spec.action_mask and env.spec.obs_shape == (4 * 4 * 31 + 4,)

    def obs(s):
        return jnp.concatenate([s.observation.reshape(-1), s.legal_action_mask])

    def ref_reset(key):
        s = game.init(key)
        return (s, 0), obs(s)

    def ref_step(key, inner, action):
        s = game.step(inner[0], action, key)
        return (s, inner[1] + 1), obs(s), s.rewards[0]

    counts = _check_against(env, ref_reset, ref_step, lambda i: (i[0].terminated, i[1] >= 40), 90)
    assert counts["truncated"] + counts["terminated"] >= 2, counts


@pytest.mark.parametrize("name", ["Snake-v1", "Game2048-v1", "Minesweeper-v0"])
def test_jumanji_matches_jumanji_with_its_mask_appended(name):
    jumanji = _require("jumanji")
    from jaxrl_fast.envs.jumanji_env import FIELDS, make_jumanji_env

    game = jumanji.make(name)
    limit = 30  # envs without a time limit of their own (Snake's is 4,000)
    env = make_jumanji_env(name, 2, max_steps=limit)
    own = getattr(game, "time_limit", None)
    cells = {"Minesweeper-v0": 100}.get(name, 4)
    assert env.spec.action_mask and env.spec.num_actions == cells
    assert env.spec.max_episode_steps == (own or limit)

    def obs(ts):
        parts = [getattr(ts.observation, f).astype(jnp.float32).reshape(-1) for f in FIELDS[name]]
        mask = ts.observation.action_mask.reshape(-1).astype(jnp.float32)
        return jnp.concatenate(parts + [mask])

    def ref_reset(key):
        state, ts = game.reset(key)
        return (state, ts, 0), obs(ts)

    def ref_step(key, inner, action):
        if name == "Minesweeper-v0":
            action = jnp.stack([action // 10, action % 10])
        state, ts = game.step(inner[0], action)
        return (state, ts, inner[2] + 1), obs(ts), ts.reward

    def ref_done(inner):
        ts, t = inner[1], inner[2]
        last = ts.step_type == 2
        return last & (ts.discount == 0), (last & (ts.discount == 1)) | (own is None and t >= limit)

    counts = _check_against(env, ref_reset, ref_step, ref_done, steps=70)
    assert counts["terminated"] + counts["truncated"] >= 1, counts


def _lowest_legal(key, state):
    return jnp.argmax(state.legal_action_mask).astype(jnp.int32)


def test_pgx_versus_rewards_the_learner_at_every_outcome():
    """Tic-tac-toe against an opponent that plays its lowest legal square: one env step is the
    learner's move and the reply; the learner's reward at a win, a loss (on the reply), a draw
    and an illegal move; its side drawn per episode; the observation is its own view."""
    _require("pgx")
    from jaxrl_fast.envs.pgx_env import make_versus_env

    env = make_versus_env("tic_tac_toe", 1, opponent=_lowest_legal)
    assert env.spec.action_mask and env.spec.obs_shape == (3 * 3 * 2 + 9,)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    opens = []  # per reset key: does the learner open (an empty board)?
    for k in range(16):
        _, obs = reset(jax.random.key(k))
        board = np.asarray(obs)[0, :18].reshape(3, 3, 2)
        opens.append(not board.any())
        if not opens[-1]:  # the opponent opened at square 0, seen as the other side's mark
            assert board[0, 0, 1] and board.sum() == 1
    assert any(opens) and not all(opens)  # both sides are drawn
    first = opens.index(True)

    def play(moves):
        state, _ = reset(jax.random.key(first))
        out = []
        for i, a in enumerate(moves):
            state, obs, r, done, info = step(jax.random.key(100 + i), state, jnp.array([a]))
            out.append((float(r[0]), bool(info["terminated"][0]), bool(info["truncated"][0])))
        return out, np.asarray(obs)[0]

    # a win: 4, 3, 5 against replies 0, 1
    out, obs = play([4, 3, 5])
    assert out == [(0.0, False, False), (0.0, False, False), (1.0, True, False)]
    board = obs[:18].reshape(9, 2)
    assert board[[3, 4, 5], 0].all() and board[[0, 1], 1].all()  # the learner's view
    # a loss on the reply: 8, 7, 5 against 0, 1, 2
    assert play([8, 7, 5])[0] == [(0.0, False, False), (0.0, False, False), (-1.0, True, False)]
    # a draw: the board full without a line
    assert play([1, 3, 4, 6, 8])[0][-1] == (0.0, True, False)
    # an illegal move (an occupied square) loses
    assert play([4, 4])[0] == [(0.0, False, False), (-1.0, True, False)]


def test_masked_random_actions_never_make_an_illegal_move_in_2048():
    """Pgx ends a game at an illegal move with reward -1: masked exploration never makes one,
    unmasked exploration does."""
    _require("pgx")
    from jaxrl_fast.agent.exploration import epsilon_greedy
    from jaxrl_fast.agent.masks import legal_actions

    env = make_env("pgx:2048", 16)

    def rewards(masked: bool):
        def body(state_obs, key):
            state, obs = state_obs
            legal = legal_actions(obs, 4) if masked else None
            action = epsilon_greedy(key, jnp.zeros((16, 4)), 1.0, 4, legal)
            state, obs, reward, _, _ = env.step(jax.random.fold_in(key, 1), state, action)
            return (state, obs), reward

        start = env.reset(jax.random.key(0))
        keys = jax.random.split(jax.random.key(1), 300)
        return np.asarray(jax.jit(lambda s: jax.lax.scan(body, s, keys)[1])(start))

    assert rewards(True).min() >= 0.0
    assert rewards(False).min() == -1.0


@pytest.mark.slow
def test_brax_reacher_matches_brax_on_its_81_action_grid():
    _require("brax")
    from brax import envs as brax_envs

    from jaxrl_fast.envs.brax_env import BACKEND, make_brax_env
    from jaxrl_fast.envs.wrappers import make_action_grid

    with pytest.raises(ValueError, match=r"set EnvConfig.discretise=N"):
        make_env("brax:reacher", 2)
    with pytest.raises(ValueError, match=r"discretise=9 is for continuous-action envs"):
        make_env("pgx:minatar-breakout", 2, discretise=9)
    arm = brax_envs.get_environment("reacher", backend=BACKEND)
    env = make_brax_env("reacher", 2, discretise=9, episode_length=5)
    assert env.spec.num_actions == 81 and env.spec.obs_shape == (arm.observation_size,)
    grid = make_action_grid([-1.0, -1.0], [1.0, 1.0], 9)

    def ref_reset(key):
        s = arm.reset(key)
        return (s, 0), s.obs

    def ref_step(key, inner, action):
        s = arm.step(inner[0], grid.to_continuous(action))
        return (s, inner[1] + 1), s.obs, s.reward

    counts = _check_against(env, ref_reset, ref_step, lambda i: (i[0].done > 0, i[1] >= 5), 12)
    assert counts == {"terminated": 0, "truncated": 4}, counts  # steps 5 and 11, both envs
    assert "brax:reacher" in __import__("jaxrl_fast").envs.list_envs(continuous=True)
