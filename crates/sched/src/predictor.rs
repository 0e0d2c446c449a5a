//! Moving-window percentile predictor (Bagnoli's thesis "Design and development of a mechanism for
//! low-latency real time audio processing on Linux", §3.4.4).
//!
//! Keeps the last `window` samples and predicts the next one as their
//! `percentile`-th percentile (nearest rank). With percentile 100 this is the
//! window maximum; below 100 it ignores the largest `(100 - p)%` of the window,
//! so a rare spike does not move the prediction.
//!
//! Threads: owned by one [`crate::Controller`] on the driver thread.
//! [`Predictor::new`] allocates; [`push`](Predictor::push),
//! [`predict`](Predictor::predict) and [`flush`](Predictor::flush) never
//! allocate and are O(window): a ring of samples in arrival order plus a
//! sorted copy maintained by binary search; once the window is full, a new
//! sample takes the oldest one's place in the sorted copy with one shift of
//! the values between the two. Samples are held as 32-bit nanoseconds
//! (larger ones as 4.29 s, far beyond any audio period), so that the two
//! buffers of the default 100-sample window take 13 cache lines instead of
//! 26: the driver thread walks every thread's predictor each cycle, and
//! on a busy machine they are out of the caches by then (measured with
//! `cargo run -p resound-sched --release --example controller_cost`).

/// See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Predictor {
    /// Samples (ns) in arrival order; `ring[head]` is the oldest once full.
    ring: Vec<u32>,
    /// Next write position in `ring`.
    head: usize,
    /// The same samples, sorted ascending (capacity `window`, never grown).
    sorted: Vec<u32>,
    window: usize,
    percentile: f64,
}

impl Predictor {
    /// A predictor over the last `window` samples (at least 1) predicting
    /// their `percentile`-th percentile, 0..=100 (clamped; NaN counts as 100).
    /// Allocates two buffers of `window` samples.
    pub fn new(window: usize, percentile: f64) -> Self {
        let window = window.max(1);
        let percentile = if percentile.is_nan() {
            100.0
        } else {
            percentile.clamp(0.0, 100.0)
        };
        Predictor {
            ring: Vec::with_capacity(window),
            head: 0,
            sorted: Vec::with_capacity(window),
            window,
            percentile,
        }
    }

    /// Adds a sample (ns; above `u32::MAX` held as `u32::MAX`), dropping
    /// the oldest when the window is full. No allocation.
    ///
    /// Real-time safe.
    pub fn push(&mut self, sample_ns: u64) {
        let sample = u32::try_from(sample_ns).unwrap_or(u32::MAX);
        if self.ring.len() < self.window {
            self.ring.push(sample);
            let at = self.sorted.partition_point(|&v| v <= sample);
            self.sorted.insert(at, sample);
        } else {
            let old = std::mem::replace(&mut self.ring[self.head], sample);
            self.replace_sorted(old, sample);
        }
        self.head = (self.head + 1) % self.window;
        debug_assert_eq!(self.sorted.len(), self.ring.len());
        debug_assert!(self.sorted.capacity() == self.window && self.ring.capacity() == self.window);
    }

    /// Asks the CPU to start loading the lines the next
    /// [`push`](Self::push) reads (the whole sorted copy, which its binary
    /// searches walk, and the ring's next slot) into its caches. The driver
    /// asks for every thread's at the start of a cycle and pushes after the
    /// look-back, so the loads overlap that work instead of following one
    /// another through the searches. Only a hint: nothing any method
    /// returns depends on it. Real-time safe.
    pub fn prefetch(&self) {
        prefetch_bytes(self.sorted.as_ptr().cast(), self.sorted.capacity() * 4);
        prefetch_bytes(self.ring.as_ptr().wrapping_add(self.head).cast(), 4);
    }

    /// In the sorted copy, `new` takes the place of `old` (which the copy
    /// holds: it holds exactly the ring's values), shifting only the values
    /// between the two by one. Real-time safe.
    fn replace_sorted(&mut self, old: u32, new: u32) {
        let sorted = &mut self.sorted;
        let Ok(from) = sorted.binary_search(&old) else {
            debug_assert!(false, "the sorted copy lost a sample");
            return;
        };
        if new >= old {
            // The values after `old` up to `new` move down one place.
            let to = from + sorted[from + 1..].partition_point(|&v| v <= new);
            sorted.copy_within(from + 1..=to, from);
            sorted[to] = new;
        } else {
            // The values from `new` up to before `old` move up one place.
            let to = sorted[..from].partition_point(|&v| v <= new);
            sorted.copy_within(to..from, to + 1);
            sorted[to] = new;
        }
    }

    /// The nearest-rank percentile of the window: the smallest sample such
    /// that at least `percentile`% of the window is <= it (rank
    /// `ceil(p/100 * n)`, at least 1). `None` when empty.
    ///
    /// Real-time safe.
    pub fn predict(&self) -> Option<u64> {
        self.quantile(self.percentile)
    }

    /// The window's median (nearest rank, the 50th percentile). `None` when
    /// empty.
    ///
    /// Real-time safe.
    pub fn median(&self) -> Option<u64> {
        self.quantile(50.0)
    }

    /// The nearest-rank `p`-th percentile of the window; `None` when empty.
    fn quantile(&self, p: f64) -> Option<u64> {
        let n = self.sorted.len();
        (n > 0).then(|| self.sorted[nearest_rank(p, n) - 1] as u64)
    }

    /// Forgets every sample (a new client joined, an xrun happened).
    ///
    /// Real-time safe.
    pub fn flush(&mut self) {
        self.ring.clear();
        self.sorted.clear();
        self.head = 0;
    }

    /// Number of samples held (at most `window`).
    ///
    /// Real-time safe.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// No samples held.
    ///
    /// Real-time safe.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Whether the window is full.
    ///
    /// Real-time safe.
    pub fn is_full(&self) -> bool {
        self.ring.len() == self.window
    }

    /// Window length (samples).
    pub fn window(&self) -> usize {
        self.window
    }

    /// Percentile predicted (0..=100).
    pub fn percentile(&self) -> f64 {
        self.percentile
    }
}

/// A cache prefetch hint for the `len` bytes from `p`, one per 64-byte
/// line (nothing on other architectures). Any address is fine, a stale or
/// unmapped one included: a prefetch never faults. Real-time safe.
#[inline]
pub fn prefetch_bytes(p: *const i8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for offset in (0..len).step_by(64) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint to the cache: it never faults and
        // neither reads nor writes anything the program can see, whatever
        // the address (`wrapping_add` keeps the arithmetic defined); SSE,
        // which the instruction needs, is part of every x86_64 CPU.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(offset)) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// 1-based nearest rank of the `p`-th percentile among `n` > 0 sorted values.
///
/// Real-time safe.
pub fn nearest_rank(p: f64, n: usize) -> usize {
    // The small tolerance keeps e.g. 0.99 * 100 = 99.00000000000001 at rank 99.
    let r = (p / 100.0 * n as f64 - 1e-9).ceil();
    (r.max(1.0) as usize).min(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(samples: &[u64], window: usize, p: f64) -> Option<u64> {
        let start = samples.len().saturating_sub(window);
        let mut w = samples[start..].to_vec();
        if w.is_empty() {
            return None;
        }
        w.sort_unstable();
        Some(w[nearest_rank(p, w.len()) - 1])
    }

    #[test]
    fn empty_predicts_none() {
        let mut p = Predictor::new(4, 99.0);
        assert_eq!(p.predict(), None);
        assert!(p.is_empty());
        p.push(5);
        assert_eq!(p.predict(), Some(5));
        p.flush();
        assert_eq!(p.predict(), None);
        assert_eq!(p.len(), 0);
    }

    #[test]
    fn nearest_rank_examples() {
        assert_eq!(nearest_rank(99.0, 100), 99);
        assert_eq!(nearest_rank(100.0, 100), 100);
        assert_eq!(nearest_rank(50.0, 4), 2);
        assert_eq!(nearest_rank(50.0, 5), 3);
        assert_eq!(nearest_rank(0.0, 5), 1);
        assert_eq!(nearest_rank(99.0, 10), 10);
    }

    #[test]
    fn window_slides() {
        let mut p = Predictor::new(3, 100.0);
        for s in [10, 1, 1] {
            p.push(s);
        }
        assert_eq!(p.predict(), Some(10));
        p.push(2); // 10 leaves
        assert_eq!(p.predict(), Some(2));
        assert_eq!(p.len(), 3);
        assert!(p.is_full());
    }

    #[test]
    fn percentile_ignores_a_spike() {
        let mut p = Predictor::new(100, 99.0);
        for i in 0..100 {
            p.push(if i == 50 { 1_000_000 } else { 100 });
        }
        assert_eq!(p.predict(), Some(100));
        let mut p = Predictor::new(100, 100.0);
        for i in 0..100 {
            p.push(if i == 50 { 1_000_000 } else { 100 });
        }
        assert_eq!(p.predict(), Some(1_000_000));
    }

    #[test]
    fn samples_beyond_32_bits_are_held_at_the_maximum() {
        let mut p = Predictor::new(2, 100.0);
        p.push(u64::MAX);
        p.push(7);
        assert_eq!(p.predict(), Some(u32::MAX as u64));
        p.push(8);
        p.push(9);
        assert_eq!(p.predict(), Some(9));
    }

    #[test]
    fn clamps_arguments() {
        let p = Predictor::new(0, f64::NAN);
        assert_eq!((p.window(), p.percentile()), (1, 100.0));
        assert_eq!(Predictor::new(3, 250.0).percentile(), 100.0);
        assert_eq!(Predictor::new(3, -1.0).percentile(), 0.0);
    }

    proptest! {
        #[test]
        fn matches_naive_sort(
            window in 1usize..40,
            p in 0.0f64..=100.0,
            samples in proptest::collection::vec(0u64..50, 0..200),
        ) {
            let mut pred = Predictor::new(window, p);
            let ring_ptr = pred.sorted.as_ptr();
            prop_assert_eq!(pred.predict(), None);
            for (i, &s) in samples.iter().enumerate() {
                pred.push(s);
                prop_assert_eq!(pred.len(), (i + 1).min(window));
                prop_assert_eq!(pred.predict(), naive(&samples[..=i], window, p));
            }
            // Never reallocated.
            prop_assert_eq!(pred.sorted.as_ptr(), ring_ptr);
            pred.flush();
            prop_assert!(pred.is_empty());
            prop_assert_eq!(pred.predict(), None);
            for (i, &s) in samples.iter().enumerate().take(5) {
                pred.push(s);
                prop_assert_eq!(pred.predict(), naive(&samples[..=i], window, p));
            }
        }
    }
}
