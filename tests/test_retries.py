"""Retry policies and injected failures (issue 55, first slice), with real kernels: a tool that fails
for a moment is tried again where the cell calls it, bound in the kernel or on the host; a tool with
effects is tried once; a person's no is never asked again; ``toolpath run --inject-failure`` shows
the retries and, when every try fails, the failure after them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest
import requests
import urllib3

from toolpath.kernel import CodeMode, FailureInjection, Tool, Toolkit, UnknownInjectionTargetError
from toolpath.kernel.inside.approval_policy import ApprovalDenied
from toolpath.kernel.inside.retries import RetrySpec
from toolpath.kernel.tools.bindings import Bindings
from toolpath.registry import CatalogError, load_catalogs
from toolpath.registry.retry_conditions import failure_kind, matches
from toolpath.registry.retry_policy import RetryPolicy

pytestmark = pytest.mark.integration

SENSORS_CATALOG = """\
domain: sensors
package: sensors
states:
  - token: sensors.reading_taken
    description: a sensor's reading
  - token: sensors.log_written
    description: a line written to the log
tools:
  - name: read_sensor
    description: Read a sensor; read-only, so a timeout is tried again by default.
    required_parameters: [{name: name, type: str}]
    return_spec: {name: reading, type: str, state: sensors.reading_taken}
    state_transition: {produces: [sensors.reading_taken]}
  - name: append_log
    description: Append a line to the log; it writes, so it is tried once.
    effects: writes
    required_parameters: [{name: line, type: str}]
    state_transition: {produces: [sensors.log_written]}
  - name: read_slow_sensor
    description: Read a slow sensor, tried four times on a timeout or a ValueError.
    required_parameters: [{name: name, type: str}]
    state_transition: {produces: [sensors.reading_taken]}
    retry: {attempts: 4, backoff: 0, on: [timeout, ValueError]}
"""

SENSOR_MODULES = {
    # Each fails its first two calls in a kernel: the third try of the default policy succeeds.
    "read_sensor.py": """
        calls = []

        def read_sensor(name: str) -> str:
            calls.append(name)
            if len(calls) < 3:
                raise TimeoutError(f"sensor {name} did not answer in 2 s")
            return f"{name}: 21.5 C after {len(calls)} tries"
        """,
    "append_log.py": """
        calls = []

        def append_log(line: str) -> None:
            calls.append(line)
            raise ConnectionResetError("the log server hung up")
        """,
    "read_slow_sensor.py": """
        calls = []

        async def read_slow_sensor(name: str) -> str:
            calls.append(name)
            if len(calls) == 1:
                raise ValueError("half a reading")
            if len(calls) < 4:
                raise TimeoutError("still warming up")
            return f"{name}: ok after {len(calls)} tries"
        """,
}


@pytest.fixture()
def sensors(tmp_path):
    """The sensors catalog and its package, in ``tmp_path`` (the kernels' working directory)."""
    package = tmp_path / "sensors"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "catalog.yaml").write_text(SENSORS_CATALOG)
    for name, source in SENSOR_MODULES.items():
        (package / name).write_text(textwrap.dedent(source))
    return tmp_path, load_catalogs([package / "catalog.yaml"]).registry


def binding_code(registry, *names):
    tools = [registry.get_tool_by_name(name) for name in names]
    return Bindings.of(tools, universe=list(registry)).code()


def test_a_read_only_kernel_tool_is_tried_again_after_a_timeout_until_it_answers(sensors):
    directory, registry = sensors
    with CodeMode(pool_size=0, timeout=60, cwd=str(directory), snapshot=False) as code_mode:
        result = code_mode.run(binding_code(registry, "read_sensor") + "await sensors.read_sensor('attic')", "read")
    assert result.status == "ok", result.error
    assert result.result == "'attic: 21.5 C after 3 tries'"
    assert result.stderr.splitlines() == [
        "retrying sensors.read_sensor (try 2 of 3) after TimeoutError: sensor attic did not answer in 2 s in 0.5 s",
        "retrying sensors.read_sensor (try 3 of 3) after TimeoutError: sensor attic did not answer in 2 s in 1 s",
    ]
    assert result.retries == {"sensors.read_sensor": 2} and result.tool_calls == {"sensors.read_sensor": 1}


def test_a_tool_with_effects_is_tried_once_and_its_own_policy_is_followed(sensors):
    directory, registry = sensors
    with CodeMode(pool_size=0, timeout=60, cwd=str(directory), snapshot=False) as code_mode:
        code = binding_code(registry, "append_log", "read_slow_sensor")
        written = code_mode.run(code + "await sensors.append_log('door opened')\n", "effects")
        assert written.status == "error" and written.error["ename"] == "ConnectionResetError"
        assert "retrying" not in written.stderr and written.retries == {}
        assert code_mode.run("import sensors.append_log as module\nmodule.calls", "effects").result == "['door opened']"
        # Its own policy: a ValueError and two timeouts are tried again, the fourth try answers.
        slow = code_mode.run("await sensors.read_slow_sensor('cellar')", "effects")
    assert slow.status == "ok", slow.error
    assert slow.result == "'cellar: ok after 4 tries'"
    assert [line.split(" after ")[1] for line in slow.stderr.splitlines()] == [
        "ValueError: half a reading in 0 s",
        *["TimeoutError: still warming up in 0 s"] * 2,
    ]


def test_the_last_failure_says_how_many_tries_were_made(sensors):
    directory, registry = sensors
    failing = FailureInjection("sensors.read_sensor", probability=1.0)
    # The cell binds the tool itself: given as cell_tools, the injection's name is known.
    with CodeMode(pool_size=0, timeout=60, cwd=str(directory), snapshot=False, inject_failures=[failing], cell_tools=list(registry)) as code_mode:
        result = code_mode.run(binding_code(registry, "read_sensor") + "await sensors.read_sensor('attic')", "injected")
        ran = code_mode.run("import sensors.read_sensor as module\nmodule.calls", "injected")
    assert result.status == "error" and result.error["ename"] == "InjectedFailure"
    assert "sensors.read_sensor failed on each of its 3 tries" in result.error["traceback"]
    assert result.stderr.splitlines()[-1] == "sensors.read_sensor failed on each of its 3 tries; the last failure follows"
    assert result.injected_failures == {"sensors.read_sensor": 3} and result.retries == {"sensors.read_sensor": 2}
    assert ran.result == "[]"  # an injected failure comes before the tool runs


def test_a_plain_codemode_refuses_a_failure_injected_into_a_tool_it_does_not_have(sensors):
    """A misspelt name would fail nothing and the run would look fine: CodeMode refuses it when it
    is made, naming it and the nearest names, whether the tool is a toolkit's or one a cell binds."""
    directory, registry = sensors

    def stock_level(sku: str) -> int:
        """Units of an item in stock."""
        return 3

    inventory = Toolkit("inventory_tools", [stock_level])
    with pytest.raises(UnknownInjectionTargetError) as refused:
        CodeMode([inventory], pool_size=0, snapshot=False, inject_failures=[FailureInjection("inventory.stock_levl", probability=1.0)])
    assert "FailureInjection('inventory.stock_levl'): this CodeMode has no tool 'inventory.stock_levl'; did you mean 'inventory_tools.stock_level'?" in str(
        refused.value
    )
    with pytest.raises(ValueError, match=r"no tool 'sensors.read_sensr'; did you mean 'sensors.read_sensor'\? \(or 'sensors.read_slow_sensor'\)"):
        CodeMode(pool_size=0, snapshot=False, inject_failures=[FailureInjection("sensors.read_sensr", on_calls=(1,))], cell_tools=list(registry))
    # A tool only a cell binds is unknown unless given as cell_tools: the message says so.
    with pytest.raises(UnknownInjectionTargetError, match="give the registry tools cells bind themselves, as planned cells do, as cell_tools="):
        CodeMode(pool_size=0, snapshot=False, inject_failures=[FailureInjection("sensors.read_sensor", on_calls=(1,))])
    # Known names: a toolkit's tool by toolkit, handle or bare name, and a cell's tool given as cell_tools.
    for name in ("inventory_tools.stock_level", "inventory.stock_level", "stock_level", "sensors.read_sensor", "read_slow_sensor"):
        CodeMode([inventory], pool_size=0, snapshot=False, inject_failures=[FailureInjection(name, on_calls=(1,))], cell_tools=list(registry)).shutdown()


def test_a_host_tool_is_retried_in_the_kernel_and_runs_once_per_try():
    tries = []

    def fetch_price(item: str) -> float:
        """The price of an item from a supplier that drops connections."""
        tries.append(item)
        if len(tries) < 3:
            raise ConnectionRefusedError("supplier refused the connection")
        return 9.5

    supplier = Toolkit("supplier_tools", [Tool(fetch_price, retry={"attempts": 3, "backoff": 0.1, "on": ["connection"]})])
    with CodeMode([supplier], pool_size=0, timeout=60, snapshot=False) as code_mode:
        result = code_mode.run("await supplier.fetch_price('bolt')", "host")
    assert result.status == "ok", result.error
    assert result.result == "9.5" and tries == ["bolt"] * 3
    assert result.stderr.splitlines()[0] == "retrying supplier.fetch_price (try 2 of 3) after ConnectionRefusedError: supplier refused the connection in 0.1 s"
    assert result.retries == {"supplier.fetch_price": 2}


def _refusing_address() -> str:
    """``http://127.0.0.1:PORT`` where nothing listens (bound, then released): a connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_an_http_clients_connection_error_from_a_host_tool_is_retried_under_connection():
    """requests' ProxyError is an OSError, urllib3's NewConnectionError no OSError at all; neither
    derives from the built-in ConnectionError, and their class hierarchy stays on the host. They
    cross the bridge as ConnectionError, so `on: [connection]` retries them in the kernel."""
    refusing = _refusing_address()
    tries = []

    def fetch_rates(currency: str) -> dict:
        """Exchange rates, through a proxy that refuses the connection."""
        tries.append(("requests", currency))
        return requests.get(f"http://rates.invalid/{currency}", proxies={"http": refusing}, timeout=5).json()

    def fetch_rates_directly(currency: str) -> bytes:
        """Exchange rates, from a server that refuses the connection."""
        tries.append(("urllib3", currency))
        return urllib3.PoolManager(retries=False).request("GET", f"{refusing}/{currency}").data

    policy = {"attempts": 2, "backoff": 0, "on": ["connection"]}
    rates = Toolkit("rates_tools", [Tool(fetch_rates, retry=policy), Tool(fetch_rates_directly, retry=policy)])
    with CodeMode([rates], pool_size=0, timeout=60, snapshot=False) as code_mode:
        proxied = code_mode.run("await rates.fetch_rates('EUR')", "rates")
        direct = code_mode.run("await rates.fetch_rates_directly('EUR')", "rates")
        caught = code_mode.run("try:\n    await rates.fetch_rates('CHF')\nexcept ConnectionError as error:\n    print('caught', str(error)[:11])", "rates")
    assert proxied.status == "error" and proxied.error["ename"] == "ConnectionError" and proxied.error["evalue"].startswith("ProxyError: ")
    assert proxied.stderr.startswith("retrying rates.fetch_rates (try 2 of 2) after ConnectionError: ProxyError: ")
    assert proxied.retries == {"rates.fetch_rates": 1} and proxied.failure_kinds == {"rates.fetch_rates": "connection"}
    assert direct.status == "error" and direct.error["evalue"].startswith("NewConnectionError: ") and direct.retries == {"rates.fetch_rates_directly": 1}
    assert caught.stdout == "caught ProxyError:\n"
    assert tries == [("requests", "EUR")] * 2 + [("urllib3", "EUR")] * 2 + [("requests", "CHF")] * 2


def test_connection_and_timeout_failures_are_read_along_the_class_hierarchy_of_http_clients():
    """httpx and aiohttp need not be installed: their hierarchies, as their exception modules declare
    them, stand in (httpx/_exceptions.py, aiohttp/client_exceptions.py)."""

    class HTTPError(Exception):
        pass

    class NetworkError(HTTPError):
        pass

    class ReadError(NetworkError):  # httpx: the server dropped the connection mid-answer
        pass

    class TimeoutException(HTTPError):
        pass

    class PoolTimeout(TimeoutException):
        pass

    class ClientError(Exception):
        pass

    class ClientConnectionError(ClientError):
        pass

    class ServerConnectionError(ClientConnectionError):
        pass

    class ServerDisconnectedError(ServerConnectionError):  # aiohttp
        pass

    class ServerTimeoutError(ServerConnectionError, TimeoutError):
        pass

    refused = urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")
    for error, kind in [
        (ReadError("connection reset by peer"), "connection"),
        (PoolTimeout("no connection free in 5 s"), "timeout"),
        (ServerDisconnectedError("server disconnected"), "connection"),
        (ServerTimeoutError("no answer in 5 s"), "timeout"),
        (refused, "connection"),  # though urllib3 derives it from its ConnectTimeoutError
        (urllib3.exceptions.ProtocolError("Connection aborted."), "connection"),
        (requests.exceptions.SSLError("certificate verify failed"), "connection"),
        (requests.exceptions.ConnectTimeout("connect timed out"), "timeout"),  # though a requests ConnectionError
        (ValueError("not a currency: 'EURO'"), ""),
        (ClientError("400, message='Bad Request'"), ""),
    ]:
        assert failure_kind(error) == kind, error
        # A policy retrying that kind retries it; one retrying neither does not.
        assert matches([kind] if kind else ["connection", "timeout"], error) == kind, error


def test_a_denied_approval_is_never_tried_again_whatever_the_policy_says():
    tries = []

    def transfer(amount: int) -> str:
        """Moves money after the bank's own approval, which says no."""
        tries.append(amount)
        raise ApprovalDenied("the bank's approver said no")

    # PermissionError and TimeoutError are what ApprovalDenied and ApprovalTimeout derive from.
    bank = Toolkit("bank_tools", [Tool(transfer, retry={"attempts": 5, "backoff": 0, "on": ["PermissionError", "timeout", "connection"]})])
    with CodeMode([bank], pool_size=0, timeout=60, snapshot=False) as code_mode:
        result = code_mode.run("await bank.transfer(10)", "denied")
    assert result.status == "error" and result.error["ename"] == "ApprovalDenied"
    assert tries == [10] and "retrying" not in result.stderr and result.retries == {}


def test_a_tool_that_asks_for_approval_takes_no_retry_policy():
    with pytest.raises(ValueError, match="each try would ask a person again"):
        Tool(lambda: None, name="send", requires_approval=True, retry={"attempts": 2})


def write_catalog(tmp_path, tool_lines):
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        "domain: lab\nstates:\n  - token: lab.done\ntools:\n  - name: run_step\n    module: lab.run_step\n"
        "    state_transition: {produces: [lab.done]}\n" + "".join(f"    {line}\n" for line in tool_lines)
    )
    return catalog


@pytest.mark.parametrize(
    ("lines", "field", "says"),
    [
        (["retry: {attempts: 0}"], "tools[0].retry.attempts", "greater than or equal to 1"),
        (["retry: {attempts: 2, on: [timeout, status 5y]}"], "tools[0].retry.on", "write 'status' and three digits"),
        (["retry: {attempts: 2, on: timeout}"], "tools[0].retry.on", "write [timeout]"),
        (["retry: {attempts: 2, on: [timout]}"], "tools[0].retry.on", "did you mean 'timeout'?"),
        (["retry: {attempts: 2, on: [sometimes]}"], "tools[0].retry.on", "a lowercase class is named with its module"),
        (["retry: {attempts: 2, backoff: 3, max_backoff: 1}"], "tools[0].retry", "raise max_backoff or lower backoff"),
        (["retry: {attempts: 2, tries: 3}"], "tools[0].retry.tries", "unknown field"),
        (["approval: always", "retry: {attempts: 2}"], "tools[0]", "remove `retry`, or `approval`"),
    ],
)
def test_a_bad_retry_is_a_catalog_problem_naming_its_line_and_field(tmp_path, lines, field, says):
    with pytest.raises(CatalogError) as raised:
        load_catalogs([write_catalog(tmp_path, lines)])
    (problem,) = raised.value.problems
    assert problem.field == field and says in problem.message and problem.line is not None


def test_an_unquoted_on_in_a_retry_is_the_field_on(tmp_path):
    (tool,) = load_catalogs([write_catalog(tmp_path, ["retry: {attempts: 2, on: [timeout, 'status 5xx', OSError, socket.gaierror]}"])]).registry
    assert tool.retry.on == ("timeout", "status 5xx", "OSError", "socket.gaierror")


def toolpath_run(*arguments, home):
    command = [
        sys.executable,
        "-m",
        "toolpath.planner.interfaces.cli",
        "run",
        "is aspirin drug-like? check Lipinski's rule of five",
        "--input",
        "smiles=CC(=O)Oc1ccccc1C(=O)O",
    ]
    return subprocess.run(
        [*command, *arguments], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, env={**os.environ, "TOOLPATH_HOME": str(home)}
    )


def test_toolpath_run_inject_failure_shows_the_retries_and_the_failure_after_them(toolpath_home):
    sometimes = toolpath_run("--inject-failure", "chemistry.parse_molecule:0.5", "--failure-seed", "3", home=toolpath_home)
    assert sometimes.returncode == 0, sometimes.stdout + sometimes.stderr
    assert "Injecting failures into: chemistry.parse_molecule (p=0.5, seed 3)" in sometimes.stdout
    assert "retrying chemistry.parse_molecule (try 2 of 3) after InjectedFailure: failure injected into chemistry.parse_molecule" in sometimes.stdout
    assert "Injected failures: chemistry.parse_molecule 1 time" in sometimes.stdout and "'lipinski'" in sometimes.stdout

    always = toolpath_run("--inject-failure", "parse_molecule", "--json", home=toolpath_home)
    assert always.returncode == 1
    run = json.loads(always.stdout)
    assert run["inject_failures"] == [{"tool": "chemistry.parse_molecule", "probability": 1.0, "on_calls": [], "seed": 0}]
    assert run["result"]["injected_failures"] == {"chemistry.parse_molecule": 3} and run["result"]["retries"] == {"chemistry.parse_molecule": 2}
    assert run["result"]["error"]["ename"] == "InjectedFailure" and "failed on each of its 3 tries" in run["result"]["error"]["traceback"]
    assert run["failed_step"] == {"index": 0, "tool": "parse_molecule"}


def test_toolpath_run_refuses_an_unknown_tool_to_inject_failures_into(toolpath_home):
    refused = toolpath_run("--inject-failure", "chemistry.parse_molecul", home=toolpath_home)
    assert refused.returncode == 2
    assert (
        "--inject-failure chemistry.parse_molecul: no loaded catalog or toolkit has a tool 'chemistry.parse_molecul'; did you mean 'chemistry.parse_molecule'?"
        in refused.stderr
    )
    assert "Running" not in refused.stdout


@pytest.mark.parametrize(
    "policy",
    [RetryPolicy(attempts=3), RetryPolicy(attempts=4, backoff=1.5, max_backoff=6, on=["status 503", "ValueError"]), RetryPolicy(attempts=1, on=["timeout"])],
)
def test_the_kernel_reads_a_policy_as_written_however_short_its_spec(policy):
    spec = RetrySpec.of(policy.to_spec())
    assert (spec.attempts, spec.backoff, spec.max_backoff, spec.on) == (policy.attempts, policy.backoff, policy.max_backoff, policy.on)


def test_a_message_naming_a_class_is_read_as_a_crossed_exception_only_as_the_bridge_writes_one():
    from toolpath.registry.retry_conditions import crossed_name, matches

    # How the bridge gives back a host tool's MCPConnectionError (a RuntimeError the kernel cannot rebuild).
    assert crossed_name("RuntimeError", "MCPConnectionError: the server 'films' could not be started") == "MCPConnectionError"
    assert matches(["connection"], RuntimeError("MCPConnectionError: the server 'films' could not be started")) == "connection"
    # A bad input whose message happens to start with a built-in's name is the tool's own words.
    assert crossed_name("ValueError", "ConnectionError: not a SMILES string") is None
    assert matches(["connection", "timeout"], ValueError("TimeoutError: not a SMILES string")) == ""
    # An exception of the tool's own class is what it is, whatever its message says.
    assert crossed_name("ParseFailure", "MCPConnectionError: x") is None
