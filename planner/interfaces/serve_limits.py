"""``toolpath serve``'s default caps on kernels, sessions and running tasks, per user and in all
(read by the command line for its options and by :class:`toolpath.planner.interfaces.server.ToolpathServer`),
and the error of a user over a quota.
"""

from toolpath.errors import Refusal

#: ``toolpath serve``'s cap on one user's live kernels: an agent rarely works in more than a few
#: sessions at once, and a user's next session snapshots and stops their least recently used idle one.
SERVE_MAX_KERNELS_PER_USER = 4
#: ``toolpath serve``'s cap on all users' live kernels together: an idle kernel takes about 50 MB
#: (40 took 2 GB), so 32 is about 1.6 GB before any data, room for 8 users at their cap.
SERVE_MAX_KERNELS = 32
#: ``toolpath serve``'s cap on the sessions one user may have open: an agent rarely needs more than
#: a few, and each holds a session's state in the server (its kernel is capped apart) until it is closed.
SERVE_MAX_SESSIONS_PER_USER = 20
#: ``toolpath serve``'s cap on one user's tasks and cells running at once: as many as their live
#: kernels (:data:`SERVE_MAX_KERNELS_PER_USER`), since more would only wait for a kernel.
SERVE_MAX_TASKS_PER_USER = 4


class QuotaError(Refusal, RuntimeError):
    """A user's call is refused because one of their quotas in this server is used up; the message
    names the quota, its value, its option and what to do.

    Attributes:
        quota: which: ``"max_sessions_per_user"`` or ``"max_tasks_per_user"``.
    """

    def __init__(self, message: str, quota: str):
        super().__init__(message)
        self.quota = quota
