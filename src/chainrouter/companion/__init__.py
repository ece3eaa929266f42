"""The companion MCP server: a stdio server a user runs beside an AI agent, calling the routers
and the management API on the user's behalf (`chainrouter mcp`; see docs/mcp-companion.md)."""
