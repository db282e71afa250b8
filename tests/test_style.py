"""The tree passes ruff's lint rules and format (configured in pyproject.toml; ruff comes with the test extra)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing_to_fix_and_nothing_to_reformat():
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    formatting = subprocess.run([sys.executable, "-m", "ruff", "format", "--check", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert formatting.returncode == 0, f"run `ruff format .`:\n{formatting.stdout}{formatting.stderr}"
