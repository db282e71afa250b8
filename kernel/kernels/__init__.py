"""The host's kernel driver (:class:`toolpath.kernel.kernels.ipython_kernel.IPythonKernel`) and the
transports it reaches kernels through: local, sandboxed or on a gateway. This package imports nothing.
"""
