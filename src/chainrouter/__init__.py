"""chainrouter: JSON-RPC router for EVM chains across many node providers."""
