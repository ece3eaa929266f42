"""chainrouter: JSON-RPC router for EVM chains across many node providers."""

from chainrouter import hot_path

# Before any other module of the package loads: a compiled build runs only if it matches the
# sources (hot_path.py says why).
hot_path.guard()
