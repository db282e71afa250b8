"""Tools in code: toolkits bound as host handles in real kernels, called over the real bridge."""

from __future__ import annotations

import asyncio
import os
import stat
import threading

import pytest

from toolpath.kernel import CodeMode, Tool, Toolkit
from toolpath.registry import ToolDefinition

pytestmark = pytest.mark.integration


class Recorder:
    """What the host-side tools and hooks saw, in order."""

    def __init__(self):
        self.events: list[tuple] = []
        self.lock = threading.Lock()

    def add(self, *event):
        with self.lock:
            self.events.append(event)

    def named(self, kind):
        return [event for event in self.events if event[0] == kind]


@pytest.fixture(scope="module")
def record(kernel_place):
    """The host tools' calls, one record (and so one toolkit and its cache) per place kernels run."""
    return Recorder()


@pytest.fixture(scope="module")
def inventory(record):
    def stock_level(sku: str, warehouse: str = "main") -> int:
        """Units of `sku` in stock at `warehouse`."""
        record.add("stock_level", sku, warehouse, threading.current_thread() is threading.main_thread())
        return len(sku) * 10 + (1 if warehouse != "main" else 0)

    async def forecast(city: str, days: int = 1) -> dict:
        """The weather forecast for `city`."""
        record.add("forecast", city, id(asyncio.get_running_loop()))
        await asyncio.sleep(0)
        return {"city": city, "days": days}

    def price(sku: str) -> float:
        """The list price of `sku` (slow to compute, so cached)."""
        record.add("price", sku)
        return 9.5

    def reject(sku: str) -> None:
        raise ValueError(f"unknown sku {sku!r}")

    def delete_everything() -> None:
        """Deletes everything."""
        record.add("deleted")

    def big(size: int) -> str:
        return "x" * size

    def shape() -> tuple:
        return (1, 2)

    def unsendable():
        return lambda: None

    async def slow(seconds: float) -> str:
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            record.add("slow cancelled")
            raise
        record.add("slow finished")
        return "done"

    def middleware(name, call_next, arguments):
        record.add("sync hook", name)
        return call_next(**arguments)

    async def async_middleware(name, call_next, arguments):
        record.add("async hook", name)
        return await call_next(**arguments)

    return Toolkit(
        "inventory_tools",
        [
            stock_level,
            Tool(forecast, name="get-forecast"),
            Tool(price, cache_results=True),
            reject,
            Tool(delete_everything, requires_user_input=True),
            big,
            shape,
            unsendable,
            slow,
        ],
        hooks=[middleware, async_middleware],
        pre_hook=lambda call: record.add("pre", call.name, dict(call.arguments)),
        post_hook=lambda call, result: record.add("post", call.name),
    )


@pytest.fixture(scope="module")
def code_mode(inventory, tmp_path_factory, kernel_place):
    """Host tools called from kernels on this machine (a Unix socket), then from kernels on a Kernel
    Gateway (the TLS endpoint; pickled arguments allowed, as a host that trusts its kernels says)."""
    store = tmp_path_factory.mktemp("home") / "toolpath.db"
    with CodeMode(
        [inventory], pool_size=0, timeout=5, interrupt_grace=2, max_result_bytes=100_000, offload_results=False, accept_pickles=True, **kernel_place
    ) as shared:
        shared.store_path = store
        yield shared


def test_positional_and_keyword_calls_reach_the_host_tool(code_mode, record):
    result = code_mode.run("(await inventory.stock_level('abc'), await inventory.stock_level(sku='ab', warehouse='east'))", "calls")
    assert result.status == "ok", result.error
    assert result.result == "(30, 21)"
    calls = record.named("stock_level")
    assert ("stock_level", "abc", "main", False) in calls and ("stock_level", "ab", "east", False) in calls


def test_help_shows_the_real_signature_and_docstring(code_mode):
    shown = code_mode.run("help(inventory.stock_level)", "help").stdout
    assert "stock_level(sku: str, warehouse: str = 'main') -> int" in shown
    assert "Units of `sku` in stock" in shown
    renamed = code_mode.run("help(inventory.get_forecast)", "help").stdout
    assert "get_forecast(city: str, days: int = 1) -> dict" in renamed and "'get-forecast'" in renamed


def test_a_tool_exception_is_raised_in_the_cell_with_its_type(code_mode):
    result = code_mode.run("await inventory.reject('zz')", "raise")
    assert result.status == "error" and result.error["ename"] == "ValueError"
    assert "unknown sku 'zz'" in result.error["evalue"] and "inventory.reject" in result.error["traceback"]
    wrong = code_mode.run("await inventory.stock_level()", "raise")
    assert wrong.error["ename"] == "TypeError" and "sku" in wrong.error["evalue"]


def test_async_tools_run_on_the_callers_loop(code_mode, record):
    async def main():
        result = await code_mode.arun("await inventory.get_forecast('Oslo', days=3)", "loop")
        return result, id(asyncio.get_running_loop())

    result, caller_loop = asyncio.run(main())
    assert result.result == "{'city': 'Oslo', 'days': 3}"
    assert record.named("forecast")[-1] == ("forecast", "Oslo", caller_loop)


def test_sync_execute_from_inside_a_running_loop_does_not_deadlock(code_mode):
    async def main():
        return code_mode.run("await inventory.get_forecast('Rome')", "nested")

    assert asyncio.run(main()).result == "{'city': 'Rome', 'days': 1}"


def test_hooks_fire_once_per_call_and_see_the_real_name(code_mode, record):
    before = len(record.events)
    assert code_mode.run("await inventory.get_forecast('Lima')", "hooks").status == "ok"
    events = [event for event in record.events[before:] if event[0] != "forecast"]
    assert events == [("pre", "get-forecast", {"city": "Lima"}), ("sync hook", "get-forecast"), ("async hook", "get-forecast"), ("post", "get-forecast")]


def test_cached_results_skip_the_function_but_not_the_hooks(code_mode, record):
    result = code_mode.run("[await inventory.price('p1') for _ in range(3)] + [await inventory.price('p2')]", "cache")
    assert result.result == "[9.5, 9.5, 9.5, 9.5]"
    assert record.named("price") == [("price", "p1"), ("price", "p2")]
    assert sum(1 for event in record.named("pre") if event[1] == "price") == 4


def test_a_tool_that_would_pause_the_run_is_refused_without_running(code_mode, record):
    result = code_mode.run("await inventory.delete_everything()", "pause")
    assert result.error["ename"] == "ToolPausedError" and "regular tool call" in result.error["evalue"]
    assert record.named("deleted") == []
    assert "not callable in cells" in code_mode.instructions()


def test_results_that_are_not_json_cross_pickled_or_say_why_not(code_mode):
    assert code_mode.run("await inventory.shape()", "pickle").result == "(1, 2)"
    refused = code_mode.run("await inventory.unsendable()", "pickle")
    assert refused.error["ename"] == "BridgeError" and "cannot cross the bridge" in refused.error["evalue"]


def test_an_oversized_result_raises_result_too_large(code_mode):
    result = code_mode.run("await inventory.big(2_000_000)", "large")
    assert result.error["ename"] == "ResultTooLarge"
    assert "max_result_bytes=100,000" in result.error["evalue"]
    # Offloading is suggested only where the kernel could read offloaded results: on this machine.
    assert ("offload" in result.error["evalue"]) == (code_mode.launch.gateway is None)
    assert code_mode.run("len(await inventory.big(1000))", "large").result == "1000"


def test_a_thousand_concurrent_calls_from_one_cell(code_mode):
    cell = "import asyncio\nlevels = await asyncio.gather(*(inventory.stock_level('x' * (i % 7)) for i in range(1000)))\nlevels == [10 * (i % 7) for i in range(1000)]"
    assert code_mode.run(cell, "gather").result == "True"


def test_an_interrupted_cell_cancels_its_host_calls(code_mode, record):
    result = code_mode.run("await inventory.slow(30)", "interrupt")
    assert result.status == "timeout"
    for _ in range(50):
        if record.named("slow cancelled"):
            break
        threading.Event().wait(0.1)
    assert record.named("slow cancelled") and not record.named("slow finished")
    assert code_mode.run("await inventory.stock_level('ok')", "interrupt").result == "20"


def test_a_forged_token_or_a_stale_generation_is_refused(code_mode):
    code_mode.run("1", "forge")
    bridge = code_mode._binder.bridge_of(code_mode._engine.pool.sessions["forge"].kernel)  # the host's end of this kernel's socket
    spec = bridge.spec()
    if bridge.listener is None:
        assert stat.S_IMODE(os.stat(bridge.path).st_mode) == 0o600
        endpoint = spec["socket"]
    else:
        endpoint = (*spec["address"], spec["certificate"])
    attempt = (
        "from toolpath.kernel.inside.bridge_client import BridgeClient, BridgeError\n"
        "async def attempt(token, generation):\n"
        "    try:\n"
        f"        await BridgeClient({endpoint!r}, token, generation).call('inventory.stock_level', ('a',), {{}})\n"
        "    except BridgeError as error:\n"
        "        return str(error)\n"
        "    return 'accepted'\n"
        f"(await attempt('0' * 64, {bridge.generation}), await attempt({bridge.token!r}, {bridge.generation - 1}), await attempt({bridge.token!r}, {bridge.generation}))"
    )
    forged, stale, genuine = eval(code_mode.run(attempt, "forge").result)
    assert "refused" in forged and "wrong token" in forged
    # Through a Unix socket a stale generation is named; the TLS endpoint shared by every remote
    # kernel routes it to that generation's kernel (or none), whose token it does not hold.
    assert "refused" in stale and ("generation" in stale if bridge.listener is None else "wrong token" in stale or "no kernel of generation" in stale)
    assert genuine == "accepted"


class WeatherTools(Toolkit):
    """A toolkit with an async connection that registers its tools while connecting."""

    def __init__(self, log, name="weather_tools", fail=False):
        super().__init__(name, requires_connect=True)
        self.log, self.fail = log, fail

    async def connect(self):
        self.log.append(("connect", self.name, id(asyncio.get_running_loop())))
        if self.fail:
            raise ConnectionRefusedError("weather service is down")

        async def temperature(city: str) -> float:
            """Temperature in °C."""
            return 21.5

        if "temperature" not in self.functions:
            self.register(temperature)
        self.is_connected = True

    async def close(self):
        self.log.append(("close", self.name, id(asyncio.get_running_loop())))
        self.is_connected = False


class LedgerTools(Toolkit):
    def __init__(self, log):
        super().__init__("ledger", [self.balance], requires_connect=True)
        self.log = log

    def balance(self, account: str) -> int:
        """Balance of `account`."""
        return 100

    def connect(self):
        self.log.append(("connect", self.name))
        self.is_connected = True

    def close(self):
        self.log.append(("close", self.name))
        self.is_connected = False


def test_connections_open_with_the_run_and_close_when_it_ends():
    log = []
    weather, ledger, by_hand = WeatherTools(log), LedgerTools(log), WeatherTools(log, name="manual_tools")

    async def main():
        await by_hand.connect()
        log.clear()
        code_mode = CodeMode([ledger, weather, by_hand], pool_size=0)
        try:
            code_mode.open()
            assert log == [("connect", "ledger")]  # an async connect waits for the first cell
            first = await code_mode.arun("kept = 7\n(await weather.temperature('Oslo'), await ledger.balance('a'))", "run")
            assert first.result == "(21.5, 100)", first.error
            assert log[1] == ("connect", "weather_tools", id(asyncio.get_running_loop()))
            assert "weather.temperature(city: str) -> float" in code_mode.instructions()
            await code_mode.aclose()
            assert log[2:] == [("close", "weather_tools", id(asyncio.get_running_loop())), ("close", "ledger")]
            assert by_hand.is_connected and not any(entry[1] == "manual_tools" for entry in log)
            second = await code_mode.arun("(kept, await weather.temperature('Rome'))", "run")  # a new run reconnects
            assert second.result == "(7, 21.5)" and log[-1][0] == "connect"  # and the kernel outlived the run
        finally:
            await code_mode.ashutdown()
        assert log[-1][0] == "close"

    asyncio.run(main())


def test_a_toolkit_that_fails_to_bind_raises_on_every_attribute_and_others_still_work():
    log = []
    broken = WeatherTools(log, name="broken_tools", fail=True)
    missing = ToolDefinition(name="ghost", server_name="catalog", module="no_such_module_anywhere", binding="host", id=1)
    present = ToolDefinition(name="dumps", server_name="catalog", module="json", binding="host", id=2)
    with CodeMode([broken, missing, present], pool_size=0) as code_mode:
        result = code_mode.run("broken.anything", "fail")
        assert result.error["ename"] == "RuntimeError"
        assert "broken_tools" in result.error["evalue"] and "weather service is down" in result.error["evalue"]
        assert "broken: unavailable" in code_mode.instructions()
        ghost = code_mode.run("await catalog.ghost()", "fail")
        assert ghost.error["ename"] == "RuntimeError" and "no_such_module_anywhere" in ghost.error["evalue"]
        assert code_mode.run("await catalog.dumps([1])", "fail").result == "'[1]'"


def test_names_python_cannot_use_bind_as_names_it_can():
    def keyword_tool() -> str:
        return "ok"

    with CodeMode([Toolkit("lambda_tools", [Tool(keyword_tool, name="get-forecast"), Tool(keyword_tool, name="class")])], pool_size=0) as code_mode:
        instructions = code_mode.instructions()
        assert "lambda_.get_forecast()" in instructions and "lambda_.class_()" in instructions
        assert code_mode.run("(await lambda_.get_forecast(), await lambda_.class_())", "names").result == "('ok', 'ok')"
        assert "'get-forecast'" in code_mode.run("help(lambda_.get_forecast)", "names").stdout


def test_offloaded_results_are_read_back_from_sqlite(tmp_path):
    def report(rows: int) -> list:
        return [{"row": index, "text": "x" * 100} for index in range(rows)]

    store = tmp_path / "toolpath.db"
    with CodeMode([report], pool_size=0, max_result_bytes=10_000, offload_results=True, result_store=store) as code_mode:
        small = code_mode.run("await tools.report(2)", "offload")
        assert small.result.startswith("[{'row': 0")
        offloaded = code_mode.run("handle = await tools.report(20_000)\nhandle", "offload")
        assert "offloaded result" in offloaded.result and "results.get" in offloaded.result
        back = code_mode.run("rows = await results.get(handle.id)\n(len(rows), rows[-1]['row'])", "offload")
        assert back.result == "(20000, 19999)", back.error
        assert stat.S_IMODE(os.stat(store).st_mode) == 0o600


def test_a_background_task_keeps_its_calls_when_another_cell_is_interrupted():
    async def slow(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "finished"

    # A long grace: on a loaded machine (tests run in parallel) the interrupt can take seconds to land.
    with CodeMode([slow], pool_size=0, timeout=1.5, interrupt_grace=10) as code_mode:
        started = code_mode.run("import asyncio\nbackground = asyncio.ensure_future(tools.slow(3))", "background")
        assert started.status == "ok"
        assert code_mode.run("await tools.slow(30)", "background").status == "timeout"
        code_mode.run("import time; time.sleep(0.1)", "background")
        assert code_mode.run("await asyncio.wait_for(background, 5)", "background").result == "'finished'"


def test_tools_that_exit_or_misbehave_give_errors_and_the_session_goes_on():
    import argparse

    def cli(arguments: str) -> str:
        parser = argparse.ArgumentParser(prog="cli")
        parser.add_argument("--count", required=True)
        return parser.parse_args(arguments.split()).count

    async def interrupts() -> None:
        raise KeyboardInterrupt("pressed")

    def stops() -> None:
        raise StopIteration

    class Unprintable(ValueError):
        def __str__(self):
            raise RuntimeError("no")

    def unprintable() -> None:
        raise Unprintable()

    class OutOfStock(LookupError):
        pass

    def out_of_stock(sku: str) -> None:
        raise OutOfStock(f"{sku} is out of stock")

    def page(query: str, index: int = 0, self: str = "") -> list:  # names our call chain also uses
        return [query, index, self]

    def passthrough(name, call_next, arguments):
        return call_next(**arguments)

    kit = Toolkit("odd_tools", [cli, interrupts, stops, unprintable, out_of_stock, page], hooks=[passthrough])
    with CodeMode([kit], pool_size=0, timeout=20) as code_mode:
        exited = code_mode.run("await odd.cli('--bogus')", "odd")
        assert exited.error["ename"] == "ToolExitError" and "SystemExit" in exited.error["evalue"]
        for cell, ename in (("await odd.interrupts()", "ToolExitError"), ("await odd.stops()", "ToolExitError"), ("await odd.unprintable()", "ValueError")):
            assert code_mode.run(cell, "odd").error["ename"] == ename, cell
        caught = code_mode.run("try:\n    await odd.out_of_stock('A-1')\nexcept LookupError as error:\n    print('caught', error)", "odd")
        assert caught.stdout.strip() == "caught OutOfStock: A-1 is out of stock"
        assert code_mode.run("await odd.page('q', index=2, self='me')", "odd").result == "['q', 2, 'me']"
        assert code_mode.run("await odd.cli('--count 3')", "odd").result == "'3'"


def test_a_connect_that_forgets_is_connected_still_runs_once_per_run():
    calls = []

    class Forgetful(Toolkit):
        def connect(self):
            calls.append("connect")

        def close(self):
            calls.append("close")

    def shout(text: str) -> str:
        return text.upper()

    with CodeMode([Forgetful("forgetful", [shout], requires_connect=True)], pool_size=0) as code_mode:
        for _ in range(3):
            assert code_mode.run("await forgetful.shout('abc')", "forgetful").result == "'ABC'"
        code_mode.close()
        assert calls == ["connect", "close"]


def test_max_kernels_holds_for_sessions_that_start_at_once():
    with CodeMode(pool_size=0, max_kernels=2, busy_wait=30) as code_mode:
        threads = [threading.Thread(target=code_mode.run, args=("1", f"session-{index}")) for index in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(code_mode.sessions()) <= 2


def test_a_restart_during_a_cell_returns_a_result():
    with CodeMode(pool_size=0, timeout=30) as code_mode:
        code_mode.run("1", "restart")
        timer = threading.Timer(1.0, code_mode.restart, args=("restart",))
        timer.start()
        result = code_mode.run("import time\ntime.sleep(20)", "restart")
        timer.join()
        assert result.status == "dead" and "restarted while this cell ran" in result.error["evalue"]
        assert code_mode.run("2 + 2", "restart").result == "4"


def test_arguments_over_the_frame_limit_are_refused_in_the_cell_and_the_session_goes_on(code_mode):
    # max_result_bytes=100_000: frames may carry 100,000 + 64 KiB bytes.
    refused = code_mode.run("await inventory.stock_level('x' * 200_000)", "frame-limit")
    assert refused.status == "error" and refused.error["ename"] == "BridgeError"
    assert "over the bridge's limit of 165,536" in refused.error["evalue"]
    assert code_mode.run("await inventory.stock_level('ok')", "frame-limit").result == "20"


def test_a_json_only_codemode_refuses_pickled_arguments_with_a_clear_error():
    def echo(value):
        return value

    with CodeMode([echo], pool_size=0, accept_pickles=False) as code_mode:
        refused = code_mode.run("await tools.echo({1, 2})", "json-only")
        assert refused.error["ename"] == "BridgeError" and "accepts JSON only" in refused.error["evalue"]
        assert code_mode.run("await tools.echo({'a': [1, 2.5, None]})", "json-only").result == "{'a': [1, 2.5, None]}"


def test_a_bogus_frame_length_from_a_cell_does_not_stall_the_session(code_mode):
    cell = (
        "import asyncio\n"
        "from toolpath.kernel.inside import bridge_client\n"
        "connection = await bridge_client._client._connection()\n"
        "in_flight = asyncio.ensure_future(inventory.slow(0.5))\n"
        "await asyncio.sleep(0.1)\n"
        "connection.writer.write((2**32 - 1).to_bytes(4, 'big'))  # claims 4 GiB and sends none of it\n"
        "(await in_flight, await inventory.stock_level('ok'), connection.closed_reason)"
    )
    result = code_mode.run(cell, "bogus-length")
    assert result.status == "ok", result.error
    answered, later, reason = eval(result.result)
    assert answered == "done" and later == 20
    assert "4,294,967,295 bytes" in reason
