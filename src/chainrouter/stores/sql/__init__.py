"""The relational store: schema, engine set-up, migrations and repositories."""
