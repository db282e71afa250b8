"""Attacks from inside a cell, against plain local kernels and sandboxed ones (issue 31).

Each attack is run twice, through a real CodeMode: against plain local kernels, where it must
succeed (so the test is known to bite), and against kernels in :mod:`toolpath.kernel.sandbox.provisioner`, where it
must fail. Skipped, with the reason, where bubblewrap cannot run (no user namespaces).
"""

import json
import os
import socket
import sys
import threading

import pytest
from conftest import wait_until_stored

from toolpath.kernel import CodeMode
from toolpath.kernel.sandbox.cgroup import control_group_problem
from toolpath.kernel.sandbox.provisioner import SandboxPolicy, bwrap_path, sandbox_problem

pytestmark = pytest.mark.integration

SECRET = "BOB-PRIVATE-7"
POLICY = SandboxPolicy(memory_bytes=256 * 2**20, disk_bytes=16 * 2**20)


SANDBOX_PROBLEM = sandbox_problem()
CONTROL_GROUP_PROBLEM = control_group_problem()


@pytest.fixture(params=["plain", "sandboxed"])
def placement(request, tmp_path, monkeypatch):
    """``(name, CodeMode)``: kernels on this machine, plain or sandboxed, with a store in ``tmp_path``
    and a secret in this process's environment."""
    if request.param == "sandboxed" and SANDBOX_PROBLEM:
        pytest.skip(SANDBOX_PROBLEM)
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SERVER_SECRET", SECRET)

    def echo(value):
        return repr(value)

    with CodeMode([echo], pool_size=0, timeout=60, sandbox=POLICY if request.param == "sandboxed" else None) as code_mode:
        yield request.param, code_mode


def _attack(code_mode, cell):
    """The attack cell's value (its ``Out`` text), or its error name when it raised."""
    result = code_mode.run(cell, "alice")
    return result.result if result.status == "ok" else result.error["ename"]


def test_a_cell_cannot_read_the_servers_tokens_file(placement, tmp_path):
    name, code_mode = placement
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"a-long-secret-token-of-bob": "bob"}))
    read = _attack(code_mode, f"open({str(tokens)!r}).read()")
    assert ("a-long-secret-token-of-bob" in read) == (name == "plain")


def test_a_cell_cannot_read_the_store_or_another_sessions_variables(placement, tmp_path):
    name, code_mode = placement
    code_mode.run(f"note = {SECRET!r}", "bob")
    store = tmp_path / "home" / "toolpath.db"
    wait_until_stored(store, SECRET.encode())
    read = _attack(code_mode, f"open({str(store)!r}, 'rb').read().count({SECRET.encode()!r})")
    assert (read not in ("0", "FileNotFoundError", "PermissionError")) == (name == "plain")


def test_a_cell_cannot_reach_another_sessions_directory(placement):
    name, code_mode = placement
    code_mode.run("1", "bob")
    bob_directory = code_mode._engine.pool.sessions["bob"].kernel.directory
    read = _attack(code_mode, f"import os\nsorted(os.listdir({bob_directory!r}))")
    assert ("connection.json" in read) == (name == "plain")


def test_a_cell_cannot_see_the_servers_environment(placement):
    name, code_mode = placement
    read = _attack(code_mode, "import os\nos.environ.get('SERVER_SECRET')")
    assert (SECRET in str(read)) == (name == "plain")


def test_a_cell_cannot_reach_the_network(placement):
    name, code_mode = placement
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    threading.Thread(target=lambda: listener.accept()[0].close(), daemon=True).start()
    try:
        read = _attack(code_mode, f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n'connected'")
    finally:
        listener.close()
    assert (read == "'connected'") == (name == "plain")


def test_a_cell_cannot_run_code_in_the_server_through_a_pickled_argument(placement, tmp_path):
    name, code_mode = placement
    marker = tmp_path / "ran-in-the-server"
    cell = f"import os\nclass Payload:\n    def __reduce__(self):\n        return (os.mkdir, ({str(marker)!r},))\nawait tools.echo(Payload())"
    outcome = _attack(code_mode, cell)
    assert marker.exists() == (name == "plain")
    if name == "sandboxed":
        assert outcome == "BridgeError"


def test_a_cell_cannot_exhaust_memory_or_disk(placement):
    name, code_mode = placement
    memory = _attack(code_mode, "hoard = bytearray(400 * 2**20)\nlen(hoard)")
    assert (memory == "MemoryError") == (name == "sandboxed")
    code_mode.run("del hoard", "alice")
    disk = _attack(
        code_mode,
        "import os, tempfile\npath = os.path.join(tempfile.gettempdir(), 'toolpath-sandbox-test-fill')\ntry:\n    with open(path, 'wb') as file:\n        file.write(b'x' * (64 * 2**20))\nfinally:\n    if os.path.exists(path):\n        os.remove(path)\n'written'",
    )
    assert (disk == "OSError") == (name == "sandboxed")
    if name == "sandboxed":  # the result says which limit was hit, and how to live with it
        again = code_mode.run("hoard = bytearray(400 * 2**20)", "alice")
        assert "lets a kernel use 268,435,456 bytes of memory (SandboxPolicy.memory_bytes)" in again.notice


def _needs_a_control_group(name):
    if name == "sandboxed" and os.geteuid() == 0 and CONTROL_GROUP_PROBLEM:
        pytest.skip(f"RLIMIT_NPROC does not bind a kernel started by root, and no control group can be made here: {CONTROL_GROUP_PROBLEM}")


def test_a_cell_cannot_start_unbounded_processes(placement):
    name, code_mode = placement
    _needs_a_control_group(name)
    forked = _attack(
        code_mode,
        "import subprocess\nchildren = []\ntry:\n    for _ in range(400):\n        children.append(subprocess.Popen(['sleep', '30']))\nfinally:\n    for child in children:\n        child.kill()\nlen(children)",
    )
    assert (forked == "BlockingIOError" or forked == "OSError") == (name == "sandboxed")


def test_a_cell_cannot_fill_the_hosts_disk_through_its_private_directory(placement):
    # The private directory is the one place the kernel writes that the host sees; each file
    # stays under the per-file limit (16 MiB), 40 of them are far over the sandbox's memory.
    name, code_mode = placement
    if name == "sandboxed" and CONTROL_GROUP_PROBLEM:
        pytest.skip(f"without a control group, the private directory is bounded per file only: {CONTROL_GROUP_PROBLEM}")
    fill = (
        "import os\nfrom ipykernel.connect import get_connection_file\n"
        "directory = os.path.dirname(get_connection_file())\nwritten = 0\n"
        "try:\n    for index in range(40):\n        with open(os.path.join(directory, f'fill-{index}'), 'wb') as file:\n"
        "            file.write(b'x' * (15 * 2**20))\n        written += 1\n"
        "finally:\n    for index in range(40):\n        if os.path.exists(os.path.join(directory, f'fill-{index}')):\n"
        "            os.remove(os.path.join(directory, f'fill-{index}'))\nwritten"
    )
    outcome = code_mode.run(fill, "alice")
    assert (outcome.status == "ok" and outcome.result == "40") == (name == "plain"), outcome


def test_a_cell_cannot_use_more_memory_through_many_processes(placement):
    # Each child stays under the per-process limit (256 MiB); together they are far over it.
    name, code_mode = placement
    if name == "sandboxed" and CONTROL_GROUP_PROBLEM:
        pytest.skip(f"without a control group, memory is capped per process only: {CONTROL_GROUP_PROBLEM}")
    child = "import time; hoard = b'x' * (200 * 2**20); time.sleep(2)"
    outcome = code_mode.run(
        f"import subprocess, sys\nchildren = [subprocess.Popen([sys.executable, '-c', {child!r}]) for _ in range(4)]\n[child.wait() for child in children]",
        "alice",
    )
    finished = outcome.status == "ok" and outcome.result == "[0, 0, 0, 0]"
    assert finished == (name == "plain"), outcome


@pytest.mark.skipif(bool(SANDBOX_PROBLEM), reason=SANDBOX_PROBLEM or "sandboxed kernels run here")
def test_a_sandboxed_kernel_imports_a_catalogs_own_modules_and_nothing_else_beside_them(tmp_path, monkeypatch):
    from toolpath.planner import Workspace

    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "home"))
    (tmp_path / "greeting_tools").mkdir()
    (tmp_path / "greeting_tools" / "__init__.py").write_text("")
    (tmp_path / "greeting_tools" / "greet.py").write_text("def greet(name: str) -> str:\n    return f'hello {name}'\n")
    (tmp_path / "greeting_tools" / "words").mkdir()
    (tmp_path / "greeting_tools" / "words" / "greetings.txt").write_text("hello\n")  # declared package data
    (tmp_path / "tokens.json").write_text('{"a-long-secret-token-of-bob": "bob"}')  # beside the catalog
    catalog = tmp_path / "greeting_tools" / "catalog.yaml"  # inside the package, with a server's secret
    catalog.write_text(
        "domain: greeting\npackage: greeting_tools\n"
        "package_data: [words/*.txt]\n"
        "mcp_servers:\n  mail: {command: mail-server, env: {MAIL_PASSWORD: hunter2-secret}}\n"
        "states:\n  - {token: greeting.greeted, description: Someone was greeted.}\n"
        "tools:\n  - name: greet\n    description: Greet someone by name.\n    module: greeting_tools.greet\n"
        "    required_parameters: [{name: name, type: str}]\n    state_transition: {produces: [greeting.greeted]}\n"
    )
    with Workspace.open([catalog]).code_mode(sandbox=POLICY) as code_mode:
        assert code_mode.run("import greeting_tools.greet\ngreeting_tools.greet.greet('ada')", "a").result == "'hello ada'"
        assert _attack(code_mode, f"open({str(tmp_path / 'tokens.json')!r}).read()") == "FileNotFoundError"
        assert _attack(code_mode, f"open({str(catalog)!r}).read()") == "FileNotFoundError"
        assert _attack(code_mode, f"open({str(tmp_path / 'greeting_tools' / 'words' / 'greetings.txt')!r}).read()") == repr("hello\n")


@pytest.mark.skipif(bool(SANDBOX_PROBLEM), reason=SANDBOX_PROBLEM or "sandboxed kernels run here")
def test_a_sandboxed_kernel_has_no_capabilities_no_writable_kernel_settings_and_no_server_environment(tmp_path, monkeypatch):
    # Sandbox only: against a plain kernel run as root these would change the real host.
    from toolpath import kernel

    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SERVER_SECRET", SECRET)
    package = os.path.dirname(kernel.__file__)
    with CodeMode(pool_size=0, sandbox=POLICY) as code_mode:
        assert _attack(code_mode, "[line.split()[1] for line in open('/proc/self/status') if line.startswith('CapEff')]") == "['0000000000000000']"
        assert _attack(code_mode, "open('/proc/sys/kernel/core_pattern', 'w').write('x')") == "OSError"  # read-only: a write ran programs as root on the host
        # No user namespace of its own (CLONE_NEWUSER; os.unshare is Python 3.12+): unshare(2) fails.
        assert _attack(code_mode, "import ctypes\nctypes.CDLL(None, use_errno=True).unshare(0x10000000)") == "-1"
        remount = _attack(code_mode, f"import subprocess\nsubprocess.run(['mount', '-o', 'remount,rw,bind', {package!r}], capture_output=True).returncode")
        assert remount != "0"  # mount refused (or absent): the read-only binds stay read-only
        assert _attack(code_mode, f"open({os.path.join(package, 'planted.py')!r}, 'w')") == "OSError"
        # Outside its home, /tmp and /dev/shm, nothing is writable (bubblewrap's own root and /dev
        # are unsized tmpfs mounts that would take the host's memory).
        assert [_attack(code_mode, f"open({path!r}, 'w').write('x')") for path in ("/planted", "/dev/planted", "/dev/null")] == ["OSError", "OSError", "1"]
        # bubblewrap is process 1 in the sandbox: its environment is the sandbox's, not the server's,
        # and its command line names none of the host paths it mounts (they came through --args).
        assert _attack(code_mode, f"open('/proc/1/environ', 'rb').read().count({SECRET.encode()!r})") == "0"
        assert _attack(code_mode, "open('/proc/1/cmdline', 'rb').read().count(b'--ro-bind')") == "0"
        # A search path of the sandbox's own: the kernel's Python's scripts and the system's, not the server's PATH.
        assert _attack(code_mode, "import os\nos.environ['PATH']") == repr(f"{os.path.dirname(os.path.abspath(sys.executable))}:/usr/local/bin:/usr/bin:/bin")


def test_without_a_control_group_the_limits_that_do_not_bind_are_named(monkeypatch):
    from toolpath.kernel.sandbox import provisioner as sandbox

    monkeypatch.setattr(sandbox, "control_group_problem", lambda: "no writable cgroup hierarchy")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert "(no writable cgroup hierarchy): memory is capped per process" in sandbox.weaker_limits()
    assert "processes not at all (Linux exempts kernels started by root" in sandbox.weaker_limits()
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "processes per sandbox (RLIMIT_NPROC)" in sandbox.weaker_limits()
    monkeypatch.setattr(sandbox, "control_group_problem", lambda: "")
    assert sandbox.weaker_limits() == ""


def test_a_policy_is_checked_and_bubblewrap_is_found():
    with pytest.raises(ValueError, match="memory_bytes must be a positive whole number"):
        SandboxPolicy(memory_bytes=0)
    with pytest.raises(ValueError, match="disk_bytes must be a positive whole number .*always have a size"):
        SandboxPolicy(disk_bytes=None)
    if not SANDBOX_PROBLEM:
        assert os.access(bwrap_path(), os.X_OK)
    with pytest.raises(ValueError, match="not with kernel_name or gateway_url"):
        CodeMode(sandbox=SandboxPolicy(), kernel_name="python3")
