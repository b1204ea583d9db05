"""A config resolved once: the env built, the precision, seed and conv choices made, the replay
capacity counted in rows.

`resolve(config)` answers, at the start of a run and for the device it runs on, every question
the builders would otherwise each answer again (which env, how many actions, which compute dtype,
vmap or map, which convolution, how many L2 rows). `make_train`, `train` and the CLI take the
`ResolvedRun`; nothing downstream re-creates the env or re-reads the backend.

A replay that cannot fit is refused here, after the env's spec is known and before anything is
allocated or compiled (`replay.fits.check_fits`): an int `ReplayConfig.capacity` or a
`TrainConfig.num_seeds` whose device tiers exceed the device's free memory, or an L3 larger than
the free host RAM or spill-directory disk.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from jaxrl_fast.agent.precision import PrecisionPolicy, resolve_precision
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.envs import Env, custom
from jaxrl_fast.envs.seeded import SeededEnv, make_seeded, make_seeded_env
from jaxrl_fast.loop.demos import load_demos
from jaxrl_fast.parallel import seed_devices
from jaxrl_fast.parallel.seeds import SeedChoices, resolve_choices
from jaxrl_fast.replay.fits import check_fits
from jaxrl_fast.replay.sizing import resolve_capacity


@dataclasses.dataclass(frozen=True)
class ResolvedRun:
    """Everything a run's builders need, decided once.

    Attributes:
      config: the run's config, with `replay.capacity` resolved to a number of rows.
      env: the training envs of all seeds.
      precision: the precision policy for the run's device.
      choices: the seed loop and the Nature torso's convolution.
      device: the (first) device the run is resolved for.
      demos: the demonstration rows (`replay.demo.DemoRows`, `DemoConfig.source` read from
        disk or played by the scripted controller), or None without demonstrations.
    """

    config: TrainConfig
    env: SeededEnv
    precision: PrecisionPolicy
    choices: SeedChoices
    device: Any
    demos: Any = dataclasses.field(default=None, compare=False, repr=False)

    def describe(self) -> list[str]:
        """Lines for the start of a run: the precision, and (several seeds) how they run."""
        lines = [self.precision.describe()]
        if self.config.num_seeds > 1:
            lines.append(self.choices.describe(self.config))
        return lines


def bind_env(config: TrainConfig, env: Any) -> tuple[TrainConfig, Any]:
    """`(config, env)` with one's own gymnax env instance (or `(env, params)` pair) replaced by
    its "user:" name in `config.env.name` (`envs.custom.register_instance`), so that everything
    that builds the env from the config builds it; None, an `Env` or a `SeededEnv` is returned
    as it is.

    Raises:
      TypeError: `env` is none of those.
    """
    if env is None or isinstance(env, (Env, SeededEnv)):
        return config, env
    name = custom.register_instance(env)
    return (config if config.env.name == name else config.replace(env={"name": name})), None


def resolve(
    config: TrainConfig,
    *,
    env: Any = None,
    device: Any = None,
) -> ResolvedRun:
    """Resolve `config` for `device` (default: the first local device).

    Args:
      config: a validated `TrainConfig`.
      env: an env to train on instead of `config.env.name`: a `SeededEnv`, an `Env` of
        `env.num_envs` envs (one seed's; a pool env holds every seed's), or one's own gymnax
        `Environment` (or `(Environment, EnvParams)`), which the resolved config then names
        (`envs.custom.bind_env`).
      device: the device the run's precision, conv choice and replay capacity are resolved for.

    Raises:
      ValueError: unknown env name, an env whose size does not match `EnvConfig.num_envs`, or a
        replay that does not fit: the message names `ReplayConfig.capacity` (or `l3_capacity`)
        and `TrainConfig.num_seeds`, the bytes needed and free, and values that fit.
      ValueError: a demonstration file (`DemoConfig.source`) that is missing, malformed or
        recorded on another env.
      ImportError: an envpool env without the `atari` extra.

    Examples:
      >>> from jaxrl_fast import presets
      >>> run = resolve(presets.get("cartpole").replace(num_seeds=2))
      >>> run.env.spec.num_actions, run.choices.seed_loop
      (2, 'vmap')
    """
    device = device if device is not None else jax.local_devices()[0]
    config, env = bind_env(config, env)
    num_seeds = config.num_seeds
    if env is None:
        env = make_seeded(config.env, num_seeds, seed=config.seed)
    elif isinstance(env, Env):
        env = make_seeded_env(env, num_seeds)
    if env.spec.num_envs != config.env.num_envs:
        raise ValueError(
            f"EnvConfig.num_envs={config.env.num_envs} does not match the env given "
            f"({env.spec.num_envs} envs per seed"
            + ("; a pool env holds num_seeds x num_envs)." if env.single_device else ").")
        )
    config = resolve_capacity(config, device=device, spec=env.spec)
    # a pool env, or a replay's host callbacks, keep every seed on one device: no split
    one_device = env.single_device or config.replay.on_host
    spread = memory_spread(num_seeds, device, one_device=one_device)
    check_fits(config, device=device, spec=env.spec, seed_devices=spread)
    torso = config.network.torso(env.spec.obs_shape)
    precision = resolve_precision(config.precision, device, torso)
    choices = resolve_choices(config, str(device.platform))
    demos = load_demos(config)  # files are read here, never while building or tracing
    return ResolvedRun(config, env, precision, choices, device, demos)


def memory_spread(
    num_seeds: int, device: Any, *, one_device: bool = False, local: Any = None
) -> int:
    """Devices whose memory the replay of a run on `device` is split over, as `train` places
    its seeds (`parallel.seed_devices` over the `local` devices, default all of this process's):
    1 on a CPU, whose devices share host RAM, and 1 where the run keeps every seed on one
    device (`one_device`: a pool env, or L3's host callbacks), so that the memory check refuses
    what would not fit there instead of an out-of-memory crash."""
    if device.platform == "cpu" or one_device:
        return 1
    local = jax.local_devices() if local is None else local
    local = [d for d in local if d.platform == device.platform]
    return len(seed_devices(num_seeds, local)) if device in local else 1
