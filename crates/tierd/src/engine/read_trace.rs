//! The tier's reads timed request by request (`tierd_sys::blocktrace`), kept as a tail
//! over the last seconds (`tierd_core::read_tail`) for health, status and metrics.

use tierd_core::read_tail::ReadTail;
use tierd_sys::blockdev::QueueExtent;
use tierd_sys::blocktrace::ReadLatency;

/// The trace of the tier's request queue, while there is one to trace.
#[derive(Default)]
pub(crate) struct ReadTrace {
    on: Option<(QueueExtent, ReadLatency)>,
    /// The queue that could not be traced, and why.
    off: Option<(Option<QueueExtent>, String)>,
    pub tail: ReadTail,
    /// The tail's p99 as of the last sample: status asks for it more often than it changes.
    pub p99_us: Option<f64>,
}

impl ReadTrace {
    /// Follows the tier's `queue` (starting the trace once per queue; `None` for no tier)
    /// and adds the reads completed since the last call. Returns why tracing could not
    /// start, the first time it cannot for this queue.
    pub fn sample(&mut self, tier: Option<Option<QueueExtent>>, now: f64) -> Option<String> {
        let said = self.follow(tier);
        if let Some((_, trace)) = self.on.as_mut() {
            self.tail.add(now, &trace.take().read_micros);
        }
        self.p99_us = self.tail.p99_us();
        said
    }

    fn follow(&mut self, tier: Option<Option<QueueExtent>>) -> Option<String> {
        let Some(queue) = tier else {
            (self.on, self.off) = (None, None);
            return None;
        };
        let traced = self.on.as_ref().map(|(q, _)| Some(*q));
        let refused = self.off.as_ref().map(|(q, _)| *q);
        if traced == Some(queue) || refused == Some(queue) {
            return None;
        }
        self.on = None;
        let Some(extent) = queue else {
            let why = "no one request queue under the tier device (it spans several devices)".to_string();
            self.off = Some((None, why.clone()));
            return Some(why);
        };
        let own = std::fs::read_to_string("/proc/self/comm").ok();
        match ReadLatency::start(&extent, own.as_deref().map(str::trim)) {
            Ok(trace) => {
                (self.on, self.off) = (Some((extent, trace)), None);
                None
            }
            Err(e) => {
                self.off = Some((queue, e.to_string()));
                Some(e.to_string())
            }
        }
    }

    pub fn is_on(&self) -> bool {
        self.on.is_some()
    }

    /// Why the tier's reads are not timed one by one, when a tier is there and they are not.
    pub fn off_because(&self) -> Option<&str> {
        self.off.as_ref().map(|(_, why)| why.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tier_with_no_one_queue_is_said_once_and_forgotten_with_the_tier() {
        let mut t = ReadTrace::default();
        let why = t.sample(Some(None), 1.0).expect("said the first time");
        assert!(why.contains("several devices"), "{why}");
        assert_eq!(t.sample(Some(None), 2.0), None, "not again for the same tier");
        assert_eq!(t.off_because(), Some(why.as_str()));
        assert!(!t.is_on());
        assert_eq!(t.sample(None, 3.0), None);
        assert_eq!(t.off_because(), None, "no tier, nothing to explain");
    }
}
