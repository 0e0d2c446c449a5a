//! Re-tuning an attachment to a newly detected period: every thread's
//! reservation period becomes the new period, its budget is scaled to keep
//! its bandwidth (the controller adapts it from there), and the admission
//! ledger is asked again. All or nothing: if the ledger or the kernel refuses
//! any thread, the threads already moved go back to the old period and
//! budget, and the old reservation stays.
//!
//! Threads: the attach loop's thread.

use super::redetect::{differs, Report};
use super::{Attachment, Reserved};

/// `q` scaled from period `t` to period `p` (same bandwidth), within (0, p].
fn scaled(q: u64, t: u64, p: u64) -> u64 {
    ((q as u128 * p as u128 / t.max(1) as u128) as u64).clamp(1024.min(p), p)
}

impl Attachment<'_> {
    /// Acts on a re-detection report: logs it and re-tunes when the period
    /// moved past the tolerance. Returns whether it re-tuned.
    pub(super) fn on_redetect(&mut self, rep: Report) -> bool {
        let t = self.o.period_ns;
        let ms = |ns: u64| ns as f64 / 1e6;
        let d = match rep {
            Report::Failed(e) => {
                eprintln!("resound legacy: re-detection failed: {e}");
                return false;
            }
            Report::Detected(d) => d,
        };
        if let Some(why) = &d.fallback {
            eprintln!("resound legacy: re-detecting with ptrace (it stops the process at each system call): {why}");
        }
        match d.period_ns {
            None => {
                eprintln!(
                    "resound legacy: re-detection: not periodic; keeping period {:.1} ms",
                    ms(t)
                );
                false
            }
            Some(p) if !differs(t, p, self.o.tolerance) => false,
            Some(p) => match self.retune(p) {
                Ok(()) => {
                    eprintln!(
                        "resound legacy: period {:.1} ms -> {:.1} ms (re-tuned)",
                        ms(t),
                        ms(p)
                    );
                    true
                }
                Err(e) => {
                    eprintln!(
                        "resound legacy: period {:.1} ms -> {:.1} ms detected, not re-tuned ({e}); keeping {:.1} ms",
                        ms(t),
                        ms(p),
                        ms(t)
                    );
                    false
                }
            },
        }
    }

    /// Moves every thread to period `p` (see the module docs).
    pub(super) fn retune(&mut self, p: u64) -> Result<(), String> {
        let old = self.o.clone();
        let mut new = self.o.clone();
        new.period_ns = p;
        let t = old.period_ns;
        let mut moved: Vec<(i32, u64)> = Vec::new();
        let mut refusal = None;
        for r in &self.threads {
            let q = scaled(r.budget_ns, t, p);
            if let Err(e) = self.adm.reserve(r.tid, q as f64 / p as f64) {
                refusal = Some(format!("thread {}: {e}", r.tid));
                break;
            }
            if let Err(e) = resound_sched::apply(r.tid, &Reserved::policy(q, &new)) {
                let _ = self.adm.reserve(r.tid, r.budget_ns as f64 / t as f64);
                refusal = Some(format!("thread {}: {e}", r.tid));
                break;
            }
            moved.push((r.tid, q));
        }
        if let Some(e) = refusal {
            for r in self
                .threads
                .iter()
                .filter(|r| moved.iter().any(|m| m.0 == r.tid))
            {
                let _ = resound_sched::apply(r.tid, &Reserved::policy(r.budget_ns, &old));
                let _ = self.adm.reserve(r.tid, r.budget_ns as f64 / t as f64);
            }
            return Err(e);
        }
        self.o = new;
        let mut clamped = Vec::new();
        for (r, (_, q)) in self.threads.iter_mut().zip(&moved) {
            r.budget_ns = *q;
            let b = r.retune(&self.o, *q);
            if b != *q {
                clamped.push((r.tid, b));
            }
        }
        for (tid, b) in clamped {
            self.set_budget(tid, b);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::scaled;

    #[test]
    fn scaling_keeps_the_bandwidth_within_the_period() {
        assert_eq!(scaled(8_000_000, 40_000_000, 20_000_000), 4_000_000);
        assert_eq!(scaled(8_000_000, 20_000_000, 40_000_000), 16_000_000);
        assert_eq!(scaled(30_000_000, 40_000_000, 10_000_000), 7_500_000);
        assert_eq!(scaled(50, 40_000_000, 20_000_000), 1024);
    }
}
