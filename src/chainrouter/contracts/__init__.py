"""Request bodies of the management API, declared once.

The API validates them and documents them in its OpenAPI description; the MCP companion offers the
same models as tool arguments and sends what they accept. Sharing them keeps the two from drifting.
"""
