//! The one flight table of a worker: identical read-only calls in flight at once share one
//! attempt (coalescing; design notes, "Response cache and coalescing"). The first call of a key
//! leads, the others wait for its landing.
//!
//! Two kinds of caller use it, each under keys of its own: the pipeline, through the `Coalesce`
//! command (driver.rs), whose calls land a `Landed` (or None, cut short) by `Leading.land`; and
//! the server's calls under decisions (repeat.rs), which land the node's answer as it came. A
//! leader that goes away without landing (its request dropped, its client gone) lands nothing:
//! the calls that joined it are attempted on their own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use hyper::body::Bytes;
use pyo3::prelude::*;
use tokio::sync::watch;

/// How a flight ended, for the calls that joined it.
#[derive(Clone)]
pub enum Landing {
    /// A call under a decision: the node's answer and the id it was sent under, or None (no
    /// answer).
    Answer(Option<(Bytes, Bytes)>),
    /// A pipeline call: its `Landed`, or None.
    Landed(Option<PyObject>),
}

/// What waits for a landing: None until the flight lands; closed if its leader went away.
pub type Awaiting = watch::Receiver<Option<Landing>>;

struct Flight {
    serial: u64,
    landed: watch::Sender<Option<Landing>>,
}

#[derive(Default)]
struct Table {
    flights: HashMap<Box<[u8]>, Flight>,
    serials: u64,
}

#[derive(Default)]
pub struct Flights {
    table: Mutex<Table>,
}

pub enum Boarding {
    Lead(Leader),
    Join(Awaiting),
}

/// The leader of a flight. Dropped without `land`, it ends the flight unlanded.
pub struct Leader {
    flights: Arc<Flights>,
    key: Box<[u8]>,
    serial: u64,
    landed: bool,
}

impl Flights {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Lead the flight `key`, or join the one in the air.
    pub fn board(self: &Arc<Self>, key: &[u8]) -> Boarding {
        let mut table = self.lock();
        if let Some(flight) = table.flights.get(key) {
            return Boarding::Join(flight.landed.subscribe());
        }
        table.serials += 1;
        let serial = table.serials;
        let (landed, _) = watch::channel(None);
        let key: Box<[u8]> = key.into();
        table.flights.insert(key.clone(), Flight { serial, landed });
        Boarding::Lead(Leader { flights: self.clone(), key, serial, landed: false })
    }

    /// End the flight `serial` of `key` with `landing` (None: unlanded, the channel closes).
    fn end(&self, key: &[u8], serial: u64, landing: Option<Landing>) {
        let flight = {
            let mut table = self.lock();
            match table.flights.get(key) {
                Some(flight) if flight.serial == serial => table.flights.remove(key),
                _ => None,
            }
        };
        if let (Some(flight), Some(landing)) = (flight, landing) {
            let _ = flight.landed.send(Some(landing)); // none joined: nobody to tell
        }
    }

    /// Flights in the air: for the tests.
    #[cfg(test)]
    pub fn in_air(&self) -> usize {
        self.lock().flights.len()
    }
}

impl Leader {
    pub fn land(mut self, landing: Landing) {
        self.landed = true;
        self.flights.end(&self.key, self.serial, Some(landing));
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        if !self.landed {
            self.flights.end(&self.key, self.serial, None);
        }
    }
}

/// The landing a joined call waits for: None when its leader went away unlanded.
pub async fn landing(mut awaiting: Awaiting) -> Option<Landing> {
    loop {
        if let Some(landing) = awaiting.borrow().clone() {
            return Some(landing);
        }
        if awaiting.changed().await.is_err() {
            return None;
        }
    }
}

/// A pipeline call leading a flight, as the `Coalesce` command resumes it (contract.Leading).
#[pyclass(module = "chainrouter._native")]
pub struct Leading {
    leader: Mutex<Option<Leader>>,
}

impl Leading {
    pub fn new(leader: Leader) -> Leading {
        Leading { leader: Mutex::new(Some(leader)) }
    }
}

#[pymethods]
impl Leading {
    /// Hand `landed` to the calls that joined (None: cut short). Once; later calls do nothing.
    fn land(&self, landed: Option<PyObject>) {
        let leader = self.leader.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(leader) = leader {
            leader.land(Landing::Landed(landed));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(landing: Option<Landing>) -> Option<Option<(Bytes, Bytes)>> {
        match landing? {
            Landing::Answer(answer) => Some(answer),
            Landing::Landed(_) => panic!("a pipeline landing"),
        }
    }

    fn run<T>(future: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future)
    }

    #[test]
    fn the_first_call_of_a_key_leads_and_the_others_take_its_landing() {
        let flights = Arc::new(Flights::default());
        let Boarding::Lead(leader) = flights.board(b"k") else { panic!("the first leads") };
        let Boarding::Join(first) = flights.board(b"k") else { panic!("the second joins") };
        let Boarding::Join(second) = flights.board(b"k") else { panic!("so does the third") };
        let Boarding::Lead(_other) = flights.board(b"other") else { panic!("another key") };
        let answered = (Bytes::from_static(b"answer"), Bytes::from_static(b"7"));
        leader.land(Landing::Answer(Some(answered.clone())));
        assert_eq!(flights.in_air(), 1, "only the other key's");
        for joined in [first, second] {
            assert_eq!(answer(run(landing(joined))), Some(Some(answered.clone())));
        }
        let Boarding::Lead(_) = flights.board(b"k") else { panic!("a new flight after landing") };
    }

    #[test]
    fn a_leader_gone_without_landing_sends_the_joined_calls_on_their_own() {
        let flights = Arc::new(Flights::default());
        let Boarding::Lead(leader) = flights.board(b"k") else { panic!() };
        let Boarding::Join(joined) = flights.board(b"k") else { panic!() };
        drop(leader);
        assert!(answer(run(landing(joined))).is_none());
        assert_eq!(flights.in_air(), 0);
    }

    #[test]
    fn a_landing_of_an_older_flight_of_the_key_ends_only_its_own() {
        let flights = Arc::new(Flights::default());
        let Boarding::Lead(old) = flights.board(b"k") else { panic!() };
        flights.end(b"k", old.serial, None); // as if it had gone; a new one leads
        let Boarding::Lead(new) = flights.board(b"k") else { panic!() };
        old.land(Landing::Answer(None));
        assert_eq!(flights.in_air(), 1, "the new flight stays");
        drop(new);
    }
}
