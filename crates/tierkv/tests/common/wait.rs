//! Bounded waits: a watchdog around a test body, polling a condition, waiting on a `Handle`
//! (by polling, or as a future on a minimal executor), and retrying a submit while the engine is
//! busy. Each fails the test instead of hanging it.

use super::opts::MODES;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};
use tierkv::{Error, Handle, Result, WalMode};

/// How long a whole test body may run before the watchdog calls it a hang.
pub const TEST_LIMIT: Duration = Duration::from_secs(60);
/// How long one handle may stay pending before the test calls it lost.
pub const HANDLE_LIMIT: Duration = Duration::from_secs(20);

/// Runs `f` on its own thread (named `what`) and fails the test if it does not finish within
/// `limit`; a panic in `f` is re-raised here.
pub fn within<T: Send + 'static>(
    what: &str,
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let body = thread::Builder::new()
        .name(what.to_string())
        .spawn(move || {
            let v = f();
            let _ = tx.send(());
            v
        })
        .expect("spawn test body");
    match rx.recv_timeout(limit) {
        Ok(()) => body.join().expect("test body"),
        Err(mpsc::RecvTimeoutError::Disconnected) => match body.join() {
            Ok(v) => v,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hung for more than {limit:?}"),
    }
}

/// Runs `run` once per WAL mode, each under the watchdog ([`within`], [`TEST_LIMIT`]) named
/// `name` and the mode.
pub fn each_mode(name: &str, run: impl Fn(WalMode) + Copy + Send + 'static) {
    for mode in MODES {
        within(&format!("{name} {mode:?}"), TEST_LIMIT, move || run(mode));
    }
}

/// Polls `f` every 50 ms until it returns `Some` or `limit` passes.
pub fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `is_ready` (backing off from 10 µs to 5 ms) until the handle completes or `limit`
/// passes; false if it is still pending.
pub fn ready_within<T>(h: &Handle<T>, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut nap = Duration::from_micros(10);
    while !h.is_ready() {
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(5));
    }
    true
}

/// Waits until the handle completes, failing the test if it is still pending after
/// [`HANDLE_LIMIT`].
pub fn wait_ready<T>(h: &Handle<T>, what: &str) {
    assert!(
        ready_within(h, HANDLE_LIMIT),
        "{what}: handle still pending after {HANDLE_LIMIT:?}"
    );
}

/// The handle's result once it completes within `limit`; `None` if it is still pending.
pub fn poll_for<T>(h: &mut Handle<T>, limit: Duration) -> Option<Result<T>> {
    if ready_within(h, limit) {
        h.try_take()
    } else {
        None
    }
}

/// [`wait_ready`], then takes the result.
pub fn wait_bounded<T>(mut h: Handle<T>, what: &str) -> Result<T> {
    wait_ready(&h, what);
    h.try_take()
        .unwrap_or_else(|| panic!("{what}: ready handle without a result"))
}

/// A waker that unparks the thread blocked in `block_on` and counts its wakes.
struct ThreadWaker {
    thread: thread::Thread,
    woken: AtomicBool,
    wakes: AtomicU64,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.thread.unpark();
    }
}

/// What `block_on_counted` saw: the output, how often the future was polled, how often it was
/// woken.
pub struct Blocked<T> {
    pub out: T,
    pub polls: u64,
    pub wakes: u64,
}

/// Runs a future to completion on this thread, parking between polls. A future that returns
/// `Pending` must wake the waker within [`HANDLE_LIMIT`], else the test fails (a lost wake-up).
pub fn block_on_counted<F: Future>(fut: F) -> Blocked<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let state = Arc::new(ThreadWaker {
        thread: thread::current(),
        woken: AtomicBool::new(false),
        wakes: AtomicU64::new(0),
    });
    let waker = Waker::from(Arc::clone(&state));
    let mut cx = Context::from_waker(&waker);
    let mut polls = 0;
    loop {
        state.woken.store(false, Ordering::SeqCst);
        polls += 1;
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return Blocked {
                out,
                polls,
                wakes: state.wakes.load(Ordering::SeqCst),
            };
        }
        let deadline = Instant::now() + HANDLE_LIMIT;
        while !state.woken.load(Ordering::SeqCst) {
            let now = Instant::now();
            assert!(
                now < deadline,
                "a pending future was not woken within {HANDLE_LIMIT:?}"
            );
            thread::park_timeout(deadline - now);
        }
    }
}

/// [`block_on_counted`], keeping only the output.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    block_on_counted(fut).out
}

/// Retries a submit while the engine answers `Busy`, for up to [`HANDLE_LIMIT`].
pub fn try_submit<T>(mut f: impl FnMut() -> Result<T>) -> Result<T> {
    let deadline = Instant::now() + HANDLE_LIMIT;
    loop {
        match f() {
            Err(Error::Busy(_)) if Instant::now() < deadline => thread::yield_now(),
            r => return r,
        }
    }
}

/// [`try_submit`], failing the test on an error.
pub fn submit<T>(what: &str, f: impl FnMut() -> Result<T>) -> T {
    try_submit(f).unwrap_or_else(|e| panic!("{what}: submit: {e}"))
}
