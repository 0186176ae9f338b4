//! A one-line progress bar on stderr, drawn only when stderr is a terminal (so logs and test
//! output stay clean) and at most ten times a second (so drawing never shows in a benchmark).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

const WIDTH: usize = 30;
const REDRAW_EVERY: Duration = Duration::from_millis(100);

/// Progress of one phase of `total` steps.
pub struct Progress {
    label: &'static str,
    total: u64,
    done: u64,
    /// Steps since the clock was last looked at.
    unchecked: u64,
    start: Instant,
    last_draw: Instant,
    enabled: bool,
}

impl Progress {
    /// Starts a phase.
    pub fn new(label: &'static str, total: u64) -> Self {
        let now = Instant::now();
        Progress {
            label,
            total,
            done: 0,
            unchecked: 0,
            start: now,
            last_draw: now,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    /// Records `n` more steps.
    pub fn inc(&mut self, n: u64) {
        self.done += n;
        self.unchecked += n;
        // NB: looking at the clock on every step would cost more than the bar is worth.
        if self.enabled && self.unchecked >= 256 {
            self.unchecked = 0;
            if self.last_draw.elapsed() >= REDRAW_EVERY {
                self.draw();
            }
        }
    }

    /// Erases the bar: the caller prints the phase's result in its place.
    pub fn finish(&mut self) {
        if self.enabled {
            eprint!("\r\x1b[2K");
        }
    }

    fn draw(&mut self) {
        self.last_draw = Instant::now();
        let frac = if self.total == 0 {
            1.0
        } else {
            (self.done as f64 / self.total as f64).min(1.0)
        };
        let filled = (frac * WIDTH as f64) as usize;
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        let rate = self.done as f64 / secs;
        let eta = if rate > 0.0 {
            (self.total.saturating_sub(self.done)) as f64 / rate
        } else {
            0.0
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{:<6} [{}{}] {:>3.0}% {}/{} {:.0} ops/s, eta {:.0} s ",
            self.label,
            "#".repeat(filled),
            "-".repeat(WIDTH - filled),
            frac * 100.0,
            self.done,
            self.total,
            rate,
            eta
        );
        let _ = err.flush();
    }
}
