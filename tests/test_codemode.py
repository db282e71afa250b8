"""CodeMode against real kernels: sessions, limits, failure modes, eviction, concurrency."""

import asyncio
import base64
import os
import struct
import sys
import time
import zlib

import psutil
import pytest

from toolpath.kernel import CodeMode, KernelError

pytestmark = pytest.mark.integration


def png(width=1, height=1):
    """A valid PNG, built by hand so the kernel needs no imaging library."""

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    )


def kernel_pids():
    """The ipykernel processes this process started (tests running in parallel start their own)."""
    pids = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if b"ipykernel_launcher" not in handle.read():
                    continue
            with open(f"/proc/{pid}/stat", "rb") as handle:
                parent = int(handle.read().rsplit(b")", 1)[1].split()[1])  # after the command name, which may hold spaces
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid():
            pids.add(int(pid))
    return pids


@pytest.fixture(scope="module")
def code_mode(kernel_place):
    """One CodeMode per place kernels run (this machine, a Kernel Gateway), with a warm pool."""
    with CodeMode(timeout=4, interrupt_grace=2, busy_wait=0.5, max_output_chars=2000, pool_size=1, **kernel_place) as shared:
        yield shared


def test_state_persists_within_a_session_and_not_across(code_mode):
    assert code_mode.run("secret = 42", "alice").status == "ok"
    assert code_mode.run("secret + 1", "alice").result == "43"
    other = code_mode.run("secret", "bob")
    assert other.status == "error" and other.error["ename"] == "NameError"
    assert "secret" in code_mode.variables("alice") and code_mode.value("secret", "alice") == 42


def test_a_plain_json_value_comes_back_as_json_beside_its_repr(code_mode):
    value = code_mode.run('{"weights": [180.16, 46.07], "name": "aspirin", "passes": True, "note": None}', "json")
    assert value.value == {"weights": [180.16, 46.07], "name": "aspirin", "passes": True, "note": None}
    assert value.result.startswith("{'weights'") and value.to_dict()["result"] == value.value and value.to_dict()["result_is_json"]
    for not_json in ("{1, 2}", "float('nan')", "object()"):
        other = code_mode.run(not_json, "json")
        assert other.result_json is None and other.result is not None, not_json
        assert other.to_dict()["result"] == other.result and not other.to_dict()["result_is_json"]
    huge = code_mode.run("list(range(100_000))", "json")
    assert huge.result_json is None and "result" in huge.truncated


def test_exceptions_return_their_traceback(code_mode):
    result = code_mode.run("def fail():\n    raise ValueError('bad input')\nfail()", "errors")
    assert result.status == "error" and result.error["ename"] == "ValueError"
    assert "fail()" in result.error["traceback"] and "bad input" in result.error["traceback"]
    assert "ValueError: bad input" in code_mode.execute("fail()", "errors")


def test_a_2mb_exception_message_is_capped(code_mode):
    result = code_mode.run("raise RuntimeError('x' * 2_000_000)", "big-error")
    assert len(result.error["traceback"]) < 2100 and len(result.error["evalue"]) < 2100
    assert {"traceback", "evalue"} <= set(result.truncated)
    assert "characters truncated" in result.error["traceback"]


def test_huge_stdout_keeps_head_and_tail(code_mode):
    result = code_mode.run("print('\\n'.join(f'line {i}' for i in range(200_000)))", "chatty")
    assert result.stdout.startswith("line 0\nline 1\n") and result.stdout.rstrip().endswith("line 199999")
    assert "characters truncated" in result.stdout and len(result.stdout) < 2100
    assert result.truncated == ("stdout",)
    assert "[output truncated: stdout]" in code_mode.execute("print('short')\nprint('x' * 5000)", "chatty")


def test_nine_images_with_a_cap_of_eight(code_mode):
    encoded = base64.b64encode(png()).decode()
    code = f"import base64\nfrom IPython.display import Image, display\nfor _ in range(9):\n    display(Image(data=base64.b64decode({encoded!r})))"
    result = code_mode.run(code, "images")
    assert len(result.images) == 8 and result.images[0] == png()
    assert result.dropped_images == ("image 9: over the limit of 8 images per cell",)


def test_timeout_interrupts_a_busy_loop(code_mode):
    started = time.monotonic()
    result = code_mode.run("while True:\n    pass", "loop")
    assert result.status == "timeout" and time.monotonic() - started < 8
    assert code_mode.run("'alive'", "loop").result == "'alive'"


def test_input_is_refused(code_mode):
    result = code_mode.run("input('name? ')", "stdin")
    assert result.status == "error" and "StdinNotImplementedError" in result.error["ename"]


def test_a_kernel_that_ignores_sigint_is_aborted_then_busy_then_restarted(kernel_place):
    ignore = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)"
    with CodeMode(timeout=1, interrupt_grace=0.5, busy_wait=0.5, pool_size=0, **kernel_place) as waiting:
        assert waiting.run(ignore, "s").status == "aborted"
        busy = waiting.run("1", "s")
        assert busy.status == "busy" and "retry" in busy.error["evalue"] and "restart" in busy.error["evalue"]
        waiting.restart("s")
        after = waiting.run("1 + 1", "s")
        assert after.result == "2" and "restarted" in after.notice


def test_a_cell_that_ignores_its_interrupt_has_its_kernel_stopped_at_once_and_the_snapshot_comes_back(tmp_path):
    ignore = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    options = {"timeout": 1, "interrupt_grace": 0.5, "pool_size": 0, "snapshot_debounce": 0.1, "snapshot_store": tmp_path / "toolpath.db"}
    with CodeMode(on_busy_kernel="restart", **options) as restarting:
        pid = restarting.run("import os\nkept = 'from before'\nos.getpid()", "s").result
        time.sleep(1.0)  # its snapshot is written
        kernel = psutil.Process(int(pid))
        aborted = restarting.run(ignore, "s")
        assert aborted.status == "aborted" and "its kernel was stopped" in aborted.notice and "kernel was stopped" in aborted.error["evalue"]
        # Stopped now: nothing spins on until the next cell.
        assert not kernel.is_running() or kernel.status() == psutil.STATUS_ZOMBIE
        rerun = restarting.run("kept", "s")
        assert rerun.result == "'from before'" and "Restored 2 variable(s)" in rerun.notice and ": kept, os." in rerun.notice


def test_a_dead_kernel_is_reported_and_replaced(code_mode):
    code_mode.run("value = 1", "mortal")
    dead = code_mode.run("import os\nos._exit(1)", "mortal")
    assert dead.status == "dead" and "variables are gone" in dead.error["evalue"]
    fresh = code_mode.run("'value' in globals()", "mortal")
    assert fresh.result == "False" and "fresh kernel" in fresh.notice


def test_shell_on_and_off(tmp_path):
    with CodeMode(pool_size=0, timeout=10) as shell_on:
        assert shell_on.run("%%bash\necho from-bash", "s").stdout == "from-bash\n"
        assert "%%bash" in shell_on.instructions()
    with CodeMode(pool_size=0, timeout=10, allow_shell=False) as shell_off:
        refused = shell_off.run("%%bash\necho from-bash", "s")
        assert refused.status == "error" and "disabled" in refused.error["evalue"] and refused.stdout == ""
        escaped = shell_off.run("!echo hi", "s")
        assert escaped.status == "error" and "disabled" in escaped.error["evalue"]
        assert "disabled" in shell_off.instructions()


def test_cwd_env_python_and_startup_code(tmp_path):
    options = {
        "cwd": str(tmp_path),
        "env": {"TOOLPATH_TEST_FLAG": "on"},
        "python": sys.executable,
        "startup_code": "prepared = 'yes'",
        "pool_size": 0,
        "timeout": 10,
    }
    with CodeMode(**options) as configured:
        result = configured.run("import os, sys\n(os.getcwd(), os.environ['TOOLPATH_TEST_FLAG'], sys.executable, prepared)", "s")
        assert eval(result.result) == (str(tmp_path), "on", sys.executable, "yes")
    with CodeMode(startup_code="1/0", pool_size=0, timeout=10) as broken:
        with pytest.raises(Exception, match="startup_code failed"):
            broken.run("1", "s")


def test_idle_sessions_are_evicted():
    with CodeMode(idle_ttl=0.5, pool_size=0, timeout=10, snapshot=False) as short_lived:
        short_lived.run("x = 1", "s")
        assert short_lived.sessions() == ["s"]
        time.sleep(1.5)
        assert short_lived.sessions() == []
        fresh = short_lived.run("'x' in globals()", "s")
        assert fresh.result == "False" and "without use" in fresh.notice and "Earlier variables are gone." in fresh.notice


def test_least_recently_used_idle_session_is_evicted():
    with CodeMode(max_kernels=2, pool_size=0, timeout=10) as capped:
        capped.run("a = 1", "first")
        capped.run("b = 1", "second")
        capped.run("a", "first")  # "second" is now the least recently used
        capped.run("c = 1", "third")
        assert capped.sessions() == ["first", "third"]
        assert "max_kernels=2" in capped.run("1", "second").notice


def test_a_user_over_their_kernel_cap_evicts_their_own_idle_session_not_anothers():
    with CodeMode(max_kernels_per_user=1, pool_size=0, timeout=10) as capped:
        capped.run("theirs = 1", "bob-lab", user_id="bob")  # the least recently used of all
        capped.run("x = 41", "alice-1", user_id="alice")
        capped.run("y = 1", "alice-2", user_id="alice")
        assert sorted(capped.sessions()) == ["alice-2", "bob-lab"]
        back = capped.run("x + 1", "alice-1", user_id="alice")  # evicted with a snapshot: x comes back
        assert back.result == "42" and "max_kernels_per_user=1" in back.notice
        assert capped.run("theirs", "bob-lab", user_id="bob").notice == ""


def test_when_every_kernel_under_a_cap_is_busy_the_error_names_that_cap_and_how_to_raise_it():
    async def scenario(options, first, second):
        async with CodeMode(pool_size=0, timeout=20, busy_wait=0.5, snapshot=False, **options) as capped:
            busy = asyncio.ensure_future(capped.arun("import time\ntime.sleep(6)", "busy", user_id=first))
            while "busy" not in capped.sessions() or capped.kernel_id("busy") is None:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # the sleeping cell has started
            try:
                await capped.arun("1", "joining", user_id=second)
            finally:
                await capped.arestart("busy", user_id=first)  # stops the sleeping cell
                await busy

    with pytest.raises(KernelError) as per_user:
        asyncio.run(scenario({"max_kernels_per_user": 1}, "alice", "alice"))
    assert "max_kernels_per_user=1 (the cap on one user's kernels)" in str(per_user.value)
    assert "CodeMode(max_kernels_per_user=N), toolpath serve --max-kernels-per-user N" in str(per_user.value)
    with pytest.raises(KernelError) as total:
        asyncio.run(scenario({"max_kernels": 1, "max_kernels_per_user": 4}, "alice", "bob"))
    assert "max_kernels=1 (the cap on all users' kernels together)" in str(total.value)
    assert "CodeMode(max_kernels=N), toolpath serve --max-kernels N" in str(total.value)


def test_concurrent_sessions_never_lose_or_cross_output():
    async def scenario():
        async with CodeMode(pool_size=2, timeout=30) as shared:

            async def session(number):
                outputs = []
                for cell in range(50):
                    result = await shared.arun(f"print('s{number}-c{cell}')", f"session-{number}")
                    outputs.append(result.stdout)
                return outputs

            return await asyncio.gather(*(session(number) for number in range(8)))

    results = asyncio.run(scenario())
    for number, outputs in enumerate(results):
        assert outputs == [f"s{number}-c{cell}\n" for cell in range(50)]


def test_no_kernel_is_left_after_shutdown():
    before = kernel_pids()
    code_mode = CodeMode(pool_size=2, timeout=10)
    code_mode.run("1", "a")
    code_mode.run("1", "b")
    assert len(kernel_pids() - before) >= 2
    code_mode.shutdown()
    deadline = time.monotonic() + 10
    while kernel_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not kernel_pids() - before
    with pytest.raises(Exception, match="shut down"):
        code_mode.run("1", "a")


def test_sync_methods_work_inside_a_running_event_loop():
    async def scenario():
        with CodeMode(pool_size=0, timeout=10) as inner:
            return inner.run("21 * 2", "s").result

    assert asyncio.run(scenario()) == "42"


def test_registry_tools_are_bound_as_handles_and_listed_in_the_instructions(chemistry):
    tools = [chemistry.registry.get_tool_by_name(name) for name in ("parse_molecule", "compute_descriptors")]
    with CodeMode(tools, pool_size=0, timeout=30) as with_tools:
        instructions = with_tools.instructions()
        assert "chemistry.parse_molecule(smiles: str) -> dict" in instructions
        assert "chemistry.compute_descriptors(molecule: dict) -> dict" in instructions
        result = with_tools.run(
            "descriptors = await chemistry.compute_descriptors(molecule=await chemistry.parse_molecule(smiles='CCO'))\ndescriptors['molecular_weight']", "s"
        )
        assert result.result == "46.07"
        assert with_tools.run("sorted(dir(chemistry))", "s").result == "['compute_descriptors', 'parse_molecule']"
    with pytest.raises(ValueError, match="register them"):
        CodeMode([tools[0].model_copy(update={"id": None})], pool_size=0)


def test_a_deleted_handle_is_bound_again_and_a_reassigned_one_says_how(chemistry):
    def stock_level(sku: str) -> int:
        return len(sku)

    tools = [chemistry.registry.get_tool_by_name("parse_molecule"), stock_level]
    with CodeMode(tools, pool_size=0, timeout=30) as code_mode:
        assert code_mode.run("kept = 'state'", "handles").status == "ok"
        same_cell = code_mode.run("del tools\nawait tools.stock_level('abc')", "handles")
        assert same_cell.error["ename"] == "NameError"
        assert "toolpath tool handle that was deleted; it is bound again from the next cell on" in same_cell.error["evalue"]
        assert code_mode.run("await tools.stock_level('abc')", "handles").result == "3"
        code_mode.run("del chemistry", "handles")
        assert code_mode.run("(await chemistry.parse_molecule(smiles='CCO'))['formula']", "handles").result == "'C2H6O'"
        code_mode.run("tools = None", "handles")
        shadowed = code_mode.run("await tools.stock_level('abc')", "handles")
        assert shadowed.error["ename"] == "AttributeError" and "run `del tools`" in shadowed.error["evalue"]
        assert code_mode.run("tools is None", "handles").result == "True"  # a deliberate assignment is not undone
        code_mode.run("del tools", "handles")
        assert code_mode.run("(await tools.stock_level('ab'), kept)", "handles").result == "(2, 'state')"
        unrelated = code_mode.run("(1).foo", "handles")
        assert unrelated.error["ename"] == "AttributeError" and "Note" not in unrelated.error["evalue"]
        code_mode.run("tools = None", "handles")
        other_none = code_mode.run("y = None\ny.foo", "handles")  # None is shared: no false hint
        assert other_none.error["ename"] == "AttributeError" and "Note" not in other_none.error["evalue"]


def test_closed_output_streams_are_reopened_with_a_note(code_mode):
    closed = code_mode.run("import sys\nsys.stdout.close()", "streams")
    assert "sys.stdout had been closed or replaced by something that is not a stream; reopened" in closed.stderr
    assert code_mode.run("print('after')", "streams").stdout == "after\n"
    code_mode.run("import sys\nsys.stderr = None", "streams")
    assert code_mode.run("import sys\nprint('warning', file=sys.stderr)", "streams").stderr == "warning\n"
    # A cell that breaks its own streams and raises is still reported as failed, and later cells work.
    lost = code_mode.run("import sys\nsys.stdout = None\nsys.stderr = None\nraise ValueError('kept')", "streams")
    assert lost.status == "error"  # reported as failed, not ok (the ValueError itself cannot be shown without streams)
    assert code_mode.run("import sys\nsys.stdout = 5", "streams").status == "ok"  # not a stream: replaced, no wedged kernel
    assert code_mode.run("print('fine')", "streams").stdout == "fine\n"
    code_mode.run("import threading, time, sys\nthreading.Thread(target=lambda: (time.sleep(0.3), sys.stdout.close())).start()", "streams")
    time.sleep(0.8)
    assert code_mode.run("print('after the thread')", "streams").stdout == "after the thread\n"
    missing = code_mode.run("del undefined_thing", "streams")
    assert missing.error["ename"] == "NameError"


def test_kernel_directories_of_a_killed_host_are_removed_on_the_next_start(tmp_path):
    import signal
    import subprocess

    host_code = "import asyncio\nfrom toolpath.kernel import IPythonKernel\nasync def main():\n    async with IPythonKernel() as session:\n        print(session.directory, flush=True)\n        await asyncio.sleep(600)\nasyncio.run(main())"
    environment = {**os.environ, "TMPDIR": str(tmp_path)}
    killed = subprocess.Popen([sys.executable, "-c", host_code], stdout=subprocess.PIPE, text=True, env=environment)
    survivor = None
    try:
        stale = killed.stdout.readline().strip()
        assert os.path.isfile(os.path.join(stale, "connection.json"))  # it holds the kernel's key
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert os.path.isdir(stale)  # SIGKILL gives the host no chance to clean up
        survivor = subprocess.Popen([sys.executable, "-c", host_code], stdout=subprocess.PIPE, text=True, env=environment)
        live = survivor.stdout.readline().strip()
        # The next host's first kernel removed the dead host's directory, and a third start leaves
        # the live host's alone.
        assert not os.path.exists(stale)
        from toolpath.kernel.kernels.private_directories import remove_stale_directories

        assert remove_stale_directories(str(tmp_path)) == [] and os.path.isdir(live)
    finally:
        for process in (killed, survivor):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait()


def test_a_cell_reports_which_tool_calls_returned_even_when_it_fails(chemistry):
    def fails(reason: str) -> None:
        raise ValueError(reason)

    async def slow(seconds: float) -> float:
        await asyncio.sleep(seconds)
        return seconds

    tools = [chemistry.registry.get_tool_by_name("parse_molecule"), fails, slow]
    with CodeMode(tools, pool_size=0, timeout=30) as code_mode:
        failed = code_mode.run(
            "a = await chemistry.parse_molecule(smiles='CCO')\nb = await chemistry.parse_molecule(smiles='CCC')\nawait tools.fails('third call')", "calls"
        )
        assert failed.status == "error"
        assert failed.tool_calls == {"chemistry.parse_molecule": 2}
        assert failed.to_dict()["tool_calls"] == {"chemistry.parse_molecule": 2}
        # A call a cell leaves running in the background belongs to that cell, not to the one
        # during which it happens to return.
        started = code_mode.run("import asyncio\nbackground = asyncio.ensure_future(tools.slow(0.5))", "calls")
        assert started.tool_calls == {}
        later = code_mode.run("await asyncio.sleep(1)\nbackground.done()", "calls")
        assert later.result == "True" and later.tool_calls == {}
        assert code_mode.run("await tools.slow(0)", "calls").tool_calls == {"tools.slow": 1}


def test_tools_bound_for_one_session_stay_in_it_across_restarts_and_evictions(chemistry):
    registry = list(chemistry.registry)
    parse, descriptors = (chemistry.registry.get_tool_by_name(name) for name in ("parse_molecule", "compute_descriptors"))
    with CodeMode(pool_size=0, timeout=30, max_kernels=1) as code_mode:
        bindings = code_mode.bind("mine", [parse], universe=registry)
        assert bindings.targets == {parse.id: "chemistry.parse_molecule"}
        assert "chemistry.parse_molecule(smiles: str) -> dict" in code_mode.instructions("mine")
        assert "chemistry" not in code_mode.instructions()
        assert code_mode.run("(await chemistry.parse_molecule(smiles='CCO'))['formula']", "mine").result == "'C2H6O'"
        first_kernel = code_mode.kernel_id("mine")
        assert first_kernel is not None and code_mode.kernel_id("other") is None

        code_mode.bind("mine", [descriptors], universe=registry)  # names stay; the new tool joins the handle
        assert code_mode.run("sorted(dir(chemistry))", "mine").result == "['compute_descriptors', 'parse_molecule']"
        assert code_mode.run("'chemistry' in globals()", "other").result == "False"  # evicts "mine" (max_kernels=1)

        after_eviction = code_mode.run("sorted(dir(chemistry))", "mine")
        assert "max_kernels=1" in after_eviction.notice and after_eviction.result == "['compute_descriptors', 'parse_molecule']"
        assert code_mode.kernel_id("mine") not in (None, first_kernel)
        code_mode.restart("mine")
        assert code_mode.kernel_id("mine") is None
        assert code_mode.run("(await chemistry.parse_molecule(smiles='CCO'))['formula']", "mine").result == "'C2H6O'"

        code_mode.end_session("mine")
        assert code_mode.sessions() == []  # "other" was evicted when "mine" came back
        assert code_mode.run("'chemistry' in globals()", "mine").result == "False"
        with pytest.raises(ValueError, match="register them"):
            code_mode.bind("mine", [parse.model_copy(update={"id": None})])


def test_model_tool_schemas_declare_execute_and_restart_for_both_apis():
    import jsonschema

    with CodeMode(pool_size=0, snapshot=False) as code_mode:
        openai = code_mode.model_tool_schemas("openai")
        anthropic = code_mode.model_tool_schemas("anthropic")
        assert [tool["function"]["name"] for tool in openai] == [tool["name"] for tool in anthropic] == ["execute", "restart"]
        for function, tool in zip((tool["function"] for tool in openai), anthropic):
            assert openai[0]["type"] == "function" and function["parameters"] == tool["input_schema"]
            jsonschema.Draft202012Validator.check_schema(tool["input_schema"])
        execute = jsonschema.Draft202012Validator(anthropic[0]["input_schema"])
        assert execute.is_valid({"code": "1 + 1"}) and not execute.is_valid({}) and not execute.is_valid({"code": "1", "session_id": "x"})
        with pytest.raises(ValueError, match="openai"):
            code_mode.model_tool_schemas("gemini")
    with CodeMode(pool_size=0, snapshot=False, allow_restart=False) as no_restart:
        assert [tool["name"] for tool in no_restart.model_tool_schemas("anthropic")] == ["execute"]


def test_variables_and_values_are_read_even_when_a_cell_redirected_stdout():
    with CodeMode(pool_size=0, snapshot=False) as code_mode:
        code_mode.run("import io, sys\nsys.stdout = io.StringIO()\nanswer = 42\nfor n in range(10_000):\n    globals()[f'v{n}'] = n", "s")
        names = code_mode.variables("s")
        assert len(names) == 10_004 and "answer" in names  # answer, io, n, sys and the v's
        assert code_mode.value("answer", "s") == 42
        with pytest.raises(KeyError):
            code_mode.value("missing", "s")


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"timeout": float("inf")}, ValueError, "timeout must be a positive, finite number of seconds"),
        ({"timeout": "5"}, TypeError, "timeout must be a number of seconds"),
        ({"busy_wait": float("nan")}, ValueError, "busy_wait must be a non-negative, finite number"),
        ({"pool_size": 1.5}, TypeError, "pool_size must be a whole number"),
        ({"max_output_chars": -5}, ValueError, "max_output_chars must be at least 0"),
        ({"max_kernels": 0}, ValueError, r"max_kernels must be at least 1 \(or None\)"),
        ({"allow_shell": "no"}, TypeError, "allow_shell must be True or False"),
        ({"env": {"THREADS": 4}}, TypeError, "env values and names must be strings.*'THREADS': 4"),
        ({"cwd": "/nonexistent/toolpath"}, ValueError, "cwd '/nonexistent/toolpath' is not a directory"),
    ],
)
def test_an_option_that_cannot_work_is_refused_by_name_before_any_kernel_starts(options, error, message):
    before = kernel_pids()
    with pytest.raises(error, match=message):
        CodeMode(**options)
    assert kernel_pids() <= before


def test_code_and_ids_that_cannot_work_are_refused_before_a_kernel_starts_for_them():
    with CodeMode(pool_size=0, snapshot=False) as code_mode:
        with pytest.raises(TypeError, match="a cell's code must be a str"):
            code_mode.run(b"1 + 1", "fresh")
        with pytest.raises(ValueError, match="lone surrogate at position 1"):
            code_mode.run("'\ud800'", "fresh")
        assert code_mode.sessions() == []
        for call in (lambda: code_mode.restart(" "), lambda: code_mode.value("x", ""), lambda: code_mode.variables("s", user_id="")):
            with pytest.raises(ValueError, match="must be a non-blank string"):
                call()
        assert "had no kernel" in code_mode.restart("never-used")
        assert code_mode.run("x = 1", "used").status == "ok"
        assert code_mode.restart("used") == "The kernel was restarted; all variables are gone."
