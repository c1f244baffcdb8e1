//! The engine as tierd's threads share it. The control loop and requests that change
//! things take the engine's lock; a reader (status, metrics, events, history) takes it
//! when it is free within a moment, and is otherwise answered from the board: the status
//! the last pass posted, with what holds the engine and for how long. A pass may move
//! pages for an interval (longer on a device that hangs); a dashboard must not wait.
//! A request that changes things is counted while it waits, and a pass's moves yield
//! to it (decision 012).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use crate::api::{Busy, Event, Status};
use crate::engine::Engine;
use crate::events::Events;
use crate::history::{History, Point};

/// How long a reader waits for the engine before it takes the posted status: the
/// half-second watch holds it for milliseconds, a pass for up to an interval.
const READER_WAIT: Duration = Duration::from_millis(200);

/// What readers are answered from while the engine is busy.
pub struct Board {
    interval: Duration,
    /// The engine's own event log and history (clones share them).
    events: Events,
    history: History,
    posted: Mutex<Posted>,
    /// API requests waiting for the engine's lock.
    waiting: AtomicUsize,
}

#[derive(Default)]
struct Posted {
    /// The status last measured, and when.
    status: Option<(Status, Instant)>,
    /// What holds the engine, and since when.
    busy: Option<(String, Instant)>,
}

impl Board {
    pub fn new(interval: Duration, events: Events, history: History) -> Board {
        Board { interval, events, history, posted: Mutex::default(), waiting: AtomicUsize::new(0) }
    }

    /// Whether an API request waits for the engine: a pass's page moves then stop
    /// starting batches, so the request waits a batch, not a pass.
    pub fn request_waiting(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }

    fn posted(&self) -> MutexGuard<'_, Posted> {
        self.posted.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Posts a status just measured.
    pub fn post(&self, status: Status) {
        self.posted().status = Some((status, Instant::now()));
    }

    /// Marks the engine busy with `doing` until the mark is dropped.
    fn mark(self: &Arc<Self>, doing: String) -> Mark {
        self.posted().busy = Some((doing, Instant::now()));
        Mark(Arc::clone(self))
    }

    /// The posted status, told what holds the engine; `None` before the first post.
    fn busy_status(&self) -> Option<Status> {
        let posted = self.posted();
        let (status, at) = posted.status.as_ref()?;
        // Every holder marks its work; should one not, it is as old as the figures.
        let (doing, since) = posted.busy.clone().unwrap_or_else(|| ("other work".into(), *at));
        let busy =
            Busy { doing, for_secs: since.elapsed().as_secs_f64(), figures_age_secs: at.elapsed().as_secs_f64() };
        let mut s = status.clone();
        s.uptime_secs += busy.figures_age_secs;
        s.health.extend(tierd_core::health::engine_busy_check(&busy.doing, busy.for_secs, self.interval.as_secs_f64()));
        s.busy = Some(busy);
        Some(s)
    }
}

/// The engine is busy while this lives.
struct Mark(Arc<Board>);

impl Drop for Mark {
    fn drop(&mut self) {
        self.0.posted().busy = None;
    }
}

/// The engine and its board, as the API's and the control loop's threads hold them.
#[derive(Clone)]
pub struct Shared {
    engine: Arc<Mutex<Engine>>,
    board: Arc<Board>,
}

impl Shared {
    /// Shares `engine`, its status posted first, so no reader waits for the first pass.
    pub fn new(mut engine: Engine) -> Shared {
        engine.post_status();
        let board = engine.board();
        Shared { engine: Arc::new(Mutex::new(engine)), board }
    }

    fn lock(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the engine; readers meanwhile hear it is busy with `doing`.
    pub fn work<T>(&self, doing: impl Into<String>, f: impl FnOnce(&mut Engine) -> T) -> T {
        let mut e = self.lock();
        let _mark = self.board.mark(doing.into());
        f(&mut e)
    }

    /// [`Shared::work`] for an API request: counted as waiting until it holds the
    /// engine, so a pass's moves yield to it.
    pub fn request<T>(&self, doing: impl Into<String>, f: impl FnOnce(&mut Engine) -> T) -> T {
        self.board.waiting.fetch_add(1, Ordering::Relaxed);
        let mut e = self.lock();
        self.board.waiting.fetch_sub(1, Ordering::Relaxed);
        let _mark = self.board.mark(doing.into());
        f(&mut e)
    }

    /// A fresh status when the engine is free within [`READER_WAIT`], else the posted one.
    pub fn status(&self) -> Status {
        if let Some(mut e) = self.try_lock_for(READER_WAIT) {
            let _mark = self.board.mark("a status request".into());
            return e.status();
        }
        self.board.busy_status().unwrap_or_else(|| self.lock().status())
    }

    pub fn events(&self, n: usize) -> Vec<Event> {
        self.board.events.recent(n)
    }

    pub fn history(&self, since: Option<f64>) -> Vec<Point> {
        self.board.history.since(since)
    }

    fn try_lock_for(&self, wait: Duration) -> Option<MutexGuard<'_, Engine>> {
        let end = Instant::now() + wait;
        loop {
            match self.engine.try_lock() {
                Ok(e) => return Some(e),
                Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
                Err(TryLockError::WouldBlock) if Instant::now() >= end => return None,
                Err(TryLockError::WouldBlock) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::engine::fixture::{self, FakeCgroups};
    use tierd_core::health::Colour;

    fn shared(dir: &std::path::Path) -> Shared {
        let cg = Arc::new(FakeCgroups { base: dir.to_path_buf(), ..Default::default() });
        Shared::new(fixture::engine(dir, cg, ""))
    }

    #[test]
    fn a_reader_is_answered_from_the_board_while_a_pass_holds_the_engine() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path());
        let (held, holding) = mpsc::channel();
        let (done, finish) = mpsc::channel::<()>();
        let pass = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                shared.work("a control-loop pass", |e| {
                    e.events.info(None, "moving pages");
                    held.send(()).unwrap();
                    finish.recv().unwrap();
                })
            })
        };
        holding.recv().unwrap();
        let (answer, answered) = mpsc::channel();
        let reader = shared.clone();
        std::thread::spawn(move || {
            let _ = answer.send(reader.status());
        });
        let s = answered.recv_timeout(READER_WAIT * 10).expect("answered while the pass holds the engine");
        let busy = s.busy.expect("told the engine is busy, from the status posted at the start");
        assert_eq!(busy.doing, "a control-loop pass");
        assert!(busy.figures_age_secs >= busy.for_secs, "the figures predate the pass");
        let said: Vec<String> = shared.events(10).into_iter().map(|e| e.message).collect();
        assert!(said.contains(&"moving pages".to_string()), "the pass's events are read meanwhile: {said:?}");
        done.send(()).unwrap();
        pass.join().unwrap();
        assert_eq!(shared.status().busy, None, "free again: fresh");
    }

    #[test]
    fn a_pass_held_past_three_intervals_turns_health_yellow() {
        let dir = tempfile::tempdir().unwrap();
        let status = shared(dir.path()).status();
        let board = Arc::new(Board::new(Duration::from_millis(10), Events::default(), History::default()));
        board.post(status);
        let mark = board.mark("a `demote` request".into());
        std::thread::sleep(Duration::from_millis(40));
        let s = board.busy_status().unwrap();
        let engine = s.health.iter().find(|c| c.name == "engine").expect("an engine check");
        assert_eq!(engine.colour, Colour::Yellow, "{engine:?}");
        assert!(engine.message.contains("busy with a `demote` request"), "{}", engine.message);
        drop(mark);
        let s = board.busy_status().unwrap();
        assert_eq!(s.busy.unwrap().doing, "other work", "the mark is gone with its work");
    }
}
