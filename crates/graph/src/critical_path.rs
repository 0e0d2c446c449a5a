//! The critical path of a compiled graph, and the relative deadline it
//! gives each client under `--deadlines critical-path`.
//!
//! A client is woken `head` into the cycle: the longest chain of work
//! before it (the driver's included), and must leave `tail` for the longest
//! chain of work after it. SCHED_DEADLINE counts a relative deadline from the
//! wake-up, so for the whole chain to finish inside the period the client's
//! relative deadline is
//!
//! ```text
//! deadline = period - head - tail
//! ```
//!
//! clamped to `[own work, period]` (a deadline shorter than the client's own
//! budget could never be met; one longer than the period is meaningless).
//! Only forward edges count: edges to nodes earlier in the activation order
//! (a sink signalling the driver, node 0) and edges to nodes out of range are
//! ignored; feedback connections are not edges of the compiled graph.
//!
//! Threads: the server's housekeeping thread, off the real-time path (it
//! allocates its result).

use crate::Compiled;

/// Per node: the longest chain of work before it and after it (ns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriticalPath {
    /// `head[i]`: longest sum of work along a path ending just before node i.
    head: Vec<u64>,
    /// `tail[i]`: longest sum of work along a path starting just after node i.
    tail: Vec<u64>,
}

impl CriticalPath {
    /// The critical path of a compiled graph, with `work[slot]` the expected
    /// CPU time per cycle (ns) of the client in `slot` (slot 0: the driver).
    pub fn of(compiled: &Compiled, work: &[u64]) -> CriticalPath {
        let down = compiled.downstream();
        CriticalPath::new(&compiled.order, work, |slot| {
            down.get(slot as usize).map_or(&[][..], |d| &d[..])
        })
    }

    /// The critical path over nodes `0..work.len()` visited in `order` (a
    /// topological order), `downstream(i)` the nodes that consume node i's
    /// output. Nodes missing from `order` have empty head and tail.
    pub fn new<'a>(
        order: &[u32],
        work: &[u64],
        downstream: impl Fn(u32) -> &'a [u32],
    ) -> CriticalPath {
        let n = work.len();
        let visited: Vec<usize> = order
            .iter()
            .map(|&u| u as usize)
            .filter(|&u| u < n)
            .collect();
        let mut position = vec![usize::MAX; n];
        for (p, &u) in visited.iter().enumerate() {
            position[u] = p;
        }
        // Forward edges only: in range, and later in the order.
        let forward: Vec<Vec<usize>> = (0..n)
            .map(|u| {
                downstream(u as u32)
                    .iter()
                    .map(|&d| d as usize)
                    .filter(|&d| d < n && position[d] != usize::MAX && position[d] > position[u])
                    .collect()
            })
            .collect();
        let mut head = vec![0u64; n];
        for &u in &visited {
            let reach = head[u].saturating_add(work[u]);
            for &d in &forward[u] {
                head[d] = head[d].max(reach);
            }
        }
        let mut tail = vec![0u64; n];
        for &u in visited.iter().rev() {
            tail[u] = forward[u]
                .iter()
                .map(|&d| work[d].saturating_add(tail[d]))
                .max()
                .unwrap_or(0);
        }
        CriticalPath { head, tail }
    }

    /// Longest chain of work before `node` (ns); 0 for unknown nodes.
    pub fn head(&self, node: u32) -> u64 {
        self.head.get(node as usize).copied().unwrap_or(0)
    }

    /// Longest chain of work after `node` (ns); 0 for unknown nodes.
    pub fn tail(&self, node: u32) -> u64 {
        self.tail.get(node as usize).copied().unwrap_or(0)
    }

    /// The relative deadline (ns) of `node`, whose own work is `work_ns`, in
    /// a period of `period_ns`: `period - head - tail`, clamped to
    /// `[max(work, 1), period]` (the lower bound itself capped at the period).
    pub fn deadline(&self, node: u32, period_ns: u64, work_ns: u64) -> u64 {
        let before_and_after = self.head(node).saturating_add(self.tail(node));
        let lowest = work_ns.max(1).min(period_ns);
        period_ns
            .saturating_sub(before_and_after)
            .clamp(lowest, period_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes `0..work.len()` in index order, `down[i]` node i's consumers.
    fn path(work: &[u64], down: &[Vec<u32>]) -> CriticalPath {
        let order: Vec<u32> = (0..work.len() as u32).collect();
        CriticalPath::new(&order, work, |u| {
            down.get(u as usize).map_or(&[][..], Vec::as_slice)
        })
    }

    fn deadlines(cp: &CriticalPath, period: u64, work: &[u64]) -> Vec<u64> {
        (0..work.len())
            .map(|i| cp.deadline(i as u32, period, work[i]))
            .collect()
    }

    fn heads(cp: &CriticalPath, n: u32) -> Vec<u64> {
        (0..n).map(|i| cp.head(i)).collect()
    }

    fn tails(cp: &CriticalPath, n: u32) -> Vec<u64> {
        (0..n).map(|i| cp.tail(i)).collect()
    }

    #[test]
    fn chain() {
        // 0 -> 1 -> 2, 100/200/300 in 1000.
        let w = [100, 200, 300];
        let cp = path(&w, &[vec![1], vec![2], vec![]]);
        assert_eq!(heads(&cp, 3), [0, 100, 300]);
        assert_eq!(tails(&cp, 3), [500, 300, 0]);
        assert_eq!(deadlines(&cp, 1000, &w), [500, 600, 700]);
    }

    /// The case where the two former formulas disagreed: `period - tail`
    /// (the latest finish time, counted from the cycle start) gave the last
    /// node of a chain the whole period, but SCHED_DEADLINE counts from the
    /// wake-up, which comes `head` into the cycle; so the last node must get
    /// `period - head`, below the period.
    #[test]
    fn the_last_node_of_a_chain_gets_less_than_the_period() {
        let w = [100, 200, 300];
        let cp = path(&w, &[vec![1], vec![2], vec![]]);
        let latest_finish: Vec<u64> = (0..3).map(|i| 1000 - cp.tail(i)).collect();
        assert_eq!(latest_finish, [500, 700, 1000], "the former formula");
        assert_eq!(cp.deadline(2, 1000, 300), 700);
        assert!((0..3).all(|i| cp.deadline(i, 1000, w[i as usize]) < 1000));
    }

    #[test]
    fn parallel_branches() {
        // Two independent chains: 0 -> 1 and 2 -> 3; the longer after-path decides per node.
        let w = [100, 400, 50, 50];
        let cp = path(&w, &[vec![1], vec![], vec![3], vec![]]);
        assert_eq!(heads(&cp, 4), [0, 100, 0, 50]);
        assert_eq!(tails(&cp, 4), [400, 0, 50, 0]);
        assert_eq!(deadlines(&cp, 1000, &w), [600, 900, 950, 950]);
        // One source fanning out to a short and a long branch.
        let w = [100, 100, 300, 200];
        let cp = path(&w, &[vec![1, 2], vec![], vec![3], vec![]]);
        assert_eq!(heads(&cp, 4), [0, 100, 100, 400]);
        assert_eq!(tails(&cp, 4), [500, 0, 200, 0]);
        assert_eq!(deadlines(&cp, 1000, &w), [500, 900, 700, 600]);
    }

    #[test]
    fn diamond() {
        //    1 (300)
        //  /         \
        // 0 (100)     3 (100)
        //  \         /
        //    2 (50)
        let w = [100, 300, 50, 100];
        let cp = path(&w, &[vec![1, 2], vec![3], vec![3], vec![]]);
        assert_eq!(heads(&cp, 4), [0, 100, 100, 400]);
        assert_eq!(tails(&cp, 4), [400, 100, 100, 0]);
        assert_eq!(deadlines(&cp, 1000, &w), [600, 800, 800, 600]);
    }

    #[test]
    fn clamped_to_own_budget_and_period() {
        // The path after node 0 exceeds the period, node 1 leaves 500 ns
        // for its own 900, and node 2 is woken after the period: every
        // deadline is clamped up to its budget.
        let w = [200, 900, 300];
        let cp = path(&w, &[vec![1], vec![2], vec![]]);
        assert_eq!(tails(&cp, 3), [1200, 300, 0]);
        assert_eq!(deadlines(&cp, 1000, &w), [200, 900, 300]);
        // A node predicted above the period gets the period.
        let cp = path(&[5000], &[vec![]]);
        assert_eq!(deadlines(&cp, 1000, &[5000]), [1000]);
        // A node predicted at nothing still gets a deadline of at least 1 ns.
        let cp = path(&[0, 2000], &[vec![1], vec![]]);
        assert_eq!(cp.deadline(0, 1000, 0), 1);
    }

    #[test]
    fn odd_inputs_are_ignored() {
        // Out-of-range and backward edges, missing downstream lists.
        let w = [100, 200, 300];
        let cp = path(&w, &[vec![7, 1], vec![0]]);
        assert_eq!(heads(&cp, 3), [0, 100, 0]);
        assert_eq!(tails(&cp, 3), [200, 0, 0]);
        assert_eq!(deadlines(&cp, 1000, &w), [800, 900, 1000]);
        let cp = path(&[], &[]);
        assert_eq!(cp, CriticalPath::new(&[], &[], |_| &[]));
        assert_eq!((cp.head(0), cp.tail(0)), (0, 0));
    }
}
