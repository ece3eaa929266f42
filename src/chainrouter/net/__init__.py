"""Network facts about a request: who the client is behind trusted proxies."""
