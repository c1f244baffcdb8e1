//! The event log: decisions, warnings and errors, kept in memory and echoed to stderr.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::api::Event;

const KEPT: usize = 2000;

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// A bounded log of recent events. Clones share the log, so the API reads it while a
/// control-loop pass holds the engine.
#[derive(Debug, Default, Clone)]
pub struct Events {
    log: Arc<Mutex<VecDeque<Event>>>,
    /// Echo events to stderr (the daemon does; tests of the engine need not).
    pub echo: bool,
}

impl Events {
    pub fn push(&mut self, level: &str, tenant: Option<&str>, message: impl Into<String>) {
        let e = Event {
            time: now_secs(),
            level: level.to_string(),
            tenant: tenant.map(str::to_string),
            message: message.into(),
        };
        if self.echo {
            // Timed to the millisecond: a log file is read beside the tenants' own
            // timed output (when did tierd see the wake-up, when did it prefetch).
            let who = e.tenant.as_deref().map(|t| format!(" [{t}]")).unwrap_or_default();
            let at = UNIX_EPOCH + std::time::Duration::from_secs_f64(e.time);
            eprintln!("tierd: {} {}{who}: {}", humantime::format_rfc3339_millis(at), e.level, e.message);
        }
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if log.len() == KEPT {
            log.pop_front();
        }
        log.push_back(e);
    }

    pub fn info(&mut self, tenant: Option<&str>, message: impl Into<String>) {
        self.push("info", tenant, message);
    }

    pub fn warn(&mut self, tenant: Option<&str>, message: impl Into<String>) {
        self.push("warning", tenant, message);
    }

    pub fn decision(&mut self, tenant: Option<&str>, message: impl Into<String>) {
        self.push("decision", tenant, message);
    }

    pub fn recent(&self, n: usize) -> Vec<Event> {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.iter().rev().take(n).rev().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_most_recent() {
        let mut e = Events::default();
        for i in 0..KEPT + 5 {
            e.info(None, format!("{i}"));
        }
        let r = e.recent(3);
        assert_eq!(r.len(), 3);
        assert_eq!(r[2].message, format!("{}", KEPT + 4));
        assert_eq!(e.recent(usize::MAX).len(), KEPT);
    }
}
