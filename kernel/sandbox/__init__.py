"""Sandboxed local kernels: the bubblewrap provisioner, control groups, the launcher that sets
resource limits, and the memory a server's sandboxed kernels may be promised. This package imports
nothing (:mod:`toolpath.kernel.sandbox.launch` runs by path, without it).
"""
