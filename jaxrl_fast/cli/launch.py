"""`jaxrl-fast launch --local N [--cpu] -- train ...`: the subcommand's options and its call of
`parallel.launch.launch_local`."""

from __future__ import annotations

import argparse


def _launch(args: argparse.Namespace) -> int:
    from jaxrl_fast.parallel.launch import launch_local

    return launch_local(
        args.local, args.command, port=args.port, timeout_s=args.timeout, cpu=args.cpu
    )


def add_launch_parser(sub) -> None:
    """Add `launch` to the command line's subcommands."""
    la = sub.add_parser(
        "launch",
        help="run a train command as N local processes of one multi-process run",
        description="jaxrl-fast launch --local N [--timeout S] -- train ...: starts N processes "
        "on this machine (coordinator 127.0.0.1, a free port), each on its own GPU where there "
        "are N (else refused: --cpu runs them on the CPU); process 0's output is shown, the "
        "others' prefixed [pI] on stderr; one failing, or the time limit, stops them all.",
    )
    la.add_argument("--local", type=int, required=True, metavar="N", help="processes to start")
    la.add_argument("--port", type=int, help="coordinator port (default: a free one)")
    la.add_argument("--timeout", type=float, help="seconds before every process is killed")
    la.add_argument(
        "--cpu",
        action="store_true",
        help="run the processes on the CPU (JAX_PLATFORMS=cpu); by default each process gets "
        "its own GPU where there are enough",
    )
    la.add_argument("command", nargs=argparse.REMAINDER, help="-- train ...")
    la.set_defaults(func=_launch)
