//! The background garbage collector: a thread owned by [`super::ZoneFs`] that empties the
//! emptiest full zones while fewer than the high watermark of data zones are free, so that
//! writers rarely collect themselves.
//!
//! Pacing keeps foreground writes first:
//! - copies are held to a byte budget per second while more than one zone above the low
//!   watermark is free; closer to it the collector runs flat out, since the next step is
//!   writers collecting in the foreground;
//! - while writers wait for a zone (every zone they could take is held), the collector does
//!   not start a zone, as its copies would hold a zone too.

use super::{GcMode, Inner};
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often an idle collector looks at the free zones without being woken.
const IDLE_POLL: Duration = Duration::from_millis(100);
/// How long the collector steps aside while writers wait for a zone.
const YIELD_TO_WRITERS: Duration = Duration::from_millis(2);
/// Pause after a failed pass (an I/O error): the failure is the writers' to report.
const AFTER_ERROR: Duration = Duration::from_millis(50);
/// The longest single pacing sleep, so a large copy does not stall the collector for long.
const MAX_PACING_SLEEP: Duration = Duration::from_millis(500);

/// Wakes, stops and observes the collector thread.
#[derive(Default)]
pub(super) struct GcSignal {
    state: Mutex<SignalState>,
    changed: Condvar,
}

#[derive(Default)]
struct SignalState {
    /// Work may be waiting: set by writers taking a zone below the high watermark.
    woken: bool,
    /// The file system is going away.
    stop: bool,
    /// Passes finished (a pass ends when the free zones reach the high watermark, nothing is
    /// collectable or an error stopped it).
    passes: u64,
}

impl GcSignal {
    /// Asks the collector to look at the free zones now.
    pub fn wake(&self) {
        let mut s = self.state.lock();
        if !s.woken {
            s.woken = true;
            self.changed.notify_all();
        }
    }

    fn stop(&self) {
        self.state.lock().stop = true;
        self.changed.notify_all();
    }

    fn stopped(&self) -> bool {
        self.state.lock().stop
    }

    /// Waits until woken or `IDLE_POLL` passed; false once stopped.
    fn wait_for_work(&self) -> bool {
        let mut s = self.state.lock();
        if !s.woken && !s.stop {
            self.changed.wait_for(&mut s, IDLE_POLL);
        }
        s.woken = false;
        !s.stop
    }

    /// Sleeps `d` unless stopped first; false once stopped.
    fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut s = self.state.lock();
        while !s.stop && Instant::now() < deadline {
            self.changed.wait_until(&mut s, deadline);
        }
        !s.stop
    }

    fn pass_done(&self) {
        self.state.lock().passes += 1;
        self.changed.notify_all();
    }

    /// Wakes the collector and waits until it has finished a pass that started after the
    /// call (or `timeout` passed).
    #[cfg(test)]
    pub fn run_pass(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut s = self.state.lock();
        // The pass under way may have looked at the zones before the call: wait for two ends.
        let target = s.passes + 2;
        s.woken = true;
        self.changed.notify_all();
        while s.passes < target && !s.stop && Instant::now() < deadline {
            self.changed.wait_until(&mut s, deadline);
        }
    }
}

/// The collector thread; stopped and joined when dropped.
pub(super) struct BackgroundGc {
    signal: Arc<GcSignal>,
    thread: Option<JoinHandle<()>>,
}

impl BackgroundGc {
    /// Starts the collector of `fs`.
    pub fn start(fs: Arc<Inner>) -> std::io::Result<BackgroundGc> {
        let signal = Arc::clone(&fs.gc_signal);
        let thread = std::thread::Builder::new()
            .name("tierkv-zone-gc".into())
            .spawn(move || run(&fs))?;
        Ok(BackgroundGc {
            signal,
            thread: Some(thread),
        })
    }
}

impl Drop for BackgroundGc {
    fn drop(&mut self) {
        self.signal.stop();
        if let Some(t) = self.thread.take() {
            // NB: a panic in the collector has already been reported by the panic hook.
            let _ = t.join();
        }
    }
}

/// The collector's loop: a pass whenever free zones are below the high watermark.
fn run(fs: &Inner) {
    let signal = &fs.gc_signal;
    while signal.wait_for_work() {
        collect_until_high_watermark(fs, signal);
        signal.pass_done();
    }
}

/// Empties zones, one at a time and paced, until the high watermark of free zones is reached,
/// nothing is collectable, or the file system stops.
fn collect_until_high_watermark(fs: &Inner, signal: &GcSignal) {
    let high = fs.config.gc_high_free_zones as usize;
    let mut pacer = Pacer::new(fs.config.gc_bytes_per_sec);
    loop {
        let free = fs.free_zones();
        if free >= high || signal.stopped() {
            return;
        }
        let urgent = free <= fs.config.gc_low_free_zones as usize + 1;
        if !urgent && fs.writers_waiting.load(Ordering::Acquire) > 0 {
            if !signal.sleep(YIELD_TO_WRITERS) {
                return;
            }
            continue;
        }
        let copied_before = fs.counters.gc_background.load(Ordering::Relaxed);
        match fs.collect(1, GcMode::Background) {
            Ok(0) => return,
            Ok(_) => {}
            Err(_) => {
                signal.sleep(AFTER_ERROR);
                return;
            }
        }
        let copied = fs.counters.gc_background.load(Ordering::Relaxed) - copied_before;
        if !urgent && !signal.sleep(pacer.delay_after(copied)) {
            return;
        }
    }
}

/// A bytes-per-second budget over one pass.
struct Pacer {
    bytes_per_sec: u64,
    start: Instant,
    bytes: u64,
}

impl Pacer {
    /// A budget of `bytes_per_sec` (0: none).
    fn new(bytes_per_sec: u64) -> Pacer {
        Pacer {
            bytes_per_sec,
            start: Instant::now(),
            bytes: 0,
        }
    }

    /// How long to wait after copying `n` more bytes to stay within the budget.
    fn delay_after(&mut self, n: u64) -> Duration {
        self.bytes += n;
        if self.bytes_per_sec == 0 {
            return Duration::ZERO;
        }
        let due = Duration::from_secs_f64(self.bytes as f64 / self.bytes_per_sec as f64);
        due.saturating_sub(self.start.elapsed())
            .min(MAX_PACING_SLEEP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pacer_spreads_copies_over_the_budget() {
        let mut p = Pacer::new(1 << 20);
        let d = p.delay_after(256 << 10);
        assert!(
            d > Duration::from_millis(200) && d <= Duration::from_millis(250),
            "{d:?}"
        );
        assert_eq!(Pacer::new(0).delay_after(1 << 30), Duration::ZERO);
        let capped = Pacer::new(1).delay_after(1 << 20);
        assert_eq!(capped, MAX_PACING_SLEEP);
    }

    #[test]
    fn a_stopped_signal_ends_waits_at_once() {
        let s = GcSignal::default();
        s.stop();
        let t = Instant::now();
        assert!(!s.sleep(Duration::from_secs(5)));
        assert!(!s.wait_for_work());
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
