"""The fast path: the pipeline's decisions applied by the native server to later calls in their
scope (docs/architecture.md, "Scoped decisions"). The native side is `native/src/` (`json.rs`,
`memo.rs`, `repeat.rs`, `settle.rs`); this package is its Python side:

- `decisions.py`: which calls of a served request the server may answer alike, in which scope,
  for as long as which epochs hold (the stages recorded what they read);
- `grants.py`: the credits held aside for the calls the server serves, per customer;
- `settle.py`: the receipts of those calls, judged as the pipeline judges answers and booked in
  the one ledger (router/ledger.py).
"""
