"""The chain catalog: chain metadata imported from ethereum-lists style `chains.json` files."""
