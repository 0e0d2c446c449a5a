//! The second stage of the period detector, added to the paper's algorithm:
//! once the spectrum has given the period P₀ (the paper's stage, refined
//! below the δf grid), each job index k = round((t − φ) / P₀) (φ the comb's
//! phase) gets the one event nearest the comb, within a quarter period, and
//! the line t = a + P·k is fitted: the median of the pairwise slopes
//! (Theil–Sen) finds the inliers (within 4.5 × the median absolute residual
//! or 2 % of P of it), so that a wake-up delayed by a busy machine or a stray
//! call does not pull the line, and least squares over the inliers gives P.
//! Assignment and fit are repeated with the fitted line (three rounds).
//!
//! Why: the spectrum's peak over n jobs is about 1/(n·P) wide, so from 5 jobs
//! its maximum moves by a few percent with the jitter of a single event; a
//! line fit through the release times weighs every job alike and ignores
//! the outliers, and it finds the period within 1 % from 5 jobs where the
//! spectrum alone does so only from 6 or 7 (the detection experiment). A
//! fit further than 3 % from P₀ is not trusted (P₀ stays).
//!
//! Threads: pure; any thread.

/// The lowest f/k (k ≥ 1, f/k ≥ `f_min`) whose amplitude is at least 75 %
/// of the amplitude at `f`.
pub(super) fn fundamental(t: &[f64], f: f64, f_min: f64) -> f64 {
    let a = super::spectrum::amplitude(t, f);
    let kmax = (f / f_min).floor().max(1.0) as u32;
    (2..=kmax)
        .rev()
        .map(|k| f / k as f64)
        .find(|&g| super::spectrum::amplitude(t, g) >= 0.75 * a)
        .unwrap_or(f)
}

/// Where the comb of frequency `f` has its teeth: the phase a (s) with
/// teeth at a + k/f, where Σ e^{−j2πft} points.
fn comb_phase(t: &[f64], f: f64) -> f64 {
    let w = -2.0 * std::f64::consts::PI * f;
    let (re, im) = t.iter().fold((0.0, 0.0), |(re, im), &x| {
        let (s, c) = (w * x).sin_cos();
        (re + c, im + s)
    });
    -im.atan2(re) / (2.0 * std::f64::consts::PI * f)
}

/// How many jobs of the comb of frequency `f` hold an event of `t`
/// (seconds, ascending) within `window` periods of their tooth. A heartbeat
/// wakes at its release in nearly every job; random instants that happen to
/// line up with some comb leave most of its teeth bare (with one instant per
/// job on average, about 1 − e^(−2·window) of them are near a tooth).
pub(super) fn locked_jobs(t: &[f64], f: f64, window: f64) -> u64 {
    let (a, p) = (comb_phase(t, f), 1.0 / f);
    let mut last_k = None;
    let mut locked = 0;
    for &x in t {
        let k = ((x - a) / p).round();
        if (x - (a + k * p)).abs() <= window * p && last_k != Some(k) {
            locked += 1;
            last_k = Some(k);
        }
    }
    locked
}

/// The fitted frequency (Hz) for instants `t` (seconds, ascending) near
/// frequency `f`, or `None` when too few jobs fit or the fit strays.
pub(super) fn fit_frequency(t: &[f64], f: f64) -> Option<f64> {
    let p0 = 1.0 / f;
    let (mut a, mut p) = (comb_phase(t, f), p0);
    // Assign, fit, and assign again with the fitted line (a period a few
    // percent off drifts by a job's worth over the trace's ends).
    for _ in 0..3 {
        let pts = assign(t, a, p);
        if distinct_jobs(&pts) < 3 {
            return None;
        }
        (a, p) = robust_line(&pts)?;
    }
    ((p - p0).abs() <= 0.05 * p0 && p > 0.0).then(|| 1.0 / p)
}

/// One point per job index k = round((x − a) / p): the event nearest the
/// line, if within a quarter period of it.
fn assign(t: &[f64], a: f64, p: f64) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = Vec::new();
    for &x in t {
        let k = ((x - a) / p).round();
        let r = (x - a - k * p).abs();
        if r > p / 4.0 {
            continue;
        }
        match pts.last_mut() {
            Some(last) if last.0 == k => {
                if r < (last.1 - a - k * p).abs() {
                    last.1 = x;
                }
            }
            _ => pts.push((k, x)),
        }
    }
    pts
}

fn distinct_jobs(pts: &[(f64, f64)]) -> usize {
    let mut ks: Vec<i64> = pts.iter().map(|p| p.0 as i64).collect();
    ks.sort_unstable();
    ks.dedup();
    ks.len()
}

/// x = a + p·k through `pts`: Theil–Sen (median of the pairwise slopes)
/// to find the inliers, which a least-squares line then fits; `(a, p)`.
fn robust_line(pts: &[(f64, f64)]) -> Option<(f64, f64)> {
    let mut slopes = Vec::new();
    for (i, u) in pts.iter().enumerate() {
        for v in &pts[i + 1..] {
            if v.0 != u.0 {
                slopes.push((v.1 - u.1) / (v.0 - u.0));
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    let p = median(&slopes);
    let a = median(&pts.iter().map(|q| q.1 - p * q.0).collect::<Vec<_>>());
    let res: Vec<f64> = pts.iter().map(|q| (q.1 - a - p * q.0).abs()).collect();
    let bound = (4.5 * median(&res)).max(0.02 * p.abs());
    let inliers: Vec<(f64, f64)> = pts
        .iter()
        .zip(&res)
        .filter(|(_, r)| **r <= bound)
        .map(|(q, _)| *q)
        .collect();
    Some(if distinct_jobs(&inliers) >= 3 {
        line(&inliers)
    } else {
        (a, p)
    })
}

/// Least squares x = a + p·k: `(a, p)`.
fn line(pts: &[(f64, f64)]) -> (f64, f64) {
    let n = pts.len() as f64;
    let mk = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let mx = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let skx: f64 = pts.iter().map(|p| (p.0 - mk) * (p.1 - mx)).sum();
    let skk: f64 = pts.iter().map(|p| (p.0 - mk).powi(2)).sum();
    let p = skx / skk;
    (mx - p * mk, p)
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}
