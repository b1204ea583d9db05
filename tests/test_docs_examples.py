"""Every code example in the guides (docs/*.md) runs, on a tiny budget.

* A `python` block runs whole in its own temporary working directory (and HOME): in this process,
  sharing its imports and compiled programs, or, where it sets process-wide state (the CPU device
  count, the compilation cache: `_FRESH`), in a fresh process. Every `train(config, ...)` call in
  it trains `tiny(config)`: the same config with a budget of two training blocks (see `tiny`),
  and a `steps=N` keyword (the env steps `demos.record` plays, the updates `compress.distil`
  makes) is capped at `MAX_STEPS`; nothing else in the block changes.
* A `bash` block's `jaxrl-fast ...` commands run through the CLI exactly as written, with
  `--set` options appended that shrink the budget the same way (`tiny_options`); commands that
  need several devices or processes (`--parallel.data`, `launch`) run in a fresh process.
  A synopsis line (with `[...]` or `...`) is not a command: every option it names must appear
  in its subcommand's `--help`.
* A block that shows a command and its output (`$ jaxrl-fast plan ...`) must print that output.

A `python` block whose first line is `# file: NAME.py` is a module the guide's other examples
import: it is written to the working directory of every example of its guide (and importable
by its `jaxrl-fast` commands, as the command's current directory is), and runs too.

Examples that need the `atari` extra are skipped where envpool is not installed, and those that
name a JAX suite's env ("pgx:...") where that suite's extra is not.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest
from conftest import child_env

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
HAS_ENVPOOL = importlib.util.find_spec("envpool") is not None
MAX_STEPS = 500


def tiny(config):
    """`config` with a budget of two training blocks: prefill, capacity and the L3 tier just
    large enough for its sequences and n-step windows, one chunk, no evaluation (an episode of
    Pong is thousands of steps; the evaluation has tests of its own)."""
    e, r = config.env.num_envs, config.replay
    window = max(2, r.burn_in + r.sequence_length + r.n_step)
    prefill, capacity = e * window, e * max(64, 2 * window)
    if not config.replays:  # the rollout learner has no prefill
        prefill = 0
    replay = {"capacity": capacity}
    if r.l3 != "off":
        replay["l3_capacity"] = 4 * capacity
    return config.replace(
        total_env_steps=prefill + 2 * config.train_frequency,
        learning_starts=prefill,
        num_chunks=1,
        eval_episodes=0,
        eval_every=None,
        replay=replay,
    )


def tiny_options(argv: list[str]) -> list[str]:
    """The `--set` options that make the CLI command `argv` train `tiny(its config)`."""
    from jaxrl_fast.cli.config_args import build_config
    from jaxrl_fast.cli.main import make_parser

    config = build_config(make_parser().parse_args(argv))
    small = tiny(config)
    fields = {
        "total_env_steps": small.total_env_steps,
        "learning_starts": small.learning_starts,
        "num_chunks": 1,
        "eval_episodes": 0,
        "replay.capacity": small.replay.capacity,
    }
    if small.replay.l3 != "off":
        fields["replay.l3_capacity"] = small.replay.l3_capacity
    return [x for k, v in fields.items() for x in ("--set", f"{k}={v}")]


def _blocks(lang: str) -> list[tuple[str, int, str]]:
    """(guide, index, text) of every fenced block of `lang` ("" for a block with no language)."""
    out = []
    for doc in DOCS:
        found = re.findall(r"```(\w*)\n(.*?)```", doc.read_text(), re.S)
        out += [(doc.name, i, text) for i, (kind, text) in enumerate(found) if kind == lang]
    return out


def _commands(block: str) -> list[list[str]]:
    """The commands of a shell block: continuation lines (after a backslash, or an indented
    synopsis line) joined, comments dropped."""
    commands: list[list[str]] = []
    for line in re.sub(r"\\\n\s*", " ", block).splitlines():
        if line.strip() and line.startswith(" ") and commands:
            commands[-1] += _split(line)
        elif line.strip():
            commands.append(_split(line))
    return commands


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError:  # a synopsis in words ("[train's config options]"): its words
        return line.split("  #")[0].split()


def _is_synopsis(argv: list[str]) -> bool:
    return any(t.startswith("[") or t.endswith("]") or t == "..." or "|" in t for t in argv)


def _missing_extra(words: list[str] | str) -> str | None:
    """The extra an example needs that is not installed (None: it can run)."""
    from jaxrl_fast.envs import suites

    text = " ".join(words) if isinstance(words, list) else words
    if "atari" in text and not HAS_ENVPOOL:
        return "atari"
    for s in suites.suites():
        if f"{s.prefix}:" in text and not suites.installed(s):
            return s.extra
    return None


PYTHON = _blocks("python")
_FILE = re.compile(r"# file: (\w+\.py)\n")


def _write_guide_files(name: str, folder: pathlib.Path) -> None:
    """Write the `# file: NAME.py` blocks of guide `name` into `folder`."""
    for guide, _, block in PYTHON:
        found = _FILE.match(block)
        if guide == name and found:
            (folder / found.group(1)).write_text(block)


SHELL = [
    (name, i, argv)
    for name, i, block in _blocks("bash")
    for argv in _commands(block)
    if argv and argv[0] == "jaxrl-fast"
]
RUNS = [(n, i, a) for n, i, a in SHELL if not _is_synopsis(a)]
SYNOPSES = [(n, i, a) for n, i, a in SHELL if _is_synopsis(a)]
OUTPUTS = [(n, i, b) for n, i, b in _blocks("") if b.startswith("$ jaxrl-fast ")]


def test_the_guides_have_examples_of_every_kind():
    assert len(PYTHON) >= 7 and len(RUNS) >= 20 and SYNOPSES and OUTPUTS
    # every bash line is a command this file runs or checks (or an install line)
    for name, _, block in _blocks("bash"):
        for argv in _commands(block):
            assert argv[0] in ("jaxrl-fast", "pip"), f"{name}: unknown command {argv}"


# Examples that set process-wide state run in a fresh process.
_FRESH = ("use_cpu_cores", "compile_cache")
# ... and those that register names (a loss, a config section, a preset), or import a guide's
# module that does: the registries are process-wide.
_REGISTERS = ("register_section", "presets.register")


def _fresh(name: str, block: str) -> bool:
    if any(word in block for word in _FRESH + _REGISTERS):
        return True
    modules = [m for m, code in _guide_files(name) if any(w in code for w in _REGISTERS)]
    return any(re.search(rf"\bimport {m}\b", block) for m in modules)


def _guide_files(name: str) -> list[tuple[str, str]]:
    """`(module name, code)` of a guide's `# file: NAME.py` blocks."""
    out = []
    for guide, _, block in PYTHON:
        m = _FILE.match(block)
        if guide == name and m:
            out.append((m.group(1).removesuffix(".py"), block))
    return out


def _split_plugins(args: list[str]) -> tuple[list[str], list[str]]:
    """`(["--plugin", M, ...], the rest)` of a command's arguments."""
    plugins, rest, it = [], [], iter(args)
    for token in it:
        if token == "--plugin":
            plugins += [token, next(it)]
        else:
            rest.append(token)
    return plugins, rest


def _run_python(block: str, tmp_path: pathlib.Path) -> subprocess.CompletedProcess:
    script = tmp_path / "example.py"
    script.write_text(block)
    env = child_env(
        HOME=str(tmp_path), PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT / "tests")])
    )
    return subprocess.run(
        [sys.executable, str(pathlib.Path(__file__).resolve()), "--run-example", str(script)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=env,
    )


@pytest.mark.slow
@pytest.mark.parametrize("name, index, block", PYTHON, ids=[f"{n}-{i}" for n, i, _ in PYTHON])
def test_python_example_runs(name, index, block, tmp_path, monkeypatch, capsys):
    if _missing_extra(block):
        pytest.skip(f"needs the {_missing_extra(block)} extra")
    _write_guide_files(name, tmp_path)
    if _fresh(name, block):
        proc = _run_python(block, tmp_path)
        assert proc.returncode == 0, (
            f"{name} example {index}:\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
        )
        printed = proc.stdout
    else:
        monkeypatch.chdir(tmp_path)
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.setenv("HOME", str(tmp_path))
        script = tmp_path / "example.py"
        script.write_text(block)
        _run_example(str(script))
        printed = capsys.readouterr().out
    assert "trained tiny(config)" in printed or "train(" not in block or _FILE.match(block)


def _make_recorded_demos(args: list[str], cwd: pathlib.Path) -> None:
    """A command that trains from a recorded `.npz` (its guide's python example writes it
    first): record one from a tiny run of the same preset, as that example does."""
    source = args[args.index("--demo.source") + 1] if "--demo.source" in args else ""
    if not source.endswith(".npz"):
        return
    from jaxrl_fast import presets, train
    from jaxrl_fast.trained import demos

    teacher = train(tiny(presets.get(args[args.index("--preset") + 1])), progress=False)
    demos.record(teacher, cwd / source, steps=MAX_STEPS, epsilon=0.01)


def _make_run_for(args: list[str], cwd: pathlib.Path) -> None:
    """A command that reads a run directory (`export`) or a policy file (`evaluate`): make one
    first from a tiny run of the default preset, as the guide's earlier commands do."""
    if args[0] not in ("export", "evaluate"):
        return
    run = args[1] if args[0] == "export" else "run-for-evaluate"
    train = ["train", "--run-dir", run, "--no-progress", "--no-cache"]
    code, text = _run_cli([*train, *tiny_options(["train"])], cwd)
    assert code == 0, text[-3000:]
    if args[0] == "evaluate":
        code, text = _run_cli(["export", run, "--out", args[1]], cwd)
        assert code == 0, text[-3000:]


def _run_cli(argv: list[str], cwd: pathlib.Path) -> tuple[int, str]:
    from jaxrl_fast.cli import main

    here = os.getcwd()
    out = io.StringIO()
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out):
            code = main(argv)
    finally:
        os.chdir(here)
    return code, out.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("name, index, argv", RUNS, ids=[" ".join(a[1:4]) for _, _, a in RUNS])
def test_shell_example_runs(name, index, argv, tmp_path, monkeypatch):
    if _missing_extra(argv):
        pytest.skip(f"needs the {_missing_extra(argv)} extra")
    _write_guide_files(name, tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # the `jaxrl-fast` command's current directory
    plugins, args = _split_plugins(argv[1:])
    if plugins:  # a plugin registers names process-wide: a fresh process
        me = str(pathlib.Path(__file__).resolve())
        cmd = [sys.executable, me, "--run-plugin-command", *plugins, *args]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=child_env()
        )
        assert proc.returncode == 0, f"{name}: {' '.join(argv)}\n{proc.stderr[-3000:]}"
        return
    _make_recorded_demos(args, tmp_path)
    _make_run_for(args, tmp_path)
    if args[0] in ("train", "sweep"):
        args = [*args, *tiny_options(args), "--no-progress", "--no-cache"]
    elif args[0] == "launch":  # the command after `--` is a train command
        cut = args.index("--") + 1
        inner = args[cut:]
        args = [*args[:cut], *inner, *tiny_options(inner), "--no-progress", "--no-cache"]
    if args[0] == "launch" or "--parallel.data" in args:  # several devices or processes
        cmd = [sys.executable, "-m", "jaxrl_fast.cli", *args]
        env = child_env(cache=args[0] != "launch")  # a distributed run keeps the cache off
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env
        )
        code, text = proc.returncode, proc.stdout + proc.stderr
    else:
        code, text = _run_cli(args, tmp_path)
    assert code == 0, f"{name}: {' '.join(argv)}\n{text[-3000:]}"
    if "--out" in args:  # a train or sweep command's files, or export's file
        out = tmp_path / args[args.index("--out") + 1]
        assert out.stat().st_size > 0 if out.is_file() else any(out.iterdir())


@pytest.mark.parametrize(
    "name, index, argv", SYNOPSES, ids=[" ".join(a[1:3]) for _, _, a in SYNOPSES]
)
def test_every_option_of_a_synopsis_exists(name, index, argv):
    command = argv[1] if len(argv) > 1 and not argv[1].startswith("-") else "train"
    help_text = _help(command)
    options = {t.strip("[]|.,") for t in argv if t.lstrip("[").startswith("--")}
    for option in options:
        flag = option.split("=")[0]
        assert flag in help_text, f"{name}: `{' '.join(argv)}` names {flag}, unknown to {command}"


def _help(command: str) -> str:
    from jaxrl_fast.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    return out.getvalue()


@pytest.mark.parametrize("name, index, block", OUTPUTS, ids=[n for n, _, _ in OUTPUTS])
def test_shown_output_is_what_the_command_prints(name, index, block, tmp_path):
    first, *shown = block.rstrip("\n").splitlines()
    code, text = _run_cli(shlex.split(first[len("$ jaxrl-fast ") :]), tmp_path)
    assert code == 0
    printed = [line.rstrip() for line in text.rstrip("\n").splitlines()]
    assert printed == [line.rstrip() for line in shown], f"{name}: the output shown is stale"


def _run_example(path: str) -> None:
    """Run a guide's python block, each `train(config, ...)` call training `tiny(config)`."""
    tree = ast.parse(pathlib.Path(path).read_text(), filename=path)

    class TinyTrain(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.Call:
            self.generic_visit(node)
            if isinstance(node.func, ast.Name) and node.func.id == "train" and node.args:
                node.args[0] = ast.Call(ast.Name("_tiny", ast.Load()), [node.args[0]], [])
            for kw in node.keywords:
                if kw.arg == "steps" and isinstance(kw.value, ast.Constant):
                    kw.value = ast.Constant(min(kw.value.value, MAX_STEPS))
            return node

    code = compile(ast.fix_missing_locations(TinyTrain().visit(tree)), path, "exec")

    def _tiny(config):
        print("trained tiny(config)")
        return tiny(config)

    exec(code, {"__name__": "__main__", "_tiny": _tiny})


def _run_plugin_command(argv: list[str]) -> int:
    """A `jaxrl-fast --plugin M ...` command in this (fresh) process: the plugins imported,
    then the command with the tiny budget's options."""
    from jaxrl_fast.cli import main
    from jaxrl_fast.cli.main import import_plugins

    args = import_plugins(argv)
    if args[0] in ("train", "sweep"):
        args = [*args, *tiny_options(args), "--no-progress", "--no-cache"]
    return main(args)


if __name__ == "__main__" and sys.argv[1:2] == ["--run-example"]:
    _run_example(sys.argv[2])
elif __name__ == "__main__" and sys.argv[1:2] == ["--run-plugin-command"]:
    sys.path.insert(0, os.getcwd())  # the guide's modules
    sys.exit(_run_plugin_command(sys.argv[2:]))
