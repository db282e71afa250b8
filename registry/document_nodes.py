"""What both parsers of catalog documents share (:mod:`toolpath.registry.catalog_documents` for
JSON, :mod:`toolpath.registry.catalog_yaml` for YAML): the nodes a
:class:`toolpath.registry.catalog_documents.SourceLocator` keeps to find a field's line and column,
and the longest integer a catalog may write.
"""

from __future__ import annotations

import sys
from typing import Any

#: The longest integer a catalog may write, in digits: Python's default limit for converting an
#: integer to or from text (``sys.int_info.default_max_str_digits``). Past it, reading the number
#: and printing it (in a message, a signature) raise ``ValueError``.
MAX_INTEGER_DIGITS = sys.int_info.default_max_str_digits


class NodeAt:
    """A node of a document as :class:`toolpath.registry.catalog_documents.SourceLocator` keeps it: where it starts (0-based line and
    column, as PyYAML's marks give them) and its ``value``: a scalar's text (:class:`ScalarAt`), a
    sequence's nodes (:class:`SequenceAt`) or a mapping's (key node, value node) pairs in the
    file's order (:class:`MappingAt`). A fifth of the memory of PyYAML's nodes with their marks."""

    __slots__ = ("line", "column", "value")

    def __init__(self, line: int, column: int, value: Any):
        self.line, self.column, self.value = line, column, value


class ScalarAt(NodeAt):
    __slots__ = ()


class SequenceAt(NodeAt):
    __slots__ = ()


class MappingAt(NodeAt):
    __slots__ = ()
