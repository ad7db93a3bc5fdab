"""No import circle in the core: the modules of ``shared/mnemonia`` form a directed acyclic
graph.

Each module is read with :mod:`ast`, and every import counts (inside functions too, and under
``if TYPE_CHECKING:``): a hidden import is still a dependency. ``from m import x`` is an edge to
``m.x`` when that is a module of the core, else to ``m``; ``import a.b.c`` is an edge to
``a.b.c``; relative imports are resolved. A package's ``__init__`` is the module named after the
package, so a package importing its own submodules and a submodule importing its package are
edges like any other.
"""

from __future__ import annotations

import ast
from itertools import pairwise
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "shared" / "mnemonia"

Edges = dict[str, dict[str, str]]
"""``module -> {imported module -> "file:line" of the first such import}``."""


def module_names(root: Path) -> dict[str, Path]:
    """Every module under ``root`` (the ``mnemonia`` package folder) by dotted name."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """``name`` if it is a core module, else its longest prefix that is one (None: not ours)."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in modules:
            return candidate
    return None


def _targets(node: ast.Import | ast.ImportFrom, me: str, is_package: bool,
             modules: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [t for alias in node.names if (t := _known(alias.name, modules))]
    base = node.module or ""
    if node.level:
        package = me if is_package else me.rsplit(".", 1)[0]
        up = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*up, base] if base else up)
    found = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        target = sub if sub in modules else _known(base, modules)
        if target:
            found.append(target)
    return found


def import_graph(root: Path = CORE) -> Edges:
    """The import edges between the core modules under ``root``."""
    modules = module_names(root)
    graph: Edges = {name: {} for name in modules}
    for me, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _targets(node, me, path.name == "__init__.py", modules):
                    where = f"{path.relative_to(root.parent)}:{node.lineno}"
                    graph[me].setdefault(target, where)
    return graph


def strongly_connected(graph: Edges) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def _cycle_through(graph: Edges, component: list[str]) -> list[str]:
    """A shortest cycle from the component's first module back to it, inside the component."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child not in members:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in came_from:
                    came_from[child] = node
                    nxt.append(child)
        frontier = nxt
    return [start, start]  # pragma: no cover - a component always closes


def cycles(root: Path = CORE) -> list[str]:
    """One readable cycle per circle of the core (empty: none), with where each edge is."""
    graph = import_graph(root)
    found = []
    for component in strongly_connected(graph):
        if len(component) == 1 and component[0] not in graph[component[0]]:
            continue
        cycle = _cycle_through(graph, component)
        steps = [f"{a} -> {b} ({graph[a][b]})" for a, b in pairwise(cycle)]
        found.append(f"circle among {', '.join(component)}:\n    " + "\n    ".join(steps))
    return found


def test_core_import_graph_has_no_circle() -> None:
    found = cycles()
    assert not found, "import circles in the core:\n" + "\n".join(found)


RECALL_STEPS = ("candidates", "context", "entities", "spread", "score", "hits")
"""The steps of the recall pipeline (DESIGN section 1): each a function of the run, importing
the run, the keyword helpers and the tenant reads below them, never another step; only the
package's ``__init__`` runs them in order."""


def step_reaches(graph: Edges) -> list[str]:
    """``"a -> b (file:line)"`` for every recall step that imports another step."""
    steps = {f"mnemonia.recall.{s}" for s in RECALL_STEPS}
    return sorted(f"{me} -> {target} ({where})" for me in steps if me in graph
                  for target, where in graph[me].items() if target in steps)


def test_recall_steps_do_not_import_each_other() -> None:
    graph = import_graph()
    assert all(f"mnemonia.recall.{s}" in graph for s in RECALL_STEPS)
    assert step_reaches(graph) == []


def test_the_step_guard_catches_a_step_importing_another(tmp_path: Path) -> None:
    """A copy of the core where the spreading step imports the scoring step fails the guard
    (so it cannot pass vacuously)."""
    import shutil
    copy = tmp_path / "mnemonia"
    shutil.copytree(CORE, copy)
    spread = copy / "recall" / "spread.py"
    spread.write_text(spread.read_text(encoding="utf-8")
                      + "\nfrom mnemonia.recall.score import spread_bound  # noqa: E402\n",
                      encoding="utf-8")
    found = step_reaches(import_graph(copy))
    assert len(found) == 1
    assert found[0].startswith("mnemonia.recall.spread -> mnemonia.recall.score (")
