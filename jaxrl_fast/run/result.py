"""What `train` returns: `TrainResult`, the run's final state, returns, chunk log and timings."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from jaxrl_fast.config import TrainConfig, parse_variants
from jaxrl_fast.envs import EnvSpec
from jaxrl_fast.loop import RunnerState
from jaxrl_fast.platform.timing import Timed
from jaxrl_fast.trained.policy import Policy, from_params


@dataclasses.dataclass(kw_only=True)
class TrainResult(Timed):
    """What `train` returns: a `platform.timing.Timed` (env steps, compile, run, evaluation and
    wall times, as the conventional baseline's result) with the fused run's own facts.

    Attributes:
      config: the run's config.
      runner: final `RunnerState` (device arrays; `runner.seeds.agent.params` are the weights).
      final_return: `[S]` mean evaluation return over `eval_episodes` episodes at the end
        (greedy, or epsilon-greedy with `eval_epsilon`).
      train_return: `[S]` mean training-episode return over the last chunk (epsilon-greedy).
      history: one dict per chunk (env steps, per-seed means of return, loss, Q, |TD|).
      env_steps: env steps per seed (prefill included).
      compile_time_s: seconds the run waited on compilation: init and run_chunk, plus the part
        of the evaluation's compile (which runs in a background thread while the chunks run)
        not yet done when the last chunk ended.
      run_time_s: seconds running init and all chunks (the prefill included), compile excluded.
      first_chunk_time_s: the part of `run_time_s` up to the end of the first chunk (init, the
        prefill, which runs in the first chunk, and that chunk's training blocks).
      eval_time_s: seconds waiting on the final evaluation after the last chunk (with
        `eval_every`, it is dispatched right after that chunk, so part of it may already be done
        and counted in `run_time_s`, as are the evaluations during training).
      wall_time_s: whole call, compile included.
      num_devices: devices the seeds were spread over.
      precision: the precision policy the run used, in words (`PrecisionPolicy.describe`).
      fp32_fallback_env_steps: env steps (per seed) at the end of the chunk in which the compute
        switched to fp32, or None if it never did.
      spec: the training env's spec (what `policy` acts on).
      resumed_env_steps: env steps per seed already done when this call resumed the run (0: it
        started the run); the rates count only the steps this call ran.
      resumed_chunks: chunks already done when this call resumed the run.
      evaluations: evaluations this call made (during training with `eval_every`, and the
        final one); their time is in `run_time_s` except the final wait, `eval_time_s`.
    """

    config: TrainConfig
    runner: RunnerState
    final_return: np.ndarray
    train_return: np.ndarray
    history: list[dict]
    first_chunk_time_s: float
    num_devices: int = 1
    precision: str = ""
    fp32_fallback_env_steps: int | None = None
    spec: EnvSpec | None = None
    resumed_chunks: int = 0
    evaluations: int = 0

    def policy(self, seed: int = 0) -> Policy:
        """Seed `seed`'s greedy policy: `act(obs)`, `save(path)`, `Policy.load(path)`
        (`jaxrl_fast.trained.policy`). With data replicas, their parameters are equal
        (averaged); the first replica's are taken.

        Raises:
          ValueError: `seed` is not in `range(config.num_seeds)`.
        """
        n = self.config.num_seeds
        if not isinstance(seed, int) or not 0 <= seed < n:
            raise ValueError(
                f"TrainResult.policy: seed={seed!r} is not allowed; expected an int in "
                f"[0, {n}) (config.num_seeds={n})."
            )
        spec = self.spec
        if spec is None:  # a result made by hand: the config's env
            from jaxrl_fast.envs import make_env

            e = self.config.env
            spec = make_env(
                e.name, e.num_envs, atari=e.atari, discretise=e.discretise, observe=e.observe
            ).spec
        params = jax.tree.map(lambda x: x[seed], self.runner.seeds.agent.params)
        return from_params(params, self.config.network, spec, self.config.env, self.config.algo)

    @property
    def lanes(self) -> int:
        """Seeds x data replicas: the lanes `env_steps_per_s` adds up."""
        return self.config.num_lanes

    @property
    def train_env_steps_per_s(self) -> float:
        """Aggregate env steps per second of the training phase: the chunks after the first (which
        holds the prefill); with one chunk, its training steps over the whole run; after a
        resume, the chunks this call ran (all after the prefill); NaN when it ran none."""
        c = self.config
        steps_per_chunk = c.blocks_per_chunk * c.train_frequency
        if self.resumed_chunks:
            ran = c.chunks - self.resumed_chunks
            if ran == 0:
                return float("nan")
            return c.num_lanes * steps_per_chunk * ran / max(self.run_time_s, 1e-9)
        if c.chunks == 1:
            return c.num_lanes * steps_per_chunk / max(self.run_time_s, 1e-9)
        steps = c.num_lanes * steps_per_chunk * (c.chunks - 1)
        return steps / max(self.run_time_s - self.first_chunk_time_s, 1e-9)

    def summary(self) -> dict:
        """JSON-ready summary: per-seed final returns and the run's timings."""
        return {
            "env": self.config.env.name,
            "num_seeds": self.config.num_seeds,
            "num_devices": self.num_devices,
            "env_steps_per_seed": self.env_steps,
            "seeds": [
                {
                    "seed_index": i,
                    "final_return": _num(self.final_return[i]),
                    "train_return": _num(self.train_return[i]),
                }
                for i in range(self.config.num_seeds)
            ],
            "mean_final_return": _num(np.nanmean(self.final_return))
            if np.isfinite(self.final_return).any()
            else None,
            **self.timings(),
            "evaluations": self.evaluations,
            "env_steps_per_s": _num(self.env_steps_per_s),
            "train_env_steps_per_s": _num(self.train_env_steps_per_s),
            "precision": self.precision,
            "fp32_fallback_env_steps": self.fp32_fallback_env_steps,
            "config": self.config.to_dict(),
            **self._variants(),
        }

    def _variants(self) -> dict:
        """With `EnvConfig.variants`: each seed's variant and, per variant, its parameters,
        seeds and mean final greedy return."""
        if self.config.env.variants is None:
            return {}
        variants = parse_variants(self.config.env.variants)
        out = []
        for v, params in enumerate(variants):
            seeds = list(range(v, self.config.num_seeds, len(variants)))
            finals = np.asarray(self.final_return)[seeds]
            out.append(
                {
                    "variant": v,
                    "params": params,
                    "seed_indices": seeds,
                    "final_return": [_num(x) for x in finals],
                    "mean_final_return": _num(np.nanmean(finals))
                    if np.isfinite(finals).any()
                    else None,
                }
            )
        return {"variants": out}


def _num(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None
