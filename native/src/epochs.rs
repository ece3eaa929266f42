//! Epochs: counters Python raises whenever something a decision read changes (a snapshot, a
//! node's health, a chain's heads or finality, a key's seen head: router/epochs.py). A decision
//! carries the slots it read and their values then; the server compares them on every use and
//! drops the decision when one moved (memo.rs). Nothing is checked again by a second copy of a
//! rule: a moved counter only sends the next call to the pipeline, which decides afresh.
//!
//! Python maps what changed to a slot by hashing it into a fixed number of slots, so the store
//! never grows; two things sharing a slot only cost a decision made again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

pub struct EpochStore {
    slots: Box<[AtomicU64]>,
}

impl EpochStore {
    pub fn new(slots: usize) -> EpochStore {
        EpochStore { slots: (0..slots).map(|_| AtomicU64::new(0)).collect() }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// The slot's value now; 0 for a slot past the end (none is handed out).
    pub fn read(&self, slot: usize) -> u64 {
        self.slots.get(slot).map_or(0, |value| value.load(Ordering::Acquire))
    }

    pub fn bump(&self, slot: usize) {
        if let Some(value) = self.slots.get(slot) {
            value.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Whether every `(slot, value)` still holds.
    pub fn hold(&self, read: &[(usize, u64)]) -> bool {
        read.iter().all(|&(slot, value)| self.read(slot) == value)
    }
}

/// The store as Python holds it.
#[pyclass(module = "chainrouter._native")]
pub struct Epochs {
    pub store: Arc<EpochStore>,
}

#[pymethods]
impl Epochs {
    #[new]
    fn new(slots: usize) -> PyResult<Self> {
        if slots == 0 {
            return Err(PyValueError::new_err("an epoch store needs at least one slot"));
        }
        Ok(Epochs { store: Arc::new(EpochStore::new(slots)) })
    }

    fn bump(&self, slot: usize) -> PyResult<()> {
        self.check(slot)?;
        self.store.bump(slot);
        Ok(())
    }

    fn read(&self, slot: usize) -> PyResult<u64> {
        self.check(slot)?;
        Ok(self.store.read(slot))
    }
}

impl Epochs {
    fn check(&self, slot: usize) -> PyResult<()> {
        if slot >= self.store.len() {
            return Err(PyValueError::new_err(format!("no epoch slot {slot}")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_read_holds_until_a_slot_it_read_is_bumped() {
        let store = EpochStore::new(8);
        store.bump(3);
        let read = [(3, store.read(3)), (5, store.read(5))];
        assert!(store.hold(&read));
        store.bump(4);
        assert!(store.hold(&read), "another slot");
        store.bump(5);
        assert!(!store.hold(&read));
    }

    #[test]
    fn a_slot_past_the_end_reads_zero_and_bumps_nothing() {
        let store = EpochStore::new(2);
        store.bump(9);
        assert_eq!(store.read(9), 0);
    }
}
