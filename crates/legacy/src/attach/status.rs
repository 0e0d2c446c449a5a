//! The attach loop's live status line: period, total bandwidth, late
//! windows, deadline misses, re-tunes, and per thread its budget, mean
//! response time and misses; as text or as one JSON object per line.
//!
//! Threads: the attach loop's thread.

use super::{Attachment, Summary};

impl Attachment<'_> {
    /// The status line at `t` seconds after attaching.
    pub(super) fn status_line(&self, t: f64, s: &Summary) -> String {
        let bw = self.bandwidth();
        let (late, misses) = self.late_and_misses();
        if self.o.json {
            let th: Vec<String> = self
                .threads
                .iter()
                .map(|r| {
                    format!(
                        "{{\"tid\":{},\"budget_ns\":{},\"response_ns\":{},\"late\":{},\"misses\":{}}}",
                        r.tid,
                        r.budget_ns,
                        r.response_ns.map_or("null".into(), |v| v.to_string()),
                        r.late,
                        r.misses
                    )
                })
                .collect();
            format!(
                "{{\"t\":{t:.3},\"period_ns\":{},\"bandwidth\":{bw:.4},\"late\":{late},\"misses\":{misses},\"retunes\":{},\"changes\":{},\"threads\":[{}]}}",
                self.o.period_ns,
                s.retunes,
                s.changes,
                th.join(",")
            )
        } else {
            let per: Vec<String> = self
                .threads
                .iter()
                .map(|r| {
                    format!(
                        "{}:{:.2}ms/{}/{}",
                        r.tid,
                        r.budget_ns as f64 / 1e6,
                        r.response_ns
                            .map_or("-".into(), |v| format!("{:.1}ms", v as f64 / 1e6)),
                        r.misses
                    )
                })
                .collect();
            format!(
                "{t:7.1}s  T {:.1} ms  bandwidth {bw:.3}  misses {misses}  late windows {late}  budget/response/misses {}",
                self.o.period_ns as f64 / 1e6,
                per.join(" ")
            )
        }
    }
}
