"""The shape of the package (README, Development): imports run down the floors, lazy imports
included, and no module imports itself back through others; no module grows past 600 lines."""

import ast
from pathlib import Path

import lm_eval_fin

PACKAGE = Path(lm_eval_fin.__file__).parent

# floor of each top-level part; an import may go to its own floor or any floor below. The package
# root holds only the package's face (__init__: its version) and the command table (cli).
FLOORS = {
    "cli": 7,
    "harness": 6, "benchmarks": 6, "builders": 6, "export": 6,
    "ems": 5, "rerank": 5, "judge": 5, "report": 5,
    "attribution": 4, "agreement": 4,
    "measures": 3, "outputs": 3, "sandbox": 3,
    "plumbing": 2,
    "text": 1,
}
ROOT = 0  # lm_eval_fin/__init__.py
# within a floor, which parts may import which (nothing else crosses sideways)
SIDEWAYS = {
    ("benchmarks", "harness"),  # a benchmark's task glue uses the harness
    ("builders", "benchmarks"),  # a builder writes the format a benchmark's data module reads
    ("export", "benchmarks"),  # an export reads each benchmark's metric scales and dataset id
    ("ems", "judge"),
    ("rerank", "judge"),
}
MAX_LINES = 600


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "root"


def floor_of(module: str) -> int:
    return FLOORS.get(part_of(module), ROOT)


def imports_of(path: Path) -> set[str]:
    """Every lm_eval_fin module ``path`` imports, at any depth of the code (lazy ones too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("lm_eval_fin")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lm_eval_fin"):
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    edges = {}
    for name, path in modules.items():
        edges[name] = {target for target in imports_of(path) if target in modules and target != name}
    return edges


def test_imports_run_down_the_floors():
    wrong = []
    for source, targets in graph().items():
        for target in targets:
            a, b = part_of(source), part_of(target)
            if a == b:
                continue
            if floor_of(target) > floor_of(source) or (
                floor_of(target) == floor_of(source) and (a, b) not in SIDEWAYS
            ):
                wrong.append(f"{source} -> {target}")
    assert not wrong, "imports that run up or sideways:\n" + "\n".join(sorted(wrong))


def test_no_import_cycles():
    edges = graph()
    # a package's __init__ re-exporting its own modules is not a cycle of the design
    edges = {s: {t for t in ts if not (s + ".").startswith(t + ".") and not t.startswith(s + ".")}
             for s, ts in edges.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        for target in edges.get(node, ()):
            if state.get(target) == 1:
                cycles.append(" -> ".join(stack[stack.index(target):] + [target]))
            elif target not in state:
                visit(target, stack + [target])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_module_over_600_lines():
    long = {str(path.relative_to(PACKAGE)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


def test_every_package_folder_is_in_the_distribution():
    """setup.cfg lists its packages by hand (``find:`` cannot name tasks/ and metrics/ as
    lm_eval_fin.tasks and lm_eval_fin.metrics): a folder missing there is missing from the wheel
    (an editable install, as the tests run, finds it anyway). The quick check; the wheel itself
    is checked file by file in tests/test_cli.py."""
    import configparser

    config = configparser.ConfigParser()
    config.read(PACKAGE.parent / "setup.cfg", encoding="utf-8")
    listed = set(config["options"]["packages"].split())
    folders = {module_name(path) for path in PACKAGE.rglob("__init__.py")}
    assert folders - listed == set()


def test_the_package_root_holds_no_loose_modules():
    """Every module belongs to a part named in FLOORS (README, "Inside the package"): a module
    left at the root has no floor, so nothing could tell what it may import."""
    loose = {module_name(path) for path in PACKAGE.glob("*.py")} - {"lm_eval_fin", "lm_eval_fin.cli"}
    parts = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    assert not loose and parts == set(FLOORS) - {"cli"}, (loose, parts ^ (set(FLOORS) - {"cli"}))
