"""The host end of the bridge through which cells call host tools, and its TLS. The kernel end is
:mod:`toolpath.kernel.inside.bridge_client`. This package imports nothing.
"""
