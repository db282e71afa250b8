"""toolpath as a library (issue 32): one import name, and nothing of the user's shadows it.

A user's own folder named ``kernel``, ``planner``, ``registry`` or ``catalogs`` (next to their script,
or as the kernel's working directory) was imported instead of toolpath's: from the CLI, inside
planned cells and while restoring a snapshot.
"""

import ast
import importlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import toolpath

ROOT = Path(__file__).resolve().parent.parent
OLD_NAMES = ("kernel", "planner", "registry", "catalogs")


def test_every_name_of_the_facade_resolves_and_nothing_else_is_offered():
    for name in toolpath.__all__:
        assert getattr(toolpath, name) is not None, name
    assert toolpath.Workspace is importlib.import_module("toolpath.planner.tasks.workspace").Workspace
    with pytest.raises(AttributeError, match="module 'toolpath' has no attribute 'Kernel'"):
        toolpath.Kernel  # noqa: B018


@pytest.mark.integration
def test_the_built_wheel_holds_one_top_level_package(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv*", ".git", "__pycache__", "*.egg-info", "build", "dist", ".pytest_cache", ".hypothesis"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "wheels"), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheels").glob("toolpath-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")} == {"toolpath"}
    # Every module of kernel/ (its sub-packages' too) is in the wheel: pyproject's packages name them all.
    assert {f"toolpath/kernel/{path.relative_to(ROOT / 'kernel').as_posix()}" for path in (ROOT / "kernel").rglob("*.py")} <= set(names)
    for package in (
        "toolpath/kernel/inside/setup.py",
        "toolpath/planner/interfaces/cli/main.py",
        "toolpath/registry/catalog.py",
        "toolpath/catalogs/chemistry/catalog.yaml",
        "toolpath/catalogs/catalog.schema.json",
    ):
        assert package in names


@pytest.fixture()
def shadowing_folder(tmp_path):
    """A working directory with the user's own packages ``kernel``, ``planner``, ``registry`` and
    ``catalogs``, each of which fails loudly when imported."""
    for name in OLD_NAMES:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('the user\\'s own {name} package was imported')\n")
    return tmp_path


@pytest.mark.integration
def test_the_cli_runs_a_task_from_a_folder_with_the_users_own_kernel_and_catalogs_packages(shadowing_folder):
    run = subprocess.run(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", "run", "parse this molecule", "--input", "smiles=CCO"],
        capture_output=True,
        text=True,
        cwd=shadowing_folder,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(shadowing_folder)},
    )
    assert run.returncode == 0, run.stderr
    assert "C2H6O" in run.stdout


@pytest.mark.integration
def test_a_planned_cell_and_a_snapshot_restore_run_in_a_kernel_whose_folder_shadows_the_old_names(shadowing_folder):
    workspace = toolpath.Workspace.open()
    with workspace.session("shadowed", cwd=str(shadowing_folder)) as session:
        run = session.run_task("parse this molecule", {"smiles": "CCO"})
        assert run.result.status == "ok", run.result.error
        # In the kernel, `kernel` is the user's own package: toolpath took no name of theirs.
        theirs = session.execute("import kernel")
        assert theirs.status == "error" and "the user's own kernel package was imported" in theirs.error["evalue"]
    with workspace.session("shadowed", cwd=str(shadowing_folder)) as restored:
        again = restored.execute("molecule['formula']")
        assert again.status == "ok" and again.result == "'C2H6O'", (again.status, again.error, again.notice)


def test_every_public_error_descends_from_toolpath_error_and_refusals_keep_their_builtin_bases():
    import inspect
    import pkgutil

    from toolpath.errors import Refusal, ToolpathError

    outside = []
    for package in ("toolpath.registry", "toolpath.kernel", "toolpath.planner"):
        for module_info in pkgutil.walk_packages(importlib.import_module(package).__path__, f"{package}."):
            module = importlib.import_module(module_info.name)
            for name, value in vars(module).items():
                error = inspect.isclass(value) and issubclass(value, BaseException) and not issubclass(value, Warning)
                if error and value.__module__ == module.__name__ and not name.startswith("_"):
                    if not issubclass(value, ToolpathError):
                        outside.append(f"{module.__name__}.{name}")
    assert outside == []
    from toolpath.planner import NoPlanError, PlanningTimeout, UnknownStateError
    from toolpath.registry import CatalogError

    assert issubclass(CatalogError, Refusal) and issubclass(CatalogError, ValueError)
    assert issubclass(UnknownStateError, ValueError) and issubclass(PlanningTimeout, TimeoutError) and issubclass(NoPlanError, Refusal)


def _imported_names(path):
    """``(line, module)`` for every import in the file at ``path``, lazy and type-checking ones too."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, node.module or ""


def test_imports_flow_one_way_registry_then_kernel_then_planner():
    layers = {"registry": 0, "kernel": 1, "planner": 2}
    upward = []
    for folder, rank in layers.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, name in _imported_names(path):
                parts = name.split(".")
                if parts[0] == "toolpath" and len(parts) > 1 and layers.get(parts[1], -1) > rank:
                    upward.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert upward == []


def test_the_planner_s_sub_packages_import_one_way_planning_then_search_then_tasks_then_learning_then_interfaces():
    """Each layer of the pipeline imports only the layers below it (lazy imports too), none imports
    the ``toolpath.planner`` façade, and each sub-package's ``__init__`` imports nothing, so that
    importing one pulls none of its heavy modules."""
    layers = {"planning": 0, "search": 1, "tasks": 2, "learning": 3, "interfaces": 4}
    assert sorted(path.name for path in (ROOT / "planner").iterdir() if path.is_dir() and path.name != "__pycache__") == sorted(layers)
    assert sorted(path.name for path in (ROOT / "planner").glob("*.py")) == ["__init__.py"]
    wrong = []
    for folder, rank in layers.items():
        for path in sorted((ROOT / "planner" / folder).rglob("*.py")):
            for line, name in _imported_names(path):
                if path.name == "__init__.py":
                    wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
                elif name == "toolpath.planner" or (name.startswith("toolpath.planner.") and layers.get(name.split(".")[2], -1) > rank):
                    wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert wrong == []


def test_the_kernel_s_sub_packages_import_one_way_inside_then_sandbox_kernels_tools_bridge_codemode():
    """Each sub-package of ``kernel/`` imports only those below it (lazy imports too), the modules
    at its top (errors, option checks) import none of them, and each sub-package's ``__init__``
    imports nothing."""
    layers = {"inside": 0, "sandbox": 1, "kernels": 2, "tools": 3, "bridge": 4, "codemode": 5}
    assert sorted(path.name for path in (ROOT / "kernel").iterdir() if path.is_dir() and path.name != "__pycache__") == sorted(layers)
    wrong = []
    for path in sorted((ROOT / "kernel").rglob("*.py")):
        parts = path.relative_to(ROOT / "kernel").parts
        if parts == ("__init__.py",):
            continue  # the lazy façade names every sub-package
        rank = layers[parts[0]] if len(parts) > 1 else -1
        for line, name in _imported_names(path):
            target = name.split(".")
            if path.name == "__init__.py" or (target[:2] == ["toolpath", "kernel"] and len(target) > 3 and layers.get(target[2], -1) > rank):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert wrong == []


#: The modules of toolpath outside ``kernel/inside/`` that code in the kernel imports: leaves that
#: import nothing of toolpath but its root error.
SHARED_WITH_THE_KERNEL = (
    "toolpath.errors",
    "toolpath.registry.names",
    "toolpath.registry.output_paths",
    "toolpath.registry.retry_conditions",
    "toolpath.registry.storage",
)


def test_nothing_that_runs_inside_the_kernel_imports_a_host_module_of_toolpath():
    """``kernel/inside/`` imports (lazily too) only itself and :data:`SHARED_WITH_THE_KERNEL` of
    toolpath; those import only ``toolpath.errors``; and the host↔kernel constants import nothing."""
    leaves = {"toolpath.errors": ROOT / "toolpath" / "errors.py"}
    leaves.update({name: ROOT / "registry" / f"{name.rsplit('.', 1)[1]}.py" for name in SHARED_WITH_THE_KERNEL if name.startswith("toolpath.registry.")})
    host = []
    for path in sorted((ROOT / "kernel" / "inside").glob("*.py")):
        for line, name in _imported_names(path):
            if name.split(".")[0] == "toolpath" and not (
                name == "toolpath.kernel.inside" or name.startswith("toolpath.kernel.inside.") or name in SHARED_WITH_THE_KERNEL
            ):
                host.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    for path in leaves.values():
        host.extend(
            f"{path.relative_to(ROOT)}:{line} imports {imported}"
            for line, imported in _imported_names(path)
            if imported.startswith("toolpath") and imported != "toolpath.errors"
        )
    host.extend(f"kernel/inside/protocol.py:{line} imports {name}" for line, name in _imported_names(ROOT / "kernel" / "inside" / "protocol.py"))
    assert host == []


def test_the_modules_and_functions_the_host_calls_in_the_kernel_by_name_are_inside_it():
    from toolpath.kernel.inside import protocol

    modules = {name: value for name, value in vars(protocol).items() if name.endswith("_MODULE")}
    assert modules and all(value.startswith("toolpath.kernel.inside.") for value in modules.values())
    for value in modules.values():
        importlib.import_module(value)
    assert callable(getattr(importlib.import_module(protocol.BINDER_MODULE), protocol.BINDER_FUNCTION))
    assert callable(getattr(importlib.import_module(protocol.HOST_MODULE), protocol.HOST_FUNCTION))
    approvals = importlib.import_module(protocol.APPROVAL_POLICY_MODULE)
    assert all(issubclass(getattr(approvals, name), Exception) for name in protocol.APPROVAL_ERRORS)


def _imports_outside_type_checking(tree):
    """The import statements of a module, at any depth, but those under ``if TYPE_CHECKING:``."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt | ast.excepthandler))


def test_no_module_imports_one_that_imports_it_back_even_on_first_use():
    import networkx

    folders = {"toolpath": "toolpath", "registry": "toolpath.registry", "kernel": "toolpath.kernel", "planner": "toolpath.planner"}
    modules = {}
    for folder, package in folders.items():
        for path in (ROOT / folder).rglob("*.py"):
            dotted = ".".join([package, *path.relative_to(ROOT / folder).with_suffix("").parts])
            modules[dotted.removesuffix(".__init__")] = path
    graph = networkx.DiGraph()
    for name, path in modules.items():
        for node in _imports_outside_type_checking(ast.parse(path.read_text(), str(path))):
            targets = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            )
            graph.add_edges_from((name, target) for target in targets if target in modules and target != name)
    assert sorted(networkx.simple_cycles(graph)) == []


def _catalog(path, domain, requirements=""):
    path.write_text(
        f"domain: {domain}\n{requirements}"
        f"states:\n  - {{token: {domain}.done, description: Something was done.}}\n"
        f"tools:\n  - name: act\n    description: Do something.\n    module: {domain}_tools\n    state_transition: {{produces: [{domain}.done]}}\n"
    )
    return path


def test_a_catalog_whose_modules_are_missing_is_skipped_with_how_to_install_them(tmp_path):
    from toolpath.registry import CatalogError, CatalogSkippedWarning, load_catalogs

    needy = _catalog(tmp_path / "needy.yaml", "needy", "requirements:\n  modules: [toolpath_absent_module]\n  install: pip install toolpath-absent\n")
    plain = _catalog(tmp_path / "plain.yaml", "plain", "requirements:\n  modules: [json]\n")
    with pytest.warns(
        CatalogSkippedWarning, match=r"catalog 'needy' \(.*needy.yaml\) is skipped: it needs toolpath_absent_module, .*: pip install toolpath-absent"
    ):
        loaded = load_catalogs([needy, plain])
    assert [catalog.domain for catalog in loaded.catalogs] == ["plain"]
    assert [(skipped.domain, skipped.missing) for skipped in loaded.skipped] == [("needy", ("toolpath_absent_module",))]
    assert "needy.done" not in loaded.states
    with pytest.raises(CatalogError, match=r"TP107 requirements\.modules: it needs toolpath_absent_module, .*: pip install toolpath-absent"):
        load_catalogs([needy])  # nothing left to plan over: a refusal saying what to install


def test_the_command_line_says_in_one_line_which_catalog_it_skipped_and_goes_on(tmp_path):
    needy = _catalog(tmp_path / "needy.yaml", "needy", "requirements:\n  modules: [toolpath_absent_module]\n  install: pip install toolpath-absent\n")
    plain = _catalog(tmp_path / "plain.yaml", "plain")
    shown = subprocess.run(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", "plan", "--goal", "plain.done", "--catalog", str(needy), "--catalog", str(plain)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.splitlines() == [
        f"toolpath: warning: catalog 'needy' ({needy}) is skipped: it needs toolpath_absent_module, which cannot be imported here: pip install toolpath-absent"
    ]
    assert "act" in shown.stdout
    alone = subprocess.run(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", "plan", "--goal", "needy.done", "--catalog", str(needy)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert alone.returncode == 2 and "TP107" in alone.stderr and "pip install toolpath-absent" in alone.stderr and "Traceback" not in alone.stderr


def test_requirements_must_name_modules(tmp_path):
    from toolpath.registry import CatalogError, load_catalogs

    with pytest.raises(CatalogError, match=r"requirements\.modules.*'rdkit>=2024' is not a module name"):
        load_catalogs([_catalog(tmp_path / "bad.yaml", "bad", "requirements:\n  modules: ['rdkit>=2024']\n")])


def test_a_missing_optional_part_names_the_extra_that_brings_it(monkeypatch, tmp_path):
    from toolpath.errors import MissingExtraError
    from toolpath.planner import Workspace
    from toolpath.planner.planning import picture

    graph = Workspace.open().graph
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    with pytest.raises(MissingExtraError, match=r"pip install 'toolpath\[pictures\]'"):
        picture.draw(graph, tmp_path / "graph.png", "png")
    for module in ("websockets", "cryptography"):
        monkeypatch.setitem(sys.modules, module, None)
    for module in ("toolpath.kernel.kernels.gateway", "toolpath.kernel.bridge.tls"):
        monkeypatch.delitem(sys.modules, module, raising=False)
        with pytest.raises(MissingExtraError, match=r"pip install 'toolpath\[gateway\]'"):
            importlib.import_module(module)
        monkeypatch.delitem(sys.modules, module, raising=False)


#: What the extras bring: a core install (``pip install toolpath``) has none of them.
OPTIONAL_MODULES = ("rdkit", "pandas", "pyarrow", "openpyxl", "matplotlib", "websockets", "cryptography")


def test_the_core_requirements_leave_every_optional_package_to_an_extra():
    import importlib.metadata
    import re

    core = [requirement for requirement in importlib.metadata.requires("toolpath") if "extra ==" not in requirement]
    names = {re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower() for requirement in core}
    assert {"jupyter_client", "networkx", "pydantic"} <= {name.replace("-", "_") for name in names}
    assert not names & set(OPTIONAL_MODULES)


@pytest.mark.integration
def test_without_the_optional_packages_the_shipped_catalogs_name_their_extras_and_a_users_own_catalog_runs(tmp_path):
    # Every Python started here, the kernel included, is one where the optional packages cannot be
    # imported: the state of a core install.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"import sys\nfor name in {OPTIONAL_MODULES!r}:\n    sys.modules[name] = None\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    shipped = subprocess.run(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", "run", "is aspirin drug-like?", "--input", "smiles=CC(=O)Oc1ccccc1C(=O)O"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert shipped.returncode == 2 and "Traceback" not in shipped.stderr, shipped.stderr
    assert "2 problems in 2 catalogs" in shipped.stderr
    assert "pip install 'toolpath[chemistry]'" in shipped.stderr and "pip install 'toolpath[tabular]'" in shipped.stderr

    catalog = _catalog(tmp_path / "plain.yaml", "plain")
    (tmp_path / "plain_tools.py").write_text("def act() -> str:\n    return 'done without pandas'\n")
    own = subprocess.run(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", "run", "do something", "--catalog", str(catalog)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert own.returncode == 0, own.stderr
    assert "done without pandas" in own.stdout
    assert "pandas" not in own.stderr
