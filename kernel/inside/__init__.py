"""What runs inside the kernel process: tool handles, the bridge's kernel end, the kernel's setup,
its snapshots and its private directory's files.

These modules import only each other, the standard library, third-party packages and toolpath's
shared leaves (:mod:`toolpath.errors`, :mod:`toolpath.registry.names`, :mod:`toolpath.registry.storage`):
a kernel must not pay for the host side. The host imports them too, for what both sides agree on
(:mod:`toolpath.kernel.inside.protocol`, the wire format, the approval policies). This package imports nothing.
"""
