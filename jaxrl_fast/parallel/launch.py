"""`jaxrl-fast launch --local N -- train ...`: N local processes of one multi-process run.

Each process runs `jaxrl-fast train ... --coordinator 127.0.0.1:PORT --num-processes N
--process-id I` (PORT a free one). Process 0's output is passed through; the others' lines are
prefixed `[pI]` on stderr. When a process fails, or the time limit passes, every process is
killed with SIGKILL (`jax.distributed` catches SIGTERM and keeps running), so a stuck peer ends
the run instead of hanging it.

Devices (`process_envs`): on a machine with N or more visible NVIDIA GPUs, process I sees GPU I
alone (`CUDA_VISIBLE_DEVICES`), so each preallocates its own GPU's memory and NCCL sees one
process per GPU. With fewer GPUs than processes the launch is refused, naming the fixes (fewer
processes, or `--cpu`): processes sharing one GPU would each preallocate 75% of its memory, and
NCCL refuses two processes on one GPU. Without a GPU (or with `--cpu`: `JAX_PLATFORMS=cpu`) every
process has one CPU device.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Sequence


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def visible_gpus(env: dict) -> list[str]:
    """The NVIDIA GPUs the processes could use: `CUDA_VISIBLE_DEVICES`'s entries where it is
    set, else the indices `nvidia-smi` lists; none where `JAX_PLATFORMS` leaves CUDA out or
    neither is there."""
    platforms = env.get("JAX_PLATFORMS", "")
    if platforms and not any(p in platforms for p in ("cuda", "gpu")):
        return []
    if "CUDA_VISIBLE_DEVICES" in env:
        ids = [d.strip() for d in env["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
        return [] if ids[:1] == ["-1"] else ids
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi is None:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip().isdigit()]


def process_envs(num_processes: int, env: dict, *, cpu: bool = False) -> list[dict]:
    """Each process's environment: `env` plus its device (see the module docstring).

    Raises:
      ValueError: fewer visible GPUs than processes (the message names the fixes).
    """
    if cpu:
        return [{**env, "JAX_PLATFORMS": "cpu"} for _ in range(num_processes)]
    gpus = visible_gpus(env)
    if not gpus:
        return [dict(env) for _ in range(num_processes)]
    if len(gpus) < num_processes:
        raise ValueError(
            f"launch --local {num_processes}: this machine shows {len(gpus)} GPU(s) "
            f"({', '.join(gpus)}), and processes cannot share one (each would preallocate 75% of "
            f"its memory, and NCCL refuses two processes on one GPU). Use --local {len(gpus)} "
            "(one process per GPU), or --cpu to run the processes on the CPU."
        )
    return [{**env, "CUDA_VISIBLE_DEVICES": gpus[i]} for i in range(num_processes)]


def _pipe(stream, out, prefix: str) -> None:
    for line in iter(stream.readline, ""):
        out.write(prefix + line)
        out.flush()
    stream.close()


def launch_local(
    num_processes: int,
    command: Sequence[str],
    *,
    port: int | None = None,
    timeout_s: float | None = None,
    env: dict | None = None,
    cpu: bool = False,
) -> int:
    """Run `jaxrl-fast <command>` as `num_processes` local processes, each on its own device
    (`process_envs`; `cpu`: on the CPU); return the first non-zero exit status (124 after a
    timeout), else 0.

    Raises:
      ValueError: `num_processes` < 1, `command` is not a `train` command, or fewer visible
        GPUs than processes.
    """
    if not (isinstance(num_processes, int) and num_processes >= 1):
        raise ValueError(f"launch --local={num_processes!r}: expected an int >= 1")
    command = list(command)
    if command[:1] == ["--"]:
        command = command[1:]
    if command[:1] != ["train"]:
        raise ValueError(
            f"launch runs `train` commands: `jaxrl-fast launch --local N -- train ...` (got "
            f"{' '.join(command) or 'nothing'!r})"
        )
    for flag in ("--coordinator", "--num-processes", "--process-id"):
        if flag in command:
            raise ValueError(f"launch sets {flag} itself; leave it out of the train command")
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    envs = process_envs(num_processes, child_env, cpu=cpu)
    port = port or free_port()
    base = [sys.executable, "-m", "jaxrl_fast.cli", *command]
    procs, threads = [], []
    for i in range(num_processes):
        args = base + [
            "--coordinator",
            f"127.0.0.1:{port}",
            "--num-processes",
            str(num_processes),
            "--process-id",
            str(i),
        ]
        p = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=envs[i],
            start_new_session=True,
        )
        procs.append(p)
        out, prefix = (sys.stdout, "") if i == 0 else (sys.stderr, f"[p{i}] ")
        t = threading.Thread(target=_pipe, args=(p.stdout, out, prefix), daemon=True)
        t.start()
        threads.append(t)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    status = 0
    try:
        while any(p.poll() is None for p in procs):
            failed = [p.returncode for p in procs if p.returncode not in (None, 0)]
            if failed:
                status = failed[0]
                sys.stderr.write(f"launch: a process exited with {status}; stopping the others\n")
                break
            if deadline is not None and time.monotonic() > deadline:
                status = 124
                sys.stderr.write(f"launch: time limit of {timeout_s:g} s passed; stopping\n")
                break
            time.sleep(0.05)
        else:
            status = next((p.returncode for p in procs if p.returncode), 0)
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in procs:
            p.wait()
        for t in threads:
            t.join(timeout=5)
    return status
