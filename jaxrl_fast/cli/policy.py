"""`jaxrl-fast export` (a run directory's trained policy to a portable file) and `jaxrl-fast
evaluate` (a saved policy's greedy returns): `jaxrl_fast.trained.policy`."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import numpy as np


def add_parsers(sub: Any) -> None:
    """Add the `export` and `evaluate` subcommands."""
    e = sub.add_parser(
        "export",
        help="write one seed's trained policy from a run directory's newest checkpoint to a "
        "portable file",
    )
    e.add_argument("run_dir", help="a run directory (train --run-dir)")
    e.add_argument("--seed", type=int, default=0, help="the seed's index (default 0)")
    e.add_argument("--step", type=int, help="the checkpoint (default: the newest)")
    e.add_argument("--out", required=True, help="the policy file to write (.npz)")
    e.set_defaults(func=export)
    v = sub.add_parser("evaluate", help="greedy returns of a saved policy (export, Policy.save)")
    v.add_argument("file", help="a policy file")
    v.add_argument("--env", help="env name (default: the policy's own)")
    v.add_argument("--episodes", type=int, default=10, help="episodes, played at once (10)")
    v.add_argument("--seed", type=int, default=0, help="the episodes' seed (0)")
    v.add_argument("--json", action="store_true", help="print the returns as JSON")
    v.set_defaults(func=evaluate)


def export(args: argparse.Namespace) -> int:
    import jax

    from jaxrl_fast.checkpoint import read_state
    from jaxrl_fast.config import options
    from jaxrl_fast.loop import make_train
    from jaxrl_fast.trained.policy import from_params

    run_dir = os.fspath(args.run_dir)
    path = os.path.join(run_dir, "config.json")
    if not os.path.isfile(path):
        raise ValueError(f"export: {run_dir} has no config.json; expected a run directory.")
    with open(path) as f:
        config = options.from_dict(json.load(f)["config"])
    lanes = config.num_lanes
    if not 0 <= args.seed < config.num_seeds:
        raise ValueError(
            f"export: --seed {args.seed} is not allowed; expected 0..{config.num_seeds - 1} "
            f"(the run's num_seeds={config.num_seeds})."
        )
    fns = make_train(config)
    like = jax.eval_shape(fns.init, jax.random.split(jax.random.key(0), lanes))
    state, record, step = read_state(os.path.join(run_dir, "checkpoints"), like, args.step)
    params = jax.tree.map(lambda x: x[args.seed], state.seeds.agent.params)
    policy = from_params(params, config.network, fns.run.env.spec, config.env, config.algo)
    policy.save(args.out)
    steps = record.get("env_steps")
    at = f" ({steps:,} env steps per seed)" if isinstance(steps, int) else ""
    print(f"wrote {args.out}: seed {args.seed} of {run_dir}, checkpoint {step}{at}")
    return 0


def evaluate(args: argparse.Namespace) -> int:
    from jaxrl_fast.trained.policy import Policy
    from jaxrl_fast.trained.policy import evaluate as evaluate_policy

    policy = Policy.load(args.file)
    returns = evaluate_policy(policy, episodes=args.episodes, seed=args.seed, env_name=args.env)
    name = args.env or policy.spec.name
    if args.json:
        print(json.dumps({"env": name, "episodes": args.episodes, "returns": returns.tolist()}))
        return 0
    print(
        f"{name}: greedy return {np.mean(returns):.2f} over {args.episodes} episodes "
        f"(min {np.min(returns):.2f}, max {np.max(returns):.2f})"
    )
    return 0
