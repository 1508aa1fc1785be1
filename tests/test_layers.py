"""The package's architecture, checked: subpackages by role, imported one way only, with public names.

The layer order is the one stated in ``depthutils/__init__.py``. Every ``import`` of the package (at module
level or inside a function) is read from the source, so a lazy import counts as much as an eager one.
"""
from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import depthutils

PKG = Path(depthutils.__file__).resolve().parent

#: the layers, bottom first; subpackages of one rank must not import each other
LAYERS = [("core",), ("ladder",), ("data",), ("models",), ("cost",), ("measures",), ("analysis",),
          ("teaching",), ("book",), ("perf",), ("__main__",)]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}
#: the package root imports the measurements (and reaches later layers only lazily, by name)
RANK["__init__"] = RANK["measures"]


def layer_of(module: str) -> str:
    """``depthutils.cost.budget`` -> ``cost``; ``depthutils`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        name = ".".join(rel.parts)
        yield (name[: -len(".__init__")] if name.endswith(".__init__") else name), path


def imports(name: str, path: Path):
    """``(imported module, [names], line)`` for every import of depthutils in one module, absolute."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "depthutils" or target.startswith("depthutils."):
                yield target, [a.name for a in node.names], node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "depthutils" or a.name.startswith("depthutils."):
                    yield a.name, [], node.lineno


def test_the_package_has_at_most_twelve_entries_and_no_flat_prefix_groups():
    entries = sorted(p.name for p in PKG.iterdir() if p.name not in ("__pycache__", "__init__.pyi"))
    assert len(entries) <= 12, entries
    flat = [e for e in entries if e.endswith(".py") and e not in ("__init__.py", "__main__.py")]
    assert not flat, f"modules beside the subpackages: {flat}"
    assert set(e for e in entries if not e.endswith(".py")) <= set(RANK), entries


def test_every_module_has_a_layer():
    for name, _ in modules():
        assert layer_of(name) in RANK, f"{name} is in no layer of {LAYERS}"


def test_imports_go_one_way():
    """No module imports from a later layer, nor from another subpackage of its own rank."""
    bad = []
    for name, path in modules():
        mine = layer_of(name)
        for target, names, line in imports(name, path):
            theirs = [layer_of(target)]
            if target == "depthutils":  # from depthutils import data, models, ...: each name is a subpackage
                theirs = [n if n in RANK else "__init__" for n in names] or ["__init__"]
            for t in theirs:
                if t == mine:
                    continue
                if RANK[t] > RANK[mine] or (RANK[t] == RANK[mine] and "__init__" not in (t, mine)):
                    bad.append(f"{path.relative_to(PKG.parent)}:{line} ({mine}) imports {target} ({t})")
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def test_no_underscore_name_is_imported_across_subpackages():
    """A name that starts with ``_`` is its subpackage's own; another subpackage imports public names only,
    whether by ``from … import _name`` or as ``module._name``."""
    bad = []
    for name, path in modules():
        mine = layer_of(name)
        tree = ast.parse(path.read_text())
        aliases = {}  # local name -> (module, layer) of an imported depthutils module
        for target, names, line in imports(name, path):
            if layer_of(target) != mine and target != "depthutils":
                bad += [f"{path.relative_to(PKG.parent)}:{line} imports {target}.{n}" for n in names
                        if n.startswith("_") and not n.startswith("__")]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("depthutils"):
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    if importlib.util.find_spec(full.split(".")[0]) and _is_module(full):
                        aliases[a.asname or a.name] = full
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("depthutils") and a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")
                    and layer_of(aliases[node.value.id]) != mine):
                bad.append(f"{path.relative_to(PKG.parent)}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    assert not bad, "\n".join(bad)


def _is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except ModuleNotFoundError:
        return False


def test_every_subpackage_states_its_public_names():
    """Each subpackage's ``__init__`` that exports names lists them in ``__all__``, and each listed name exists."""
    import depthutils as du
    assert set(du.__all__) >= {*du.MEASUREMENTS, "load_model"}
    for name in du.__all__:
        assert getattr(du, name) is not None
    for name, path in modules():
        if path.name == "__init__.py" and re.search(r"^from depthutils\S* import", path.read_text(), re.M):
            mod = importlib.import_module(name)
            assert hasattr(mod, "__all__"), f"{name} exports names without __all__"
            missing = [n for n in mod.__all__ if not hasattr(mod, n)]
            assert not missing, f"{name}.__all__ lists missing names {missing}"


def test_the_root_names_every_measurement_by_name():
    """``depthutils/__init__.py``'s ``__all__`` and its stub ``__init__.pyi`` (what editors and type checkers read)
    name every registered measurement, each imported from the module the registry says holds it; nothing else."""
    import depthutils as du

    stub = (PKG / "__init__.pyi").read_text()
    named = {name: module for module, names in re.findall(r"^from (depthutils\.measures\.\w+) import (.+)$", stub, re.M)
             for name in re.findall(r"(\w+) as \1", names)}
    assert named == {name: m.module for name, m in du.MEASUREMENTS.items()}
    assert [n for n in du.__all__ if n in du.MEASUREMENTS] == list(du.MEASUREMENTS)
    for name in du.MEASUREMENTS:
        assert getattr(du, name).__module__ == du.MEASUREMENTS[name].module


def _fresh(code: str) -> None:
    """Runs ``code`` in a fresh interpreter (nothing of the package imported before it)."""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=PKG.parent)


def test_load_model_is_defined_once():
    found = [str(p.relative_to(PKG.parent)) for _, p in modules()
             if re.search(r"^def load_model\(", p.read_text(), re.M)]
    assert found == ["depthutils/models/handle.py"], found


def test_the_root_loads_no_later_layer_and_every_module_imports():
    """In one fresh interpreter: importing ``depthutils`` loads no analysis, perf, teaching or book module; then every
    module of the package imports, the later layers last; ``depthutils.<measurement>`` is still the function
    (no module shadows it)."""
    names = sorted((n for n, _ in modules() if not n.endswith("__main__")), key=lambda n: RANK[layer_of(n)])
    _fresh("import importlib, sys\nimport depthutils as du\n"
           "late = sorted(m for m in sys.modules if m.split('.')[:2] in (['depthutils', 'book'], "
           "['depthutils', 'teaching'], ['depthutils', 'perf'], ['depthutils', 'analysis']))\n"
           "assert not late, late\n"
           "for n in %r: importlib.import_module(n)\n"
           "assert callable(du.logit_lens) and du.logit_lens.__module__ == 'depthutils.measures.logit_lens'\n"
           "assert callable(du.future_effects) and not isinstance(du.future_effects, type(du))\n" % names)


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a module of the package or an attribute reached from one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
        except AttributeError:
            return False
        return True
    return False


def test_every_dotted_name_resolves():
    """Docstrings, comments, the tests, the chapters and the pages point at names that exist
    (``depthutils.cost.budget.pick_batch``), not at old homes."""
    root = PKG.parent
    paths = ([p for _, p in modules()] + sorted((root / "tests").rglob("*.py")) + sorted(root.glob("*.md"))
             + sorted(root.glob("chapters/*.ipynb")) + [root / "bigger_models.ipynb", PKG / "ladder" / "README.md"])
    bad = []
    for path in paths:
        for line_no, line in enumerate(path.read_text().splitlines(), 1):
            for dotted in re.findall(r"(?<![\w/])depthutils(?:\.\w+)+", line):
                if not resolves(dotted):
                    bad.append(f"{path.relative_to(PKG.parent)}:{line_no} {dotted}")
    assert not bad, "names that do not resolve:\n" + "\n".join(bad)


def test_the_import_graph_has_no_circle():
    """No module reaches itself through the imports of the package (module-level or inside a function): a
    circle ties modules that should read one way (a package's ``__init__`` that imports its submodules at its end
    and a submodule that imports the package back is one)."""
    names = {name for name, _ in modules()}
    graph = {}
    for name, path in modules():
        edges = set()
        for target, imported, _ in imports(name, path):
            subs = [f"{target}.{n}" for n in imported if f"{target}.{n}" in names]
            edges |= set(subs) if subs and len(subs) == len(imported) else {target} | set(subs)
        graph[name] = {e for e in edges if e in names and e != name}
    circles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                circles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_every_name_a_chapter_reads_from_a_module_exists():
    """``claim.COMPLETENESS_LIMIT``, ``exercises.check``, ``du.logit_lens``: every attribute a chapter's code reads from
    a module it imports from the package exists (a module's names move; the chapters must follow)."""
    root = PKG.parent
    bad = []
    for path in sorted(root.glob("chapters/*.ipynb")) + [root / "bigger_models.ipynb"]:
        cells = json.loads(path.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        aliases = {"du": "depthutils"}
        for module, names in re.findall(r"^from (depthutils[\w.]*) import ([^\n(]+)$", code, re.M):
            for n in names.split(","):
                name, _, alias = n.strip().partition(" as ")
                aliases[(alias or name).strip()] = f"{module}.{name.strip()}"
        for alias, dotted in aliases.items():
            if not resolves(dotted):
                bad.append(f"{path.name}: imports {dotted}")
            for attr in sorted(set(re.findall(rf"(?<![\w.]){alias}\.(\w+)", code))):
                if not resolves(f"{dotted}.{attr}"):
                    bad.append(f"{path.name}: {alias}.{attr} ({dotted}.{attr})")
    assert not bad, "names the chapters read that do not exist:\n" + "\n".join(bad)
