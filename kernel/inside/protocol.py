"""What the host and the kernel agree on: the modules and functions the host calls in the kernel by
name, the MIME types, payload and comm target of their messages, the name of a handle's search, and
the bridge's frame limits.

Both sides import this module: the kernel's (:mod:`toolpath.kernel.inside`) and the host's. It
imports nothing, so that a kernel's first import of it costs nothing and a host change cannot pull
the host's side into the kernel.
"""

#: The kernel's setup and inspection (:mod:`toolpath.kernel.inside.setup`), run by silent cells.
SETUP_MODULE = "toolpath.kernel.inside.setup"
#: In-kernel handles (:mod:`toolpath.kernel.inside.handles`) and the function binding catalog tools.
BINDER_MODULE = "toolpath.kernel.inside.handles"
BINDER_FUNCTION = "bind_module_tools"
#: The bridge's kernel end (:mod:`toolpath.kernel.inside.bridge_client`) and the function fetching a host toolkit's handle.
HOST_MODULE = "toolpath.kernel.inside.bridge_client"
#: The kernel module that runs tool calls' retries and injected failures.
RETRIES_MODULE = "toolpath.kernel.inside.retries"
HOST_FUNCTION = "host_toolkit"
#: Session snapshots' kernel side (:mod:`toolpath.kernel.inside.snapshot`).
SNAPSHOT_MODULE = "toolpath.kernel.inside.snapshot"
#: A remote kernel's private directory (:mod:`toolpath.kernel.inside.files`).
FILES_MODULE = "toolpath.kernel.inside.files"
#: Where the approval errors a cell may catch are defined (:mod:`toolpath.kernel.inside.approval_policy`).
APPROVAL_POLICY_MODULE = "toolpath.kernel.inside.approval_policy"
#: What a call to a host tool that asks for approval may raise, bound by name wherever host tools
#: are, so a cell can catch them without an import.
APPROVAL_ERRORS = ("ApprovalDenied", "ApprovalTimeout", "ApprovalPending")

#: The MIME type under which a cell's value is sent as JSON text, beside IPython's ``text/plain``.
VALUE_MIME = "application/vnd.toolpath.value+json"
#: The MIME type of a cell value's short text, for a person at a terminal: ``text/plain`` with every
#: pandas table and series in it cut as a notebook cuts a long one (first and last rows, a few
#: columns) and its shape said. Sent only once pandas is imported (without it, ``text/plain`` is short enough).
SUMMARY_MIME = "text/vnd.toolpath.summary"
#: The ``source`` of the execute-reply payload that lists a cell's completed tool calls.
TOOL_CALLS_PAYLOAD = "toolpath.tool_calls"
#: The comm target through which the host writes files into a remote kernel's private directory.
COMM_TARGET = "toolpath.files"
#: The attribute of a kit's handle in the kernel that searches its tools (a tool bound by that name wins).
SEARCH_ATTRIBUTE = "search_tools"

#: Largest body a bridge frame may carry (the 4-byte length field's limit).
MAX_FRAME_BYTES = 2**32 - 1
#: Largest hello a host reads: a 64-character token and a generation number need about 100 bytes.
MAX_HELLO_BYTES = 4096
#: Room a frame gets beyond ``max_result_bytes`` for its envelope, error messages and call metadata.
FRAME_OVERHEAD_BYTES = 65_536
