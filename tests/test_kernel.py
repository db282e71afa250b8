"""IPythonKernel against real ipykernel processes."""

import asyncio
import os
import time

import pytest

from toolpath.kernel import IPythonKernel, KernelError

pytestmark = pytest.mark.integration


def run(coroutine):
    return asyncio.run(coroutine)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cell_outputs_errors_and_persistence():
    async def scenario():
        async with IPythonKernel() as session:
            first = await session.execute("x = 20\nprint('hello')\nx + 1")
            second = await session.execute("import sys\nprint('warn', file=sys.stderr)\nx / 0")
            third = await session.execute("x * 2")
            return first, second, third

    first, second, third = run(scenario())
    assert (first.status, first.stdout, first.result) == ("ok", "hello\n", "21")
    assert second.status == "error" and second.stderr == "warn\n"
    assert second.error["ename"] == "ZeroDivisionError"
    assert "x / 0" in second.error["traceback"] and "\x1b[" not in second.error["traceback"]
    assert third.result == "40"


def test_input_is_refused_instead_of_hanging():
    async def scenario():
        async with IPythonKernel() as session:
            return await session.execute("input('name? ')", timeout=30)

    result = run(scenario())
    assert result.status == "error" and result.error["ename"] == "StdinNotImplementedError"


def test_timeout_interrupts_the_cell_and_the_kernel_stays_usable():
    async def scenario():
        async with IPythonKernel() as session:
            stuck = await session.execute("import time\nwhile True:\n    time.sleep(0.05)", timeout=1.0)
            after = await session.execute("'still here'")
            return stuck, after

    stuck, after = run(scenario())
    assert stuck.status == "timeout" and "KeyboardInterrupt" in stuck.error["traceback"]
    assert after.result == "'still here'"


def test_a_cell_whose_caller_is_gone_is_interrupted_not_left_running():
    async def scenario():
        async with IPythonKernel() as session:
            long_cell = asyncio.create_task(
                session.execute(
                    "import time\nstarted = time.monotonic()\ntry:\n    time.sleep(60)\nfinally:\n    ran_for = time.monotonic() - started", timeout=120
                )
            )
            await asyncio.sleep(3)  # the cell is sleeping
            long_cell.cancel()  # e.g. the MCP client that asked for it disconnected
            with pytest.raises(asyncio.CancelledError):
                await long_cell
            return await session.execute("ran_for", timeout=120)

    after = run(scenario())
    assert after.status == "ok" and float(after.result) < 30


def test_cells_executed_at_once_run_one_after_another_each_with_its_own_result():
    async def scenario():
        async with IPythonKernel() as session:
            failing = asyncio.create_task(session.execute("import time\ntime.sleep(1)\n1/0", timeout=60))
            await asyncio.sleep(0.3)  # the failing cell is running
            # Reading the kernel's channels at once, one of them could wait forever for a message another took.
            queued = await asyncio.wait_for(asyncio.gather(*(session.execute(f"{number} * 2", timeout=60) for number in range(3))), 120)
            return await failing, queued

    failing, queued = run(scenario())
    assert failing.status == "error" and failing.error["ename"] == "ZeroDivisionError"
    # Not skipped behind the failing cell (Jupyter aborts requests queued behind an error): each ran, in order.
    assert [result.result for result in queued] == ["0", "2", "4"]
    assert [result.execution_count for result in queued] == [failing.execution_count + 1, failing.execution_count + 2, failing.execution_count + 3]


def test_waiting_for_the_kernel_to_be_free_keeps_its_time_limit_while_another_cell_runs():
    async def scenario():
        async with IPythonKernel() as session:
            running = asyncio.create_task(session.execute("import time\ntime.sleep(6)", timeout=60))
            await asyncio.sleep(0.5)
            started = time.monotonic()
            free = await session.wait_until_idle(1.0)
            waited = time.monotonic() - started
            await running
            return free, waited, await session.wait_until_idle(1.0)

    free, waited, free_after = run(scenario())
    assert not free and waited < 4  # not the 5 s left of the other cell
    assert free_after


def test_a_kernel_shut_down_under_a_running_cell_ends_it_as_dead_and_refuses_the_cell_queued_behind():
    async def scenario():
        async with IPythonKernel() as session:
            running = asyncio.create_task(session.execute("import time\ntime.sleep(30)", timeout=60))
            await asyncio.sleep(0.5)
            queued = asyncio.create_task(session.execute("'never runs'", timeout=60))
            await asyncio.sleep(0.2)
            await session.shutdown()
            ended = await asyncio.wait_for(running, 20)
            with pytest.raises(KernelError, match="not running"):
                await asyncio.wait_for(queued, 20)
            return ended

    ended = run(scenario())
    assert ended.status == "dead" and ended.error["ename"] == "KernelShutDown"


def test_dead_kernel_is_reported():
    async def scenario():
        async with IPythonKernel() as session:
            return await session.execute("import os\nos._exit(3)", timeout=30)

    result = run(scenario())
    assert result.status == "dead" and "variables are gone" in result.error["evalue"]


def test_kernel_process_is_gone_after_the_session():
    async def scenario():
        async with IPythonKernel() as session:
            result = await session.execute("import os\nos.getpid()")
            return int(result.result)

    pid = run(scenario())
    assert not pid_alive(pid)


def test_tool_handles_are_awaitable_with_real_signature_and_docstring():
    code = (
        "from toolpath.kernel.inside.handles import bind_module_tools\n"
        "chemistry = bind_module_tools('chemistry', {'parse_molecule': ('parse_molecule', 'toolpath.catalogs.chemistry.parse_molecule')})\n"
        "import inspect\n"
        "molecule = await chemistry.parse_molecule(smiles='CCO')\n"
        "(str(inspect.signature(chemistry.parse_molecule, eval_str=True)), 'SMILES' in chemistry.parse_molecule.__doc__, molecule['formula'], dir(chemistry))"
    )

    async def scenario():
        async with IPythonKernel() as session:
            bound = await session.execute(code)
            missing = await session.execute("chemistry.cluster_molecules")
            return bound, missing

    bound, missing = run(scenario())
    assert bound.result == "('(smiles: str) -> dict', True, 'C2H6O', ['parse_molecule'])"
    assert missing.status == "error" and "bound tools: parse_molecule" in missing.error["evalue"]


SLOW_TOOLS = '''
import asyncio
import time


def nap(seconds: float) -> float:
    """Sleep in plain Python (a blocking tool)."""
    time.sleep(seconds)
    return seconds


async def wait(seconds: float) -> float:
    """Sleep on the event loop (an async tool)."""
    await asyncio.sleep(seconds)
    return seconds
'''

BIND_SLOW_TOOLS = "from toolpath.kernel.inside.handles import bind_module_tools\nslow = bind_module_tools('slow', {'nap': ('nap', 'slow_tools'), 'wait': ('wait', 'slow_tools')})\n"


@pytest.mark.parametrize("call", ["await slow.nap(seconds=60)", "await slow.wait(seconds=60)"])
def test_timeout_interrupts_a_tool_call_inside_an_async_cell(tmp_path, call):
    (tmp_path / "slow_tools.py").write_text(SLOW_TOOLS)

    async def scenario():
        async with IPythonKernel(cwd=str(tmp_path)) as session:
            started = asyncio.get_running_loop().time()
            result = await session.execute(BIND_SLOW_TOOLS + call, timeout=1.0)
            elapsed = asyncio.get_running_loop().time() - started
            after = await session.execute("await slow.nap(seconds=0)")
            return result, elapsed, after

    result, elapsed, after = run(scenario())
    assert result.status == "timeout" and "was interrupted" in result.error["evalue"]
    assert "KeyboardInterrupt" in result.error["traceback"]
    assert elapsed < 8, "the interrupt did not stop the tool; the cell waited for the grace period"
    assert after.status == "ok" and after.result == "0"


def test_a_cell_that_prints_continuously_still_times_out():
    async def scenario():
        async with IPythonKernel() as session:
            return await session.execute("import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.05)", timeout=1.0)

    result = run(scenario())
    assert result.status == "timeout" and "tick" in result.stdout


def test_timeout_must_be_positive():
    async def scenario():
        async with IPythonKernel() as session:
            await session.execute("1", timeout=0)

    with pytest.raises(ValueError, match="positive"):
        run(scenario())


def test_timeout_interrupts_an_async_tool_that_blocks_and_a_slow_import(tmp_path):
    (tmp_path / "blocking_tools.py").write_text("import time\n\nasync def block(seconds):\n    time.sleep(seconds)\n")
    (tmp_path / "slow_import.py").write_text("import time\ntime.sleep(60)\n\ndef never():\n    pass\n")
    bind = "from toolpath.kernel.inside.handles import bind_module_tools\nb = bind_module_tools('b', {'block': ('block', 'blocking_tools'), 'never': ('never', 'slow_import')})\n"

    async def scenario():
        async with IPythonKernel(cwd=str(tmp_path)) as session:
            outcomes = []
            for call in ("await b.block(60)", "await b.never()"):
                started = asyncio.get_running_loop().time()
                result = await session.execute(bind + call, timeout=1.0)
                outcomes.append((result.status, asyncio.get_running_loop().time() - started))
            return outcomes

    for status, elapsed in run(scenario()):
        assert status == "timeout" and elapsed < 8


def test_local_and_gateway_transports_implement_the_whole_kernel_transport_protocol_with_its_signatures():
    import inspect

    from toolpath.kernel.kernels.gateway import GatewayTransport
    from toolpath.kernel.kernels.managed_transport import ManagedTransport
    from toolpath.kernel.kernels.transport import KernelTransport

    members = [name for name, value in vars(KernelTransport).items() if inspect.isfunction(value) and not name.startswith("_")]
    assert {"start", "execute", "interrupt", "is_alive", "shutdown", "log_tail"} <= set(members)
    for transport in (ManagedTransport, GatewayTransport):
        assert isinstance(transport.remote, property | bool), transport
        for name in members:
            expected, actual = getattr(KernelTransport, name), getattr(transport, name)
            assert inspect.signature(actual) == inspect.signature(expected), f"{transport.__name__}.{name}"
            assert inspect.iscoroutinefunction(actual) == inspect.iscoroutinefunction(expected), f"{transport.__name__}.{name}"
