"""The package's structure (DESIGN §2): layers read from the folders, no import circle, no
private names across modules, a builder that only composes. Static: reads the sources."""

from __future__ import annotations

import ast
import collections
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "jaxrl_fast"

# The layer of every folder of the package (DESIGN §2): a module's folder is its layer, and an
# import may point to its own layer or below, never up. The package root holds only the public
# face (`__init__.py`) and `types.py`, the layer-0 types every layer shares.
LAYERS = {
    0: {"types", "config", "presets", "platform"},
    1: {"envs", "replay", "agent", "parallel", "checkpoint"},
    2: {"loop"},
    3: {"run", "trained", "xla_report", "baseline"},
    4: {"cli"},
}
LAYER = {unit: n for n, units in LAYERS.items() for unit in units}
ROOT_FILES = {"__init__.py", "types.py"}
# Arrows that must never exist, even sideways (DESIGN §2); and config imports only types.
FORBIDDEN = {("replay", "agent"), ("replay", "loop"), ("envs", "replay"), ("envs", "agent"),
             ("agent", "loop"), ("baseline", "loop"), ("baseline", "run")}  # fmt: skip


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


def test_the_package_root_holds_only_the_public_face_and_the_layer_folders():
    files = {p.name for p in PKG.iterdir() if p.is_file() and p.suffix == ".py"}
    folders = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    assert files <= ROOT_FILES, f"modules at the package root: {sorted(files - ROOT_FILES)}"
    assert folders <= set(LAYER), (
        f"folders with no layer in DESIGN §2: {sorted(folders - set(LAYER))}"
    )
    units = {_unit(m) for m in MODULES} - {None}
    assert units == folders | {"types"}


def test_the_tests_mirror_the_package_folders():
    folders = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    tests = {p.name for p in (ROOT / "tests").iterdir() if any(p.glob("test_*.py"))}
    assert folders <= tests, f"package folders with no tests/ folder: {sorted(folders - tests)}"


def test_imports_point_down_the_layers():
    bad = []
    for module, targets in _graph().items():
        a = _unit(module)
        for target in targets:
            b = _unit(target)
            if a is None or b is None or a == b:
                continue
            config_out = a == "config" and b != "types"
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


def test_make_train_names_no_feature():
    """`make_train` composes (DESIGN §2): the only branch in it tells a config from a resolved
    run; every feature comes in through an extension point (tests/loop/test_extension_points.py)."""
    tree = ast.parse((PKG / "loop" / "loop.py").read_text())
    fn = next(
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "make_train"
    )
    tests = [ast.unparse(n.test) for n in ast.walk(fn) if isinstance(n, (ast.If, ast.IfExp))]
    assert tests == ["isinstance(run, TrainConfig)"], tests
