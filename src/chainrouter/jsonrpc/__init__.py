"""JSON-RPC 2.0 as the router speaks it: strict envelope parsing and error responses."""
