"""`jaxrl-fast envs`: the env names that train here, or the JAX suites with their extras."""

from __future__ import annotations

import argparse
from typing import Any


def _envs(args: argparse.Namespace) -> int:
    from jaxrl_fast.envs import list_envs, suites

    if args.suites:
        for s in suites.suites():
            state = "installed" if suites.installed(s) else f"pip install 'jaxrl-fast[{s.extra}]'"
            print(f"{s.prefix + ':':11s} {len(s.names):3d} envs  {s.about}  ({state})")
        return 0
    print("\n".join(list_envs(continuous=args.continuous)))
    return 0


def add_parser(sub: Any) -> None:
    """Add the `envs` subcommand to `sub` (argparse subparsers)."""
    e = sub.add_parser("envs", help="list env names")
    e.add_argument(
        "--continuous",
        action="store_true",
        help="list the continuous-action envs instead (train them with --env.discretise N)",
    )
    e.add_argument(
        "--suites",
        action="store_true",
        help="list the JAX env suites (`suite:EnvName`), each with its extra and whether it is "
        "installed",
    )
    e.set_defaults(func=_envs)
