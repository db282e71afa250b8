"""Interfaces, the top layer: the ``toolpath`` command line (:mod:`.cli`), the MCP server for agents
(:mod:`.server`, over HTTP with :mod:`.http_serving` and the limits of :mod:`.serve_limits`), and the
tools that start catalogs (:mod:`.scaffold` for ``toolpath init``, :mod:`.draft` for a catalog drafted
from an MCP server). Nothing below imports them. The modules load on use (this file imports nothing).
"""
