"""Kernels started from a kernelspec through jupyter_client's provisioner machinery."""

import json
import sys
from pathlib import Path

import pytest

from toolpath.kernel import CodeMode, KernelError, Toolkit

pytestmark = pytest.mark.integration

PROVISIONERS = Path(__file__).resolve().parent / "provisioners"


@pytest.fixture()
def provisioned_kernelspecs(tmp_path, monkeypatch):
    """Kernelspecs ``toolpath-recording`` and ``toolpath-elsewhere`` whose metadata names the test
    provisioners, registered under the ``jupyter_client.kernel_provisioners`` entry point group by
    a distribution on ``sys.path``, as ``pip install`` of a provisioner package would."""
    distribution = tmp_path / "site" / "toolpath_test_provisioners-0.dist-info"
    distribution.mkdir(parents=True)
    (distribution / "METADATA").write_text("Metadata-Version: 2.1\nName: toolpath-test-provisioners\nVersion: 0\n")
    (distribution / "entry_points.txt").write_text(
        "[jupyter_client.kernel_provisioners]\n"
        "toolpath-recording-provisioner = toolpath_test_provisioners:RecordingProvisioner\n"
        "toolpath-elsewhere-provisioner = toolpath_test_provisioners:ElsewhereProvisioner\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.syspath_prepend(str(PROVISIONERS))
    for name in ("recording", "elsewhere"):
        spec = tmp_path / "jupyter" / "kernels" / f"toolpath-{name}"
        spec.mkdir(parents=True)
        kernel = {
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": f"toolpath {name}",
            "language": "python",
            "metadata": {"kernel_provisioner": {"provisioner_name": f"toolpath-{name}-provisioner"}},
        }
        (spec / "kernel.json").write_text(json.dumps(kernel))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))


def shelf_count(shelf: str) -> int:
    """Items on ``shelf``."""
    return len(shelf) * 10


@pytest.mark.parametrize(("kernel_name", "remote"), [("toolpath-recording", False), ("toolpath-elsewhere", True)])
def test_a_kernelspec_provisioner_drives_a_session_end_to_end(provisioned_kernelspecs, tmp_path, kernel_name, remote):
    store = tmp_path / "snapshots.db"
    shelves = Toolkit("shelves", [shelf_count])
    with CodeMode([shelves], kernel_name=kernel_name, pool_size=0, timeout=30, snapshot_store=store) as code_mode:
        marked = code_mode.run("import os\nos.environ.get('TOOLPATH_TEST_PROVISIONER')", "s")
        assert marked.result == repr(kernel_name.removeprefix("toolpath-")), marked
        calls = code_mode.run("import asyncio\ncounts = await asyncio.gather(*(shelves.shelf_count('a' * i) for i in range(100)))\nsum(counts)", "s")
        assert calls.result == "49500", calls
        # A set is no JSON: it crosses pickled from a local kernel; one a non-local provisioner
        # launched is held to JSON only.
        pickled = code_mode.run("await shelves.shelf_count({'a', 'b'})", "s")
        if remote:
            assert pickled.error["ename"] == "BridgeError" and "accepts JSON only" in pickled.error["evalue"]
        else:
            assert pickled.result == "20", pickled
    with CodeMode([shelves], kernel_name=kernel_name, pool_size=0, timeout=30, snapshot_store=store) as later:
        restored = later.run("sum(counts)", "s")
        assert restored.result == "49500" and "Restored" in restored.notice


def test_an_unknown_kernelspec_is_a_clear_error(provisioned_kernelspecs):
    with CodeMode(kernel_name="toolpath-missing", pool_size=0) as code_mode:
        with pytest.raises(KernelError, match="kernelspec 'toolpath-missing'.*No such kernel named toolpath-missing.*jupyter kernelspec list"):
            code_mode.run("1", "s")
