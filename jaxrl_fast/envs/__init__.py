"""Environments: one functional `Env` interface over gymnax, probe and envpool envs, the JAX env
suites ("suite:EnvName": `envs/suites.py`, `register_suite`), one's own gymnax envs (`register`,
`envs/custom.py`), and `SeededEnv`, the envs of all seeds at once
(`envs/seeded.py`)."""

from __future__ import annotations

from jaxrl_fast.envs.base import (
    Env,
    EnvSpec,
    EnvState,
    Opponent,
    Suite,
    Versus,
    fixed_opponent,
    make_batched_env,
)
from jaxrl_fast.envs.custom import register, registered_envs, unregister
from jaxrl_fast.envs.make import list_envs, make_env
from jaxrl_fast.envs.probe import PROBE_ENVS, make_probe_env, optimal_q
from jaxrl_fast.envs.seeded import SeededEnv, make_seeded, make_seeded_env
from jaxrl_fast.envs.suites import register_suite
from jaxrl_fast.envs.wrappers import ActionGrid, make_action_grid

__all__ = [
    "ActionGrid",
    "Env",
    "EnvSpec",
    "EnvState",
    "Opponent",
    "PROBE_ENVS",
    "SeededEnv",
    "Suite",
    "Versus",
    "fixed_opponent",
    "list_envs",
    "make_action_grid",
    "make_batched_env",
    "make_env",
    "make_probe_env",
    "make_seeded",
    "make_seeded_env",
    "optimal_q",
    "register",
    "register_suite",
    "registered_envs",
    "unregister",
]
