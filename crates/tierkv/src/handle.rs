//! Handles of asynchronous requests: [`Handle`] is what `Db::submit_*` returns; the engine
//! keeps the other end (a `Completer`) and completes it exactly once.
//!
//! A handle can be polled ([`Handle::is_ready`], [`Handle::try_take`]), waited on
//! ([`Handle::wait`]) or awaited: it implements [`Future`] with no executor behind it, waking
//! the task's waker from whichever engine thread completes the request.

use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// What a scan returns: `(key, value)` pairs in key order.
pub type ScanEntries = Vec<(Vec<u8>, Vec<u8>)>;

struct Slot<T> {
    result: Option<Result<T>>,
    completed: bool,
    waker: Option<Waker>,
}

struct Shared<T> {
    slot: Mutex<Slot<T>>,
    cv: Condvar,
    /// The engine's count of requests in flight, decremented on completion.
    pending: Option<Arc<AtomicUsize>>,
}

/// The result of an asynchronous request, available once the engine completes it.
#[must_use = "a request's result is only seen through its handle"]
pub struct Handle<T> {
    shared: Arc<Shared<T>>,
}

/// The engine's end of a [`Handle`].
pub(crate) struct Completer<T> {
    shared: Arc<Shared<T>>,
}

/// A connected handle and completer; `pending` (if any) is decremented on completion.
pub(crate) fn channel<T>(pending: Option<Arc<AtomicUsize>>) -> (Handle<T>, Completer<T>) {
    let shared = Arc::new(Shared {
        slot: Mutex::new(Slot {
            result: None,
            completed: false,
            waker: None,
        }),
        cv: Condvar::new(),
        pending,
    });
    (
        Handle {
            shared: Arc::clone(&shared),
        },
        Completer { shared },
    )
}

impl<T> Handle<T> {
    /// A handle completed already (a request finished inline).
    pub(crate) fn ready(result: Result<T>) -> Self {
        let (handle, completer) = channel(None);
        completer.complete(result);
        handle
    }

    /// True once the request has completed (its result may have been taken already).
    pub fn is_ready(&self) -> bool {
        self.shared.slot.lock().completed
    }

    /// The result if the request has completed and it was not taken before.
    pub fn try_take(&mut self) -> Option<Result<T>> {
        self.shared.slot.lock().result.take()
    }

    /// Blocks until the request completes and returns its result.
    pub fn wait(self) -> Result<T> {
        let mut slot = self.shared.slot.lock();
        while !slot.completed {
            self.shared.cv.wait(&mut slot);
        }
        slot.result
            .take()
            .unwrap_or_else(|| Err(Error::invalid("the handle's result was already taken")))
    }
}

impl<T> Future for Handle<T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let mut slot = self.shared.slot.lock();
        if slot.completed {
            return Poll::Ready(
                slot.result.take().unwrap_or_else(|| {
                    Err(Error::invalid("the handle's result was already taken"))
                }),
            );
        }
        match &slot.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => slot.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> std::fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl<T> Completer<T> {
    /// Completes the request. Consumes the completer, so it happens at most once.
    pub fn complete(self, result: Result<T>) {
        self.finish(|| result);
    }

    /// Publishes `result()` unless the request already completed, and wakes its waiters.
    fn finish(&self, result: impl FnOnce() -> Result<T>) {
        let waker = {
            let mut slot = self.shared.slot.lock();
            if slot.completed {
                return;
            }
            // NB: out of the in-flight count before the result is published, so a caller
            // woken by it can submit its next request without being refused as `Busy`.
            if let Some(pending) = &self.shared.pending {
                pending.fetch_sub(1, Ordering::AcqRel);
            }
            slot.result = Some(result());
            slot.completed = true;
            slot.waker.take()
        };
        self.shared.cv.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        // NB: a completer dropped without completing (a bug, or a panic in a worker) must not
        // leave its handle waiting forever.
        self.finish(|| {
            Err(Error::Closed(
                "the request was dropped before it completed".into(),
            ))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Flag(std::sync::atomic::AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn completes_once_and_wakes() {
        let pending = Arc::new(AtomicUsize::new(1));
        let (mut h, c) = channel::<u32>(Some(Arc::clone(&pending)));
        assert!(!h.is_ready());
        let flag = Arc::new(Flag(Default::default()));
        let waker = Waker::from(Arc::clone(&flag));
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut h).poll(&mut cx).is_pending());
        c.complete(Ok(7));
        assert!(flag.0.load(Ordering::SeqCst));
        assert_eq!(pending.load(Ordering::SeqCst), 0);
        assert!(h.is_ready());
        assert_eq!(h.try_take().unwrap().unwrap(), 7);
        assert!(h.try_take().is_none());
    }

    #[test]
    fn dropped_completer_fails_the_handle() {
        let (h, c) = channel::<()>(None);
        drop(c);
        assert!(matches!(h.wait(), Err(Error::Closed(_))));
    }

    #[test]
    fn wait_across_threads() {
        let (h, c) = channel::<String>(None);
        let t = std::thread::spawn(move || c.complete(Ok("done".into())));
        assert_eq!(h.wait().unwrap(), "done");
        t.join().unwrap();
    }
}
