"""Host tools: toolkits, MCP servers' tools, approvals and the handle each tool is bound to. This
package imports nothing.
"""
