"""The server-wide memory budget of sandboxed kernels (issue 50): ``toolpath serve`` promises no
more kernels than fit the budget at their memory limit, and says so when asked for more."""

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from toolpath.kernel.sandbox.memory_budget import available_memory_bytes, default_budget_bytes, kernels_within
from toolpath.kernel.sandbox.provisioner import SandboxPolicy, sandbox_problem
from toolpath.planner.interfaces.serve_limits import SERVE_MAX_KERNELS
from toolpath.planner.interfaces.server import ServeError, kernel_memory_caps

ROOT = Path(__file__).resolve().parent.parent
GiB = 2**30
#: 2 GiB of memory and three 512 MiB file systems: 3.5 GiB a kernel, the default policy's.
POLICY = SandboxPolicy()


def test_the_available_memory_is_the_machines_or_less_and_the_default_budget_a_share_of_it():
    assert 0 < available_memory_bytes() <= psutil.virtual_memory().total
    assert default_budget_bytes() == int(available_memory_bytes() * 0.75)


def test_kernels_within_counts_whole_kernels_after_the_pool():
    assert kernels_within(10 * GiB, 3 * GiB) == 3
    assert kernels_within(10 * GiB, 3 * GiB, pool_size=1) == 2
    assert kernels_within(2 * GiB, 3 * GiB) == 0


def test_sandboxed_kernels_default_to_what_fits_the_budget():
    assert POLICY.group_memory_bytes() == int(3.5 * GiB)
    assert kernel_memory_caps({"sandbox": POLICY}, {}, 16 * GiB) == {"max_kernels": 4}
    assert kernel_memory_caps({"sandbox": POLICY}, {"pool_size": 1}, 8 * GiB) == {"max_kernels": 1}
    # A large machine is still capped at the usual default.
    assert kernel_memory_caps({"sandbox": POLICY}, {}, 1024 * GiB)["max_kernels"] == SERVE_MAX_KERNELS


def test_more_kernels_than_fit_or_a_budget_below_one_kernel_is_refused_naming_both():
    with pytest.raises(ServeError, match=r"--max-kernels 32 promises more memory.*3.5 GiB.*16.0 GiB, so 4 fit; give --max-kernels 4 or fewer"):
        kernel_memory_caps({"sandbox": POLICY}, {"max_kernels": 32}, 16 * GiB)
    with pytest.raises(ServeError, match="not one kernel fits.*the memory budget is 1.0 MiB"):
        kernel_memory_caps({"sandbox": POLICY}, {}, 2**20)


def test_kernels_without_a_memory_limit_keep_the_usual_cap_and_refuse_a_budget():
    assert kernel_memory_caps({}, {}, None) == {"max_kernels": SERVE_MAX_KERNELS}
    assert kernel_memory_caps({}, {"max_kernels": 100}, None) == {"max_kernels": 100}
    with pytest.raises(ServeError, match="--memory-budget bounds"):
        kernel_memory_caps({"sandbox": SandboxPolicy(memory_bytes=None)}, {}, 8 * GiB)


def test_toolpath_serve_refuses_an_overcommitting_max_kernels_before_loading_anything(tmp_path):
    if sandbox_problem():
        pytest.skip(sandbox_problem())
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"a-token-of-thirty-two-characters-long": "alice"}')
    tokens.chmod(0o600)
    command = [sys.executable, "-m", "toolpath.planner.interfaces.cli", "serve", "--http", "127.0.0.1:8765", "--tokens", str(tokens)]
    done = subprocess.run([*command, "--max-kernels", "32", "--memory-budget", "8GiB"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "--max-kernels 32 promises more memory" in done.stderr and "so 2 fit" in done.stderr
    for value in ("lots", "0", "²", "9" * 400):
        bad = subprocess.run([*command, "--memory-budget", value], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and f"{value!r} is not a size" in bad.stderr and "Traceback" not in bad.stderr
