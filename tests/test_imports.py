"""The `jask` package's import graph, read from the source: no cycles, and no imports of
`jask` modules inside functions (the usual way to hide a cycle)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "jask"

# Function-local imports of jask modules that are lazy for a reason other than a cycle:
# (module, imported module) -> the reason.
LAZY_IMPORTS: dict[tuple[str, str], str] = {}


def _modules() -> dict[str, Path]:
    """Module name -> file, for every .py file of the package."""
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of the module `node` imports from."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, path: Path, modules) -> list[tuple[str, int, bool]]:
    """(imported jask module, line, inside a function) for each import in `path`."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    local = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            local |= {id(n) for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, is_package, node)
            # `from package import name` imports the submodule package.name when there is one
            targets = [
                f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source
                for a in node.names
            ]
        else:
            continue
        for target in targets:
            if target == "jask" or target.startswith("jask."):
                found.append((target, node.lineno, id(node) in local))
    return found


def _graph() -> dict[str, set[str]]:
    """Module -> the jask modules importing it runs. Importing a.b.c also runs the packages
    a.b and a (their __init__); those that contain the importer are already running."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for target, _, _ in _imports(module, path, modules):
            parts = target.split(".")
            for n in range(1, len(parts) + 1):
                name = ".".join(parts[:n])
                if name in modules and name != module and not module.startswith(name + "."):
                    graph[module].add(name)
    return graph


def _cycle(graph) -> list[str] | None:
    """One cycle of the graph (its modules in order), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n) :] + [n]
            if n not in state and (found := visit(n)):
                return found
        state[m] = 2
        path.pop()
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_the_graph_sees_the_package():
    graph = _graph()
    assert {"jask", "jask._jax.op", "jask.ops.matmul", "jask.lowering.graph"} <= set(graph)
    assert "jask._jax.op" in graph["jask.ops.matmul"]
    assert "jask.ops" in graph["jask._api.elementwise"]


def test_no_import_cycles():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle among jask modules: " + " -> ".join(cycle)


def test_cycle_detection_works():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_function_local_jask_imports():
    modules = _modules()
    found = [
        f"{path.relative_to(ROOT.parent)}:{line} imports {target}"
        for module, path in sorted(modules.items())
        for target, line, inside in _imports(module, path, modules)
        if inside and (module, target) not in LAZY_IMPORTS
    ]
    assert not found, (
        "import jask modules at the top of the module (a cycle is a layering "
        "problem: move the shared part down):\n" + "\n".join(found)
    )


def test_allowed_lazy_imports_still_exist():
    modules = _modules()
    for (module, target), reason in LAZY_IMPORTS.items():
        assert reason
        assert any(
            t == target and inside for t, _, inside in _imports(module, modules[module], modules)
        ), (module, target)
