"""Test doubles that are real components: servers on loopback that the suite and demos start."""
