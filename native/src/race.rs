//! `Race`: the first of several futures to produce a value wins, and the rest are dropped.
//!
//! The driver gives each program of a `Race` its start delay inside its future (a hedged attempt
//! sleeps, then starts), so that this part knows nothing of Python and is tested on its own.

use std::future::Future;
use std::pin::Pin;

use futures_util::future::select_all;

pub type Racer<'a, T, E> = Pin<Box<dyn Future<Output = Result<Option<T>, E>> + Send + 'a>>;

/// The index and value of the first racer to end with `Ok(Some(_))`; `Ok(None)` when all end
/// with `Ok(None)`; the first `Err` as soon as one fails. Racers still running when it returns
/// are dropped, which abandons whatever they were waiting on.
pub async fn first_some<T, E>(racers: Vec<Racer<'_, T, E>>) -> Result<Option<(usize, T)>, E> {
    let mut positions: Vec<usize> = (0..racers.len()).collect();
    let mut running = racers;
    while !running.is_empty() {
        let (outcome, finished, rest) = select_all(running).await;
        // `select_all` takes the finished one out with `swap_remove`: so do the positions.
        let position = positions.swap_remove(finished);
        match outcome? {
            Some(value) => return Ok(Some((position, value))),
            None => running = rest,
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn run<T>(future: impl Future<Output = T>) -> T {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(future)
    }

    fn after<'a>(ms: u64, value: Option<u32>) -> Racer<'a, u32, String> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(value)
        })
    }

    #[test]
    fn the_first_value_wins_whatever_its_position() {
        let racers = vec![after(60, Some(1)), after(5, Some(2)), after(30, Some(3))];
        assert_eq!(run(first_some(racers)), Ok(Some((1, 2))));
    }

    #[test]
    fn a_racer_without_a_value_does_not_end_the_race() {
        let racers = vec![after(1, None), after(20, Some(7))];
        assert_eq!(run(first_some(racers)), Ok(Some((1, 7))));
    }

    #[test]
    fn positions_stay_right_after_racers_without_a_value_leave() {
        let racers = vec![after(1, None), after(60, Some(1)), after(20, Some(2)), after(5, None)];
        assert_eq!(run(first_some(racers)), Ok(Some((2, 2))));
    }

    #[test]
    fn no_racer_with_a_value_is_none_and_no_racer_at_all_too() {
        assert_eq!(run(first_some(vec![after(1, None), after(2, None)])), Ok(None));
        assert_eq!(run(first_some::<u32, String>(vec![])), Ok(None));
    }

    #[test]
    fn a_failure_ends_the_race_at_once() {
        let failing: Racer<'_, u32, String> = Box::pin(async { Err("broken".to_string()) });
        assert_eq!(run(first_some(vec![after(50, Some(1)), failing])), Err("broken".into()));
    }

    #[test]
    fn the_losers_are_dropped_before_they_finish() {
        let finished = Arc::new(AtomicBool::new(false));
        let flag = finished.clone();
        let slow: Racer<'_, u32, String> = Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            flag.store(true, Ordering::SeqCst);
            Ok(Some(1))
        });
        run(async {
            assert_eq!(first_some(vec![slow, after(1, Some(2))]).await, Ok(Some((1, 2))));
            tokio::time::sleep(Duration::from_millis(300)).await;
        });
        assert!(!finished.load(Ordering::SeqCst));
    }
}
