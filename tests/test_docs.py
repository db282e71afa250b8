"""The README and docs/ hold together: every relative link reaches a file and a heading, no table is
cut in two, and the Quick start's test command is the one CI runs."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(r"#{1,6} ", line):
            heading = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", heading).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_relative_link_reaches_a_file_and_a_heading(document):
    broken = []
    for target in LINK.findall(document.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (document.parent / file_part).resolve() if file_part else document
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT) if linked.is_relative_to(ROOT) else linked}")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    assert not broken, f"{document.name}: " + "; ".join(broken)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_no_table_is_cut_by_a_blank_line(document):
    """A blank line between two table rows makes the second half a paragraph of pipes."""
    lines = document.read_text().splitlines() + [""]
    separator = re.compile(r"\|[-| :]+\|$")
    cut = [
        number + 1
        for number in range(1, len(lines) - 2)
        if not lines[number].strip() and lines[number - 1].startswith("|") and lines[number + 1].startswith("|") and not separator.match(lines[number + 2])
    ]
    assert not cut, f"{document.name}: a table is cut by the blank line at line(s) {cut}"


def test_the_quick_start_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    commands = re.findall(r"```bash\n(python3 -m venv .venv && [^\n]+)\n```", readme)
    assert len(commands) == 2, "the Quick start has exactly two commands"
    assert commands[1] in ci.splitlines(), "the Quick start's second command is .ci/run's"
    assert "pytest" in commands[1] and "toolpath run" in commands[0]
