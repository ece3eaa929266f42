"""The RPC router's data plane: request in, upstream out, on the event loop, from memory only."""
