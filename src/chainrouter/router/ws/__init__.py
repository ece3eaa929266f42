"""WebSocket subscriptions: following each chain's head, and what clients subscribed to."""
