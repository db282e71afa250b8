"""CodeMode: the façade (:mod:`toolpath.kernel.codemode.facade`), its options, its engine, and the
sessions, snapshots and handle bindings it keeps. This package imports nothing.
"""
