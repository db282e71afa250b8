"""SessionRecord: what CodeMode keeps about one session, whether or not it has a kernel now."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolpath.kernel.kernels.ipython_kernel import IPythonKernel
from toolpath.registry import ToolDefinition


@dataclass
class SessionRecord:
    """A session's kernel and bookkeeping; ``lock`` serialises its cells."""

    session_id: str
    kernel: IPythonKernel | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    #: Told to the model with the session's next cell (see :mod:`toolpath.kernel.codemode.notices`).
    notice: str = ""
    #: Its kernel is starting: it counts against the caps already.
    starting: bool = False
    #: Registry tools bound in this session only (see CodeMode.bind), by id; names are
    #: de-duplicated over ``universe``.
    tools: dict[int, ToolDefinition] = field(default_factory=dict)
    universe: list[ToolDefinition] = field(default_factory=list)
    tools_version: int = 0
    #: The ``user_id`` of the run that created the session (``None``: nobody's).
    owner: str | None = None
    #: Snapshots: a cell ran since the last one; the debounce timer; the snapshot could not be read,
    #: so it must not be overwritten by this kernel's state; the kernel was restored from one.
    dirty: bool = False
    snapshot_timer: asyncio.TimerHandle | None = None
    keep_snapshot: bool = False
    restored: bool = False
    #: Data saved with each snapshot (see CodeMode.save_with_snapshot), and what the last one held.
    data_provider: Callable[[], Any] | None = None
    saved_data: Any = None
    #: ``{record key: digest of its pickle}`` in the stored snapshot, as far as this kernel knows.
    digests: dict[str, str] = field(default_factory=dict)
    #: Stored records this kernel could not load (``{record key: digest}``): kept in later snapshots
    #: until the kernel defines one of their names itself, so a module missing for a while loses nothing.
    unrestored: dict[str, str] = field(default_factory=dict)
    #: The generation under which this process holds the session in the store while it has a
    #: kernel (:meth:`toolpath.kernel.codemode.snapshot_store.SnapshotStore.take`); ``None``: not held.
    generation: int | None = None
    #: The session lost a kernel (death, eviction, a stuck cell), so its next kernel's notice says
    #: whether the variables came back.
    lost_kernel: bool = False
