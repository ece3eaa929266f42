"""Buying credits: the deposit watcher (on-chain payments read through the router) and card
payments through Stripe Checkout (docs/billing.md)."""
