"""The package's structure (DESIGN §2): layers, no import circle, no private names across
modules, builders that only compose, modules of a readable size. Static: reads the sources."""

from __future__ import annotations

import ast
import collections
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "jaxrl_fast"

# The layer of every top-level module or folder of the package (DESIGN §2): an import may point
# to its own layer or below, never up.
LAYERS = {
    0: {
        "types",
        "registry",
        "config",
        "options",
        "presets",
        "dqn_family",
        "pqn",
        "board_presets",
        "hparams",
        "paths",
        "cpu_lowering",
    },
    1: {
        "envs",
        "replay",
        "agent",
        "parallel",
        "checkpoint",
        "schedules",
        "precision",
        "device_precision",
        "seeds",
        "demos",
    },  # fmt: skip
    2: {"loop", "resolve", "evaluate"},
    3: {
        "train",
        "run_files",
        "programs",
        "result",
        "chunk_log",
        "metrics",
        "sweep",
        "plot",
        "compile_cache",
        "xla_report",
        "baseline",
        "compress",
        "policy",
        "selfplay",
    },  # fmt: skip
    4: {"cli", "cli_sweep"},
}
LAYER = {unit: n for n, units in LAYERS.items() for unit in units}
# Arrows that must never exist, even sideways (DESIGN §2); and config imports only types and
# registry.
FORBIDDEN = {("replay", "agent"), ("replay", "loop"), ("envs", "replay"), ("envs", "agent"),
             ("agent", "loop"), ("baseline", "loop"), ("baseline", "train")}  # fmt: skip


def _modules(root: pathlib.Path, prefix: str) -> dict[str, pathlib.Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([prefix, *parts]) if prefix else ".".join(parts)] = path
    return out


MODULES = _modules(PKG, "jaxrl_fast")


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Lines of imports under `if TYPE_CHECKING:` (annotations only, never run)."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            lines |= {n.lineno for stmt in node.body for n in ast.walk(stmt)}
    return lines


def _imports(path: pathlib.Path) -> list[tuple[str, str | None, int]]:
    """(module, imported name or None, line) of every jaxrl_fast import in a file that runs."""
    tree = ast.parse(path.read_text())
    skip, out = _type_checking_only(tree), []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jaxrl_fast"):
            out += [(node.module, a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("jaxrl_fast")]
            out += [(name, None, node.lineno) for name in names]
    return out


def _target(module: str, name: str | None) -> str:
    """The module an import reads: `from M import sub` reads M.sub when that is a module."""
    if name is not None and f"{module}.{name}" in MODULES:
        return f"{module}.{name}"
    return module


def _unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _graph() -> dict[str, set[str]]:
    graph = collections.defaultdict(set)
    for module, path in MODULES.items():
        for imported, name, _ in _imports(path):
            graph[module].add(_target(imported, name))
    return graph


def test_every_module_has_a_layer():
    units = {_unit(m) for m in MODULES} - {None, "__main__"}
    assert units <= set(LAYER), f"modules with no layer in DESIGN §2: {sorted(units - set(LAYER))}"


def test_imports_point_down_the_layers():
    bad = []
    for module, targets in _graph().items():
        a = _unit(module)
        for target in targets:
            b = _unit(target)
            if a is None or b is None or a == b:
                continue
            config_out = a == "config" and b not in ("types", "registry")
            if LAYER[b] > LAYER[a] or (a, b) in FORBIDDEN or config_out:
                bad.append(f"{module} -> {target}")
    assert not bad, "imports against DESIGN §2:\n" + "\n".join(sorted(bad))


def test_no_import_circle():
    graph = _graph()
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                circles.append(sorted(scc))

    for v in list(MODULES):
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"


def _private_uses(path: pathlib.Path) -> list[str]:
    """`from jaxrl_fast.M import _x`, and `alias._x` where alias is a jaxrl_fast module."""
    tree = ast.parse(path.read_text())
    aliases, out = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jaxrl_fast"):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    out.append(f"{where} imports {node.module}.{a.name}")
                if f"{node.module}.{a.name}" in MODULES:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("jaxrl_fast") and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            out.append(f"{where} uses {aliases[node.value.id]}.{node.attr}")
    return out


@pytest.mark.parametrize("folder", ["jaxrl_fast", "tests", "benchmarks"])
def test_no_module_reads_another_modules_private_names(folder):
    bad = [u for p in sorted((ROOT / folder).rglob("*.py")) for u in _private_uses(p)]
    assert not bad, "private names read across modules:\n" + "\n".join(bad)


def _body_lines(path: pathlib.Path, name: str) -> int:
    """Lines of function `name`'s body after its docstring."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            return node.end_lineno - body[0].lineno + 1
    raise AssertionError(f"{name} not found in {path}")


@pytest.mark.parametrize(
    "module, builder",
    [
        ("loop/loop.py", "make_train"),
        ("agent/dqn.py", "make_agent"),
        ("replay/tiered.py", "make_buffer"),
    ],  # fmt: skip
)
def test_builders_only_compose(module, builder):
    """The three builders stay short: composition only (DESIGN §2), at most 80 lines of code."""
    assert _body_lines(PKG / module, builder) <= 80


def test_modules_stay_readable():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in PKG.rglob("*.py")}
    big = {p: n for p, n in sizes.items() if n > 420}
    assert not big, f"modules over 420 lines (split them): {big}"
