//! Per-node relative deadlines from the graph's critical path.
//!
//! With every node of the graph reserved for itself, giving each node the
//! whole period as its deadline lets the kernel run an upstream node late
//! enough that its downstream nodes can no longer finish in the period. The
//! critical-path deadline of a node is the latest time it may finish so that
//! everything after it still fits:
//!
//! ```text
//! deadline_i = period - (longest path of predicted budgets strictly after i to the graph end)
//! ```
//!
//! clamped to `[predicted_i, period]` (a deadline shorter than the node's
//! own budget could never be met; one longer than the period is meaningless).
//! The graph end is when every sink finished.
//!
//! Threads: a pure function that allocates its result; call it on the
//! control side when the graph or the predictions change and hand the
//! deadlines to the driver (`Controller::set_deadline`).

/// Relative deadlines (ns) for nodes `0..predicted_ns.len()`.
///
/// `predicted_ns[i]` is node i's predicted CPU time per period (ns);
/// `downstream[i]` the indices of the nodes that consume its output. Nodes
/// must be in topological order (every downstream index greater than its
/// node's); indices out of range, and edges that point backwards, are
/// ignored (a backward edge is a feedback connection: its reader ran
/// earlier). A missing `downstream` entry means "no successors".
///
/// ```
/// use resound_sched::critical_path_deadlines;
/// // a -> b -> c with 1, 2, 3 ms in a 10 ms period.
/// let d = critical_path_deadlines(10, &[1, 2, 3], &[vec![1], vec![2], vec![]]);
/// assert_eq!(d, [5, 7, 10]);
/// ```
pub fn critical_path_deadlines(
    period_ns: u64,
    predicted_ns: &[u64],
    downstream: &[Vec<usize>],
) -> Vec<u64> {
    let n = predicted_ns.len();
    // tail[i]: longest sum of budgets along a path strictly after i.
    let mut tail = vec![0u64; n];
    for i in (0..n).rev() {
        let succ = downstream.get(i).map(Vec::as_slice).unwrap_or(&[]);
        tail[i] = succ
            .iter()
            .filter(|&&j| j > i && j < n)
            .map(|&j| predicted_ns[j].saturating_add(tail[j]))
            .max()
            .unwrap_or(0);
    }
    (0..n)
        .map(|i| {
            let own = predicted_ns[i].min(period_ns);
            period_ns.saturating_sub(tail[i]).clamp(own, period_ns)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain() {
        // 0 -> 1 -> 2, 100/200/300 in 1000.
        let d = critical_path_deadlines(1000, &[100, 200, 300], &[vec![1], vec![2], vec![]]);
        assert_eq!(d, [500, 700, 1000]);
    }

    #[test]
    fn parallel_branches() {
        // Two independent chains: 0 -> 1 and 2 -> 3; the longer after-path decides per node.
        let d = critical_path_deadlines(
            1000,
            &[100, 400, 50, 50],
            &[vec![1], vec![], vec![3], vec![]],
        );
        assert_eq!(d, [600, 1000, 950, 1000]);
        // One source fanning out to a short and a long branch.
        let d = critical_path_deadlines(
            1000,
            &[100, 100, 300, 200],
            &[vec![1, 2], vec![], vec![3], vec![]],
        );
        assert_eq!(d, [500, 1000, 800, 1000]);
    }

    #[test]
    fn diamond() {
        //    1 (300)
        //  /         \
        // 0 (100)     3 (100)
        //  \         /
        //    2 (50)
        let ds = [vec![1, 2], vec![3], vec![3], vec![]];
        let d = critical_path_deadlines(1000, &[100, 300, 50, 100], &ds);
        assert_eq!(d, [600, 900, 900, 1000]);
    }

    #[test]
    fn clamped_to_own_budget_and_period() {
        // The path after node 0 exceeds the period, and node 1 leaves 700
        // ns for its own 900: both deadlines are clamped up to their budgets.
        let d = critical_path_deadlines(1000, &[200, 900, 300], &[vec![1], vec![2], vec![]]);
        assert_eq!(d, [200, 900, 1000]);
        // A node predicted above the period gets the period.
        assert_eq!(critical_path_deadlines(1000, &[5000], &[vec![]]), [1000]);
    }

    #[test]
    fn odd_inputs_are_ignored() {
        // Out-of-range and backward edges, missing downstream lists.
        let d = critical_path_deadlines(1000, &[100, 200, 300], &[vec![7, 1], vec![0]]);
        assert_eq!(d, [800, 1000, 1000]);
        assert!(critical_path_deadlines(1000, &[], &[]).is_empty());
    }
}
