"""CodeMode's option groups: a group given whole does what its flat keywords (the shorthand) do, and
a group with one of its flat keywords is refused."""

import pytest

from toolpath import BridgePolicy, CellPolicy, CodeMode, KernelCapacity, KernelLaunch, SnapshotPolicy
from toolpath.kernel import OutputLimits


def _in_force(code_mode):
    """The option groups ``code_mode``'s parts run with (the snapshot policy as the engine resolved it)."""
    return code_mode.cells, code_mode.capacity, code_mode.launch, code_mode._engine.snapshots.policy, code_mode._binder.policy


def test_each_group_given_whole_is_what_its_flat_keywords_make(tmp_path):
    flat = CodeMode(
        timeout=7,
        interrupt_grace=1,
        busy_wait=2,
        on_busy_kernel="restart",
        max_output_chars=300,
        max_images_per_cell=2,
        max_image_bytes=1000,
        max_kernels=3,
        max_kernels_per_user=2,
        pool_size=0,
        idle_ttl=60,
        cwd=str(tmp_path),
        env={"GROUPED": "no"},
        startup_code="prepared = 1",
        allow_shell=False,
        snapshot_debounce=0.5,
        max_variable_bytes=10,
        max_snapshot_bytes=100,
        snapshot_after_each_cell=True,
        max_result_bytes=500,
        accept_pickles=False,
        bridge_address="10.0.0.5:7443",
        bridge_listen="0.0.0.0:7443",
        snapshot_store=tmp_path / "flat.db",
    )
    grouped = CodeMode(
        cells=CellPolicy(timeout=7, interrupt_grace=1, busy_wait=2, on_busy_kernel="restart", limits=OutputLimits(300, 2, 1000)),
        capacity=KernelCapacity(max_kernels=3, max_kernels_per_user=2, pool_size=0, idle_ttl=60),
        launch=KernelLaunch(cwd=str(tmp_path), env={"GROUPED": "no"}, startup_code="prepared = 1", allow_shell=False),
        snapshots=SnapshotPolicy(debounce=0.5, max_variable_bytes=10, max_snapshot_bytes=100, after_each_cell=True),
        bridge=BridgePolicy(max_result_bytes=500, accept_pickles=False, address="10.0.0.5:7443", listen="0.0.0.0:7443"),
        snapshot_store=tmp_path / "grouped.db",
    )
    try:
        assert _in_force(grouped) == _in_force(flat)
        assert grouped.instructions() == flat.instructions()
        assert grouped._binder.policy.address == ("10.0.0.5", 7443) and grouped._binder.policy.listen == ("0.0.0.0", 7443)
    finally:
        flat.shutdown()
        grouped.shutdown()


def test_default_groups_are_the_flat_defaults_and_a_bridge_listens_where_it_is_reached(tmp_path):
    plain = CodeMode(pool_size=0, snapshot_store=tmp_path / "plain.db")
    grouped = CodeMode(
        cells=CellPolicy(),
        capacity=KernelCapacity(pool_size=0),
        launch=KernelLaunch(),
        snapshots=SnapshotPolicy(),
        bridge=BridgePolicy(),
        snapshot_store=tmp_path / "grouped.db",
    )
    try:
        assert _in_force(grouped) == _in_force(plain)
        assert grouped._engine.snapshots.policy.after_each_cell is False  # a SQLite store: after the debounce, as the shorthand's default
    finally:
        plain.shutdown()
        grouped.shutdown()
    assert BridgePolicy(address="[::1]:7443").listen == ("::1", 7443)
    with pytest.raises(ValueError, match="bridge_address must be 'host:port'"):
        BridgePolicy(address="nowhere")


@pytest.mark.parametrize(
    ("group", "shorthand"),
    [
        ("cells", {"timeout": 300.0}),  # its default value, given: still two answers to one question
        ("cells", {"max_output_chars": 100}),
        ("capacity", {"pool_size": 0}),
        ("launch", {"gateway_url": "http://gateway:8888"}),
        ("launch", {"env": None}),
        ("snapshots", {"snapshot_debounce": 1.0}),
        ("bridge", {"bridge_address": "10.0.0.5:7443"}),
    ],
)
def test_a_group_with_one_of_its_flat_keywords_is_refused_naming_both(group, shorthand):
    classes = {"cells": CellPolicy, "capacity": KernelCapacity, "launch": KernelLaunch, "snapshots": SnapshotPolicy, "bridge": BridgePolicy}
    (keyword,) = shorthand
    with pytest.raises(TypeError, match=rf"CodeMode got both {group}= and {keyword}=.*inside {group}={classes[group].__name__}\(\.\.\.\)"):
        CodeMode(**{group: classes[group]()}, **shorthand)
    with pytest.raises(TypeError, match="cells must be a CellPolicy, got KernelCapacity"):
        CodeMode(cells=KernelCapacity())


@pytest.mark.integration
def test_grouped_options_take_effect_in_a_real_kernel():
    with CodeMode(
        cells=CellPolicy(timeout=2, interrupt_grace=2, limits=OutputLimits(max_output_chars=500)),
        capacity=KernelCapacity(pool_size=0),
        launch=KernelLaunch(env={"TOOLPATH_GROUPED": "yes"}, allow_shell=False),
        snapshot=False,
    ) as code_mode:
        shown = code_mode.run("import os\nprint(os.environ['TOOLPATH_GROUPED'])\nprint('x' * 5000)", "s")
        assert shown.status == "ok" and shown.stdout.startswith("yes\n") and shown.truncated == ("stdout",) and len(shown.stdout) < 600
        escaped = code_mode.run("!echo hi", "s")
        assert escaped.status == "error" and "disabled" in escaped.error["evalue"]
        assert code_mode.run("while True:\n    pass", "s").status == "timeout"


def test_a_group_refuses_values_of_the_wrong_kind_when_made_not_at_the_first_cell():
    with pytest.raises(TypeError, match=r"the gateway must be a toolpath\.kernel\.kernels\.gateway\.Gateway .* got str .* gateway_url="):
        KernelLaunch(gateway="http://127.0.0.1:1")
    with pytest.raises(TypeError, match="sandbox must be a toolpath.SandboxPolicy"):
        KernelLaunch(sandbox={"memory_bytes": 1})
    for address in (5, ("127.0.0.1", 99999), ("127.0.0.1",), ("127.0.0.1", "80"), ("", 80)):
        with pytest.raises(ValueError, match=r"bridge_address must be 'host:port' or \(host, port\)"):
            BridgePolicy(address=address)
    with pytest.raises(ValueError, match="bridge_address"):
        CodeMode(bridge_address=5)
    assert BridgePolicy(address=["10.0.0.2", 7443]).listen == ("10.0.0.2", 7443)
    with pytest.raises(TypeError, match="tools must be a list of toolkits, tools, functions or registry tools, got int"):
        CodeMode(5)
