"""``toolpath init DOMAIN``: a new catalog package that validates and runs as generated.

The package holds ``catalog.yaml`` (inside the package, so it imports from any directory), one tool
module, and a pytest test of both; the author renames and grows them from there.
"""

from __future__ import annotations

import importlib.util
import keyword
import shutil
import tempfile
import textwrap
from pathlib import Path

from toolpath.errors import Refusal


class ScaffoldError(Refusal, ValueError):
    """The package cannot be written: a bad domain name or a directory already there."""


def _files(domain: str) -> dict[str, str]:
    """``{path inside the package: text}``."""
    catalog = f"""\
        # The {domain} catalog: states your tools require and produce, and the tools.
        # Check it with `toolpath validate {domain}/catalog.yaml --import`; the format is in docs/catalogs.md of toolpath's source, the schema in `toolpath schema`.
        domain: {domain}
        package: {domain}
        states:
          - token: {domain}.text_given
            description: A text to work on is known (the user gives it).
            input: true
          - token: {domain}.text_summarised
            description: A short summary of the text exists.
            affordances: [summarise a text, shorten a text]
        tools:
          - name: summarise_text
            description: Keep the first sentence of a text.
            required_parameters:
              - {{name: text, type: str, description: the text to summarise, state: {domain}.text_given}}
            return_spec: {{name: summary, type: str, description: the first sentence, state: {domain}.text_summarised}}
            state_transition: {{requires: [{domain}.text_given], produces: [{domain}.text_summarised]}}
        """
    module = f'''\
        """Tool ``summarise_text`` of the {domain} catalog: one module per tool, a function of the same name."""


        def summarise_text(text: str) -> str:
            """The first sentence of ``text`` (up to and including its first period)."""
            head, period, _ = text.strip().partition(".")
            return head + period
        '''
    test = f'''\
        """Tests of the {domain} catalog: it lints clean with its modules imported, and its tool works."""

        from pathlib import Path

        from toolpath.registry import lint_catalogs
        from {domain}.summarise_text import summarise_text

        CATALOG = Path(__file__).resolve().parent.parent / "catalog.yaml"


        def test_the_catalog_lints_clean_with_its_modules_imported():
            assert lint_catalogs([CATALOG], import_modules=True) == []


        def test_summarise_text_keeps_the_first_sentence():
            assert summarise_text("Plans are cells. Cells run.") == "Plans are cells."
        '''
    return {
        "__init__.py": "",
        "catalog.yaml": textwrap.dedent(catalog),
        "summarise_text.py": textwrap.dedent(module),
        "tests/__init__.py": "",
        f"tests/test_{domain}.py": textwrap.dedent(test),
    }


def scaffold(domain: str, directory: str | Path = ".") -> Path:
    """Write the package ``directory/domain`` whole (or nothing).

    Args:
        domain: the domain, also the package name: a lower-case Python identifier that no installed
            module already uses (the kernel would import that one instead).
        directory: where the package goes.

    Returns:
        The package's ``catalog.yaml``.

    Raises:
        ScaffoldError: a bad or taken name, or ``directory/domain`` already exists.
    """
    if not domain.isidentifier() or keyword.iskeyword(domain) or domain != domain.lower():
        raise ScaffoldError(f"{domain!r} cannot be a domain: use a lower-case Python name (letters, digits, underscores), e.g. 'lab_tools'")
    if importlib.util.find_spec(domain) is not None:
        raise ScaffoldError(f"a module named {domain!r} is already installed and would be imported instead of your package; choose another domain name")
    target = Path(directory) / domain
    if target.exists():
        raise ScaffoldError(f"{target} already exists; choose another domain or directory")
    Path(directory).mkdir(parents=True, exist_ok=True)
    # Written in a temporary directory beside the target, then moved in one step: never half a package.
    staging = Path(tempfile.mkdtemp(prefix=f".{domain}-", dir=directory))
    try:
        for relative, text in _files(domain).items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target / "catalog.yaml"
