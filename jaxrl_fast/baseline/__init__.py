"""The conventional, unfused DQN loop: the baseline all jaxrl_fast speed-ups are measured against.

`train_unfused` is the loop a user would write without this library, in the style of CleanRL's
`dqn_jax.py`: a Python `for` loop over collect steps that calls a jitted `act` and a jitted
`env.step`, copies each step to host memory, keeps the replay in host numpy arrays (observation
and next observation stored explicitly), samples it with a numpy RNG, and calls a jitted
gradient step. It runs the *same* algorithm as the fused loop of `jaxrl_fast.loop` with the
same hyperparameters, from the same functions: the same env, network, optimiser and
learning-rate schedule (`make_agent`), the same keys (`seeds.train_keys`, `seeds.eval_keys`), the
same epsilon (`Schedules.collect_epsilon`), the same precision policy and conv choice
(`resolve_precision`, `seeds.resolve_choices` for an unfused loop), the same evaluation
(`evaluate.make_evaluate`), and
the same schedule shape (`learning_starts // num_envs` prefill steps, then blocks of
`train_frequency // num_envs` collect steps followed by `updates_per_block` updates, with a
target update after every `target_period_blocks`-th block). Only one seed is trained.

It exists so benchmarks compare the fused program against an honest, reasonably efficient
conventional implementation (every jitted function is compiled once, before timing; keys are
split inside the jitted calls; each step makes a single device-to-host copy) rather than against
a strawman. Differences that remain are those of the conventional design itself: one dispatch
per act, env step and update, host round trips every step, and host-side replay sampling.
"""

from jaxrl_fast.baseline.parts import Collector, Parts, compile_parts
from jaxrl_fast.baseline.replay import HostReplay
from jaxrl_fast.baseline.run import BaselineResult, baseline_blocks, train_unfused

__all__ = [
    "BaselineResult",
    "Collector",
    "HostReplay",
    "Parts",
    "baseline_blocks",
    "compile_parts",
    "train_unfused",
]
