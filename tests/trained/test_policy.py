"""`TrainResult.policy(seed)` and `Policy`: acting, saving, loading (another device count in a
fresh process), and refusing files that are not policies."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import child_env, tiny_config

from jaxrl_fast import train
from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.config import NetworkConfig
from jaxrl_fast.config.sections import AlgoConfig
from jaxrl_fast.envs import make_env
from jaxrl_fast.loop import make_train
from jaxrl_fast.trained.policy import Policy, from_params

OBS = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.7], [-2.0, 5.0]], np.float32)


@pytest.fixture(scope="module")
def trained():
    cfg = tiny_config(eval_episodes=0)
    return cfg, train(cfg, progress=False)


def test_policy_acts_as_the_trained_agent(trained):
    cfg, result = trained
    agent = make_train(cfg).agent  # the loop's own Q-values: the oracle
    for seed in range(cfg.num_seeds):
        policy = result.policy(seed)
        params = jax.tree.map(lambda x, s=seed: x[s], result.runner.seeds.agent.params)
        want = np.asarray(agent.q_values(params, jnp.asarray(OBS), fp32=True))
        np.testing.assert_allclose(np.asarray(policy.q_values(OBS)), want, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(np.asarray(policy.act(OBS)), want.argmax(-1))
        one = policy.act(OBS[2])
        assert one.shape == () and one.dtype == jnp.int32 and int(one) == want[2].argmax()
        np.testing.assert_array_equal(np.asarray(jax.jit(policy.act)(OBS)), want.argmax(-1))
    # the two seeds are different agents
    assert not np.allclose(result.policy(0).q_values(OBS), result.policy(1).q_values(OBS))


def test_policy_refuses_wrong_observations_and_seeds(trained):
    cfg, result = trained
    with pytest.raises(ValueError, match=r"expected \(2,\) \(one\) or \(B, 2\)"):
        result.policy(0).act(np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match=r"seed=2 is not allowed; expected an int in \[0, 2\)"):
        result.policy(2)


def test_save_then_load_gives_the_same_policy(trained, tmp_path):
    _, result = trained
    policy = result.policy(1)
    path = tmp_path / "chain.policy.npz"
    policy.save(path)
    loaded = Policy.load(path)
    assert loaded.network == policy.network and loaded.spec == policy.spec
    same = jax.tree.map(np.array_equal, loaded.params, policy.params)
    assert all(jax.tree.leaves(same))
    np.testing.assert_array_equal(np.asarray(loaded.act(OBS)), np.asarray(policy.act(OBS)))
    assert [p.name for p in tmp_path.iterdir()] == ["chain.policy.npz"]  # no temporary left


def test_a_policy_saved_on_two_devices_loads_on_one(tmp_path):
    """Seeds spread over 2 CPU devices in one process; loaded by this process (its own device
    count) and by a fresh 1-device process: the same actions and Q-values."""
    script = textwrap.dedent(
        f"""
        import json, sys
        import numpy as np
        from jaxrl_fast import parallel
        parallel.use_cpu_cores(2)
        import jax
        from conftest import tiny_config
        from jaxrl_fast import train
        assert jax.device_count() == 2
        result = train(tiny_config(eval_episodes=0), progress=False)
        assert result.num_devices == 2, result.num_devices
        obs = np.array({OBS.tolist()}, np.float32)
        policy = result.policy(1)
        policy.save(sys.argv[1])
        print(json.dumps({{"q": np.asarray(policy.q_values(obs)).tolist(),
                          "a": np.asarray(policy.act(obs)).tolist()}}))
        """
    )
    path = tmp_path / "two-devices.npz"
    env = child_env(PYTHONPATH=str(pathlib.Path(__file__).parents[1]))
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = json.loads(proc.stdout.strip().splitlines()[-1])
    load = "import sys, json, numpy as np, jax; from jaxrl_fast.trained.policy import Policy; "
    load += "p = Policy.load(sys.argv[1]); obs = np.array(json.loads(sys.argv[2]), np.float32); "
    load += "print(jax.device_count(), json.dumps(np.asarray(p.act(obs)).tolist()))"
    fresh = subprocess.run(
        [sys.executable, "-c", load, str(path), json.dumps(OBS.tolist())],
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(),
    )
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    count, actions = fresh.stdout.split(maxsplit=1)
    assert count == "1" and json.loads(actions) == saved["a"]
    here = Policy.load(path)
    # this process may be a GPU's, whose fp32 matmuls run as TF32: agree to its rounding
    tol = 1e-6 if jax.default_backend() == "cpu" else 1e-2
    np.testing.assert_allclose(np.asarray(here.q_values(OBS)), saved["q"], rtol=tol, atol=tol)


@pytest.fixture()
def saved(trained, tmp_path):
    path = tmp_path / "good.npz"
    trained[1].policy(0).save(path)
    return path


def test_a_truncated_file_is_refused(saved):
    data = saved.read_bytes()
    saved.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a readable jaxrl_fast policy file"):
        Policy.load(saved)


def test_a_damaged_array_is_refused(saved):
    with zipfile.ZipFile(saved) as z:
        member = next(i for i in z.infolist() if i.filename.startswith("param:"))
    data = bytearray(saved.read_bytes())
    at = member.header_offset + 30 + len(member.filename) + len(member.extra) + 200
    data[at] ^= 0xFF  # one byte of an array: its zip CRC-32 no longer matches
    saved.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="not a readable jaxrl_fast policy file.*CRC-32"):
        Policy.load(saved)


def test_foreign_files_are_refused(tmp_path):
    other = tmp_path / "other.npz"
    np.savez(other, weights=np.zeros(3))
    with pytest.raises(ValueError, match="no __policy__ header"):
        Policy.load(other)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, __policy__=np.array([{"format": "x"}], dtype=object))
    with pytest.raises(ValueError, match="not a readable jaxrl_fast policy file"):
        Policy.load(pickled)  # an object array needs pickle: never loaded
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ValueError, match="not a readable jaxrl_fast policy file"):
        Policy.load(text)
    with pytest.raises(FileNotFoundError):
        Policy.load(tmp_path / "missing.npz")


def _rewrite(path, out, change_header=None, change_arrays=None):
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(arrays["__policy__"].tobytes())
    if change_header:
        change_header(header)
    if change_arrays:
        change_arrays(arrays)
    arrays["__policy__"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    np.savez(out, **arrays)
    return out


def test_newer_versions_and_misfit_arrays_are_refused(saved, tmp_path):
    newer = _rewrite(saved, tmp_path / "v3.npz", lambda h: h.update(version=3))
    with pytest.raises(ValueError, match="version 3; this jaxrl_fast reads versions up to 2"):
        Policy.load(newer)

    def wider(h):
        h["network"]["hidden_sizes"] = [64]

    misfit = _rewrite(saved, tmp_path / "misfit.npz", wider)
    with pytest.raises(ValueError, match="do not fit the network"):
        Policy.load(misfit)

    def extra(arrays):
        arrays["param:params/Extra/kernel"] = np.zeros(2, np.float32)

    with pytest.raises(ValueError, match="not the ones its header lists"):
        Policy.load(_rewrite(saved, tmp_path / "extra.npz", change_arrays=extra))


def test_a_heads_section_travels_with_the_policy_and_version_1_files_still_load(tmp_path):
    spec = make_env("CartPole-v1", 1).spec
    network = NetworkConfig(kind="mlp", hidden_sizes=(8,), head="c51", dense="noisy")
    algo = AlgoConfig({"distributional": {"num_atoms": 7, "v_max": 3.0}, "noisy": {"sigma0": 2}})
    net = QNetwork.from_config(network, spec, algo)
    params = net.init(jax.random.key(3), jnp.zeros((1, 4)))
    obs = jax.random.normal(jax.random.key(4), (5, 4))
    want = np.asarray(net.value_head.q_values(net.apply(params, obs)))
    from_params(params, network, spec, algo=algo).save(tmp_path / "c51.npz")
    loaded = Policy.load(tmp_path / "c51.npz")
    assert loaded.algo.distributional == algo.distributional and loaded.algo.noisy.sigma0 == 2
    np.testing.assert_allclose(np.asarray(loaded.q_values(obs)), want, rtol=1e-6)

    def version_1(h):  # as written before the head's settings moved to their section
        h["network"].update(num_atoms=7, v_min=-10.0, v_max=3.0, num_quantiles=200)
        h["network"].update(hl_sigma=0.75, iqn_samples=[64, 64, 32], noisy_sigma0=2.0)
        h.update(version=1)
        del h["sections"]

    old = Policy.load(_rewrite(tmp_path / "c51.npz", tmp_path / "v1.npz", version_1))
    assert old.algo.distributional == algo.distributional and old.algo.noisy.sigma0 == 2.0
    np.testing.assert_allclose(np.asarray(old.q_values(obs)), want, rtol=1e-6)
    bad = _rewrite(tmp_path / "c51.npz", tmp_path / "bad.npz",
                   lambda h: h["sections"]["distributional"].update(num_atoms=1))  # fmt: skip
    with pytest.raises(ValueError, match=r"bad.npz: its network settings.*num_atoms=1"):
        Policy.load(bad)
    with pytest.raises(ValueError, match="do not fit the network"):  # the defaults' 51 atoms
        Policy.load(_rewrite(tmp_path / "c51.npz", tmp_path / "no.npz",
                             lambda h: h.update(sections={})))  # fmt: skip


def test_a_recurrent_policy_carries_its_state(tmp_path):
    spec = make_env("CartPole-v1", 1).spec
    network = NetworkConfig(kind="mlp", hidden_sizes=(16,), lstm=8)
    net = QNetwork.from_config(network, spec)
    params = net.init(jax.random.key(3), jnp.zeros((1, 4)), net.initial_carry(1))
    policy = from_params(params, network, spec)
    obs = jax.random.normal(jax.random.key(4), (3, 4))
    carry = policy.initial_carry(3)
    assert carry.shape == (3, 2, 8)
    actions, carry2 = policy.act(obs, carry)
    q, want_carry = net.apply(params, obs, carry)
    np.testing.assert_array_equal(np.asarray(actions), np.asarray(q).argmax(-1))
    np.testing.assert_allclose(np.asarray(carry2), np.asarray(want_carry), rtol=1e-6)
    a1, c1 = policy.act(obs[0], policy.initial_carry())  # one observation
    assert a1.shape == () and c1.shape == (2, 8)
    with pytest.raises(ValueError, match="takes a carry"):
        policy.act(obs)
    policy.save(tmp_path / "lstm.npz")
    loaded = Policy.load(tmp_path / "lstm.npz")
    a2, c2 = loaded.act(obs, carry)
    np.testing.assert_array_equal(np.asarray(a2), np.asarray(actions))
    np.testing.assert_array_equal(np.asarray(c2), np.asarray(carry2))
