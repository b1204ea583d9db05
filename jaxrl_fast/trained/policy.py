"""A trained agent out of the library: `Policy`, one seed's greedy policy, saved to and loaded
from a small portable file.

    policy = result.policy(0)              # seed 0 of a `train(...)` result
    policy.act(obs)                        # greedy actions
    policy.save("cartpole.policy.npz")
    Policy.load("cartpole.policy.npz").act(obs)

A `Policy` holds the seed's parameters (float32, as numpy arrays), its `NetworkConfig` (with the
config sections its head and dense layers read, e.g. `TrainConfig.algo.distributional`) and the
env's `EnvSpec` (observation shape and dtype, number of actions). It acts on the observations
the library's env gives (`make_env(spec.name)`: after its wrappers, such as `EnvConfig.observe`
or Atari's frame stack), one observation `[*obs_shape]` or a batch `[B, *obs_shape]`.

The file is a NumPy `.npz` archive (a zip): one array per parameter and a JSON header (the
format and its version, the network config and its sections, the env spec and the parameter
names; a version-1 file, written before a head's settings moved to its section, still loads).
Loading reads arrays and JSON only, never pickles (so it never runs code), on any device count, and
without the run's config, orbax or the run directory. A file that is truncated, damaged (zip
CRC-32s), of another format or whose arrays do not fit its network is refused with a
`ValueError` naming the file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import zipfile
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_fast.agent.evaluate import play_episodes
from jaxrl_fast.agent.masks import legal_actions, mask_q
from jaxrl_fast.agent.network import QNetwork, network_sections
from jaxrl_fast.config import AtariConfig, EnvConfig, NetworkConfig, options
from jaxrl_fast.config.sections import AlgoConfig
from jaxrl_fast.envs.base import EnvSpec
from jaxrl_fast.envs.seeded import make_seeded
from jaxrl_fast.platform.paths import write_npz

FORMAT = "jaxrl_fast.trained.policy"
VERSION = 2
_HEADER = "__policy__"
_PARAM = "param:"


@dataclasses.dataclass(frozen=True, eq=False)
class Policy:
    """One seed's greedy policy: its parameters, network config and env spec.

    Attributes:
      params: the Q-network's parameters (a flax tree of float32 numpy arrays, no seed axis).
      network: the `NetworkConfig` the network was built from.
      spec: the env's spec (`spec.name` names the env, `obs_shape`, `num_actions`).
      env: the settings that shape the env's observations and actions (`name`, `discretise`,
        `observe`, `atari`), so that `evaluate` builds the env the policy was trained on; None:
        `spec.name` with the defaults.
      algo: the run's `TrainConfig.algo`, of which the network reads its head's and dense
        layers' sections (`agent.network.network_sections`); None: the defaults.
    """

    params: Any
    network: NetworkConfig
    spec: EnvSpec
    env: EnvConfig | None = None
    algo: AlgoConfig | None = None

    @property
    def net(self) -> QNetwork:
        """The Q-network (float32 compute)."""
        return QNetwork.from_config(self.network, self.spec, self.algo)

    @property
    def recurrent(self) -> bool:
        """Whether the network has an LSTM core (`act` then takes and returns a carry)."""
        return self.network.lstm > 0

    def initial_carry(self, batch: int | None = None) -> jax.Array:
        """A recurrent policy's state at an episode's start: `[batch, 2, lstm]` zeros, or
        `[2, lstm]` for one observation (`batch=None`)."""
        carry = self.net.initial_carry(1 if batch is None else batch)
        return carry[0] if batch is None else carry

    def q_values(self, obs: Any, carry: Any = None) -> Any:
        """Q-values `[A]` of one observation `[*obs_shape]`, or `[B, A]` of a batch; a recurrent
        policy takes its carry too and returns `(q, carry)`. Jit-able. For a masked env
        (`spec.action_mask`) an illegal action's value is `agent.masks.ILLEGAL_Q`, so `act`
        picks legal actions only.

        Raises:
          ValueError: an observation of another shape, or a carry missing or given wrongly.
        """
        obs = jnp.asarray(obs)
        single = self._is_single(obs)
        if self.recurrent != (carry is not None):
            raise ValueError(
                "Policy.q_values: a recurrent policy takes a carry (Policy.initial_carry); a "
                "feed-forward one takes none."
            )
        net = self.net
        x = obs[None] if single else obs
        legal = legal_actions(x, self.spec.num_actions) if self.spec.action_mask else None
        if carry is None:
            q = mask_q(net.value_head.q_values(net.apply(self.params, x)), legal)
            return q[0] if single else q
        carry = jnp.asarray(carry)
        out, carry = net.apply(self.params, x, carry[None] if single else carry)
        q = net.value_head.q_values(out)
        return (q[0], carry[0]) if single else (q, carry)

    def act(self, obs: Any, carry: Any = None) -> Any:
        """Greedy actions (int32): a scalar for one observation, `[B]` for a batch; a recurrent
        policy returns `(actions, carry)`. Jit-able: `jax.jit(policy.act)`."""
        out = self.q_values(obs, carry)
        if self.recurrent:
            q, carry = out
            return jnp.argmax(q, axis=-1).astype(jnp.int32), carry
        return jnp.argmax(out, axis=-1).astype(jnp.int32)

    def _is_single(self, obs: jax.Array) -> bool:
        shape = tuple(self.spec.obs_shape)
        if tuple(obs.shape) == shape:
            return True
        if obs.ndim == len(shape) + 1 and tuple(obs.shape[1:]) == shape:
            return False
        raise ValueError(
            f"Policy for {self.spec.name!r}: observations of shape {tuple(obs.shape)}; expected "
            f"{shape} (one) or (B, {', '.join(map(str, shape))}) (a batch)."
        )

    def save(self, path: str | os.PathLike) -> None:
        """Write the policy to `path` (a `.npz` archive; the name is kept as given). The file is
        written whole to a temporary name first, so an interrupted save never leaves a
        half-written file at `path`."""
        flat = {_PARAM + name: np.asarray(x) for name, x in _flatten(self.params).items()}
        header = {
            "format": FORMAT,
            "version": VERSION,
            "network": _network_dict(self.network),
            "sections": _sections_dict(self.network, self.algo or AlgoConfig()),
            "spec": _spec_dict(self.spec),
            "env": None if self.env is None else _env_dict(self.env),
            "params": sorted(flat),
        }
        blob = np.frombuffer(json.dumps(header).encode(), np.uint8)
        write_npz(path, {_HEADER: blob, **flat})

    @classmethod
    def load(cls, path: str | os.PathLike) -> Policy:
        """Read a policy that `save` wrote.

        Raises:
          FileNotFoundError: no file at `path`.
          ValueError: the file is not a policy file of this format (truncated, damaged, another
            format or a newer version), or its arrays do not fit the network it describes.
        """
        path = os.fspath(path)
        try:
            with np.load(path, allow_pickle=False) as archive:
                arrays = {name: archive[name] for name in archive.files}
        except FileNotFoundError:
            raise
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as err:
            raise ValueError(f"{path}: not a readable jaxrl_fast policy file ({err})") from None
        header = _header(arrays, path)
        network, algo = _network_from(header, path)
        spec = _spec_from(header["spec"])
        names = header["params"]
        if sorted(n for n in arrays if n != _HEADER) != sorted(names):
            raise ValueError(f"{path}: its arrays are not the ones its header lists.")
        params = _unflatten({n[len(_PARAM) :]: arrays[n] for n in names})
        env = header.get("env")
        policy = cls(params, network, spec, None if env is None else _env_from(env), algo)
        _check_fits(policy, path)
        return policy


def from_params(
    params: Any,
    network: NetworkConfig,
    spec: EnvSpec,
    env: EnvConfig | None = None,
    algo: AlgoConfig | None = None,
) -> Policy:
    """A `Policy` from one seed's parameters (device or numpy arrays, no seed axis)."""
    params = jax.tree.map(lambda x: np.asarray(x, np.float32), jax.device_get(params))
    return Policy(params=params, network=network, spec=spec, env=env, algo=algo)


def evaluate(
    policy: Policy, *, episodes: int = 10, seed: int = 0, env_name: str | None = None
) -> np.ndarray:
    """The greedy returns `[episodes]` (float32) of `policy` on `episodes` episodes played at
    once (one env each; envpool: whole, unclipped games), each up to the env's
    `max_episode_steps`.

    Args:
      policy: the policy.
      episodes: episodes (envs) to play.
      seed: the episodes' randomness (and envpool's seed).
      env_name: another env to play (same observation shape and actions); default: the
        policy's own.

    Raises:
      ValueError: `episodes < 1`, or an env whose observations or actions do not fit.
    """
    if not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"evaluate: episodes={episodes!r} is not allowed; expected an int >= 1.")
    config = policy.env if policy.env is not None else EnvConfig(name=policy.spec.name)
    if env_name is not None:
        config = dataclasses.replace(config, name=env_name)
    env = make_seeded(config, 1, num_envs=episodes, seed=seed, evaluation=True)
    if (env.spec.obs_shape, env.spec.num_actions) != (
        policy.spec.obs_shape,
        policy.spec.num_actions,
    ):
        raise ValueError(
            f"evaluate: env {config.name!r} gives observations {env.spec.obs_shape} and "
            f"{env.spec.num_actions} actions; the policy takes {policy.spec.obs_shape} and "
            f"{policy.spec.num_actions}."
        )

    def act(keys, obs, carry):  # one seed: [1, E, ...]
        if not policy.recurrent:
            return policy.act(obs[0])[None], carry
        actions, carry = policy.act(obs[0], carry[0])
        return actions[None], carry[None]

    def initial(n: int) -> Any:
        return policy.initial_carry(n) if policy.recurrent else ()

    play = jax.jit(lambda keys: play_episodes(env, act, initial, keys))
    return np.asarray(play(jax.random.split(jax.random.key(seed), 1))[0])


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in tree.items():
        name = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, dict) or hasattr(value, "items"):
            out.update(_flatten(value, name))
        else:
            out[name] = value
    return out


def _unflatten(flat: dict[str, Any]) -> dict:
    tree: dict = {}
    for name, value in flat.items():
        *parents, leaf = name.split("/")
        node = tree
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return tree


def _network_dict(network: NetworkConfig) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(network)))


def _spec_dict(spec: EnvSpec) -> dict:
    d = spec._asdict()
    d["obs_shape"] = list(spec.obs_shape)
    d["obs_dtype"] = np.dtype(spec.obs_dtype).name
    return d


def _env_dict(env: EnvConfig) -> dict:
    return {
        "name": env.name,
        "discretise": env.discretise,
        "observe": list(env.observe),
        "atari": dataclasses.asdict(env.atari),
    }


def _env_from(d: dict) -> EnvConfig:
    return EnvConfig(
        name=d["name"],
        discretise=d["discretise"],
        observe=tuple(d["observe"]),
        atari=AtariConfig(**d["atari"]),
    )


def _spec_from(d: dict) -> EnvSpec:
    return EnvSpec(
        **{**d, "obs_shape": tuple(d["obs_shape"]), "obs_dtype": jnp.dtype(d["obs_dtype"])}
    )


def _sections_dict(network: NetworkConfig, algo: AlgoConfig) -> dict:
    names = network_sections(network).values()
    return json.loads(json.dumps({name: dataclasses.asdict(algo[name]) for name in names}))


def _network_from(header: dict, path: str) -> tuple[NetworkConfig, AlgoConfig]:
    """The network config and its sections; a version-1 header's head and noisy settings
    (then `NetworkConfig` fields) move to their sections (`options.RENAMED`)."""
    tree = options.migrate({"network": header["network"], "algo": header.get("sections", {})})
    d = tree["network"]
    fields = {f.name: f for f in dataclasses.fields(NetworkConfig)}
    unknown = sorted(set(d) - set(fields))
    if unknown:
        raise ValueError(f"{path}: network fields {unknown} are unknown to this jaxrl_fast.")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
    sections = {
        name: {k: tuple(v) if isinstance(v, list) else v for k, v in fields_.items()}
        for name, fields_ in tree.get("algo", {}).items()
    }
    try:
        return NetworkConfig(**values), AlgoConfig(sections)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: its network settings are not valid ({err}).") from None


def _header(arrays: dict[str, np.ndarray], path: str) -> dict:
    if _HEADER not in arrays:
        raise ValueError(f"{path}: not a jaxrl_fast policy file (no {_HEADER} header).")
    try:
        header = json.loads(arrays[_HEADER].tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: its header is not JSON ({err}).") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{path}: not a jaxrl_fast policy file (format {header.get('format')!r}).")
    if not isinstance(header.get("version"), int) or header["version"] > VERSION:
        raise ValueError(
            f"{path}: policy file version {header.get('version')!r}; this jaxrl_fast reads "
            f"versions up to {VERSION} (upgrade jaxrl_fast)."
        )
    return header


def _check_fits(policy: Policy, path: str) -> None:
    """The loaded arrays have the names, shapes and dtypes of the network's parameters."""
    net, spec = policy.net, policy.spec
    obs = jnp.zeros((1, *spec.obs_shape), spec.obs_dtype)
    args = (obs,) if not policy.recurrent else (obs, net.initial_carry(1))
    want = jax.eval_shape(lambda k: net.init(k, *args), jax.random.key(0))
    want_flat = {n: (tuple(x.shape), np.dtype(x.dtype)) for n, x in _flatten(want).items()}
    got_flat = {n: (tuple(x.shape), x.dtype) for n, x in _flatten(policy.params).items()}
    if want_flat != got_flat:
        diff = sorted(set(want_flat.items()) ^ set(got_flat.items()))[:4]
        raise ValueError(f"{path}: its arrays do not fit the network it describes ({diff}).")
