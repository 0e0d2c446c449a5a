//! The sampled spectrum of a Dirac comb, its candidate peaks, the paper's
//! choice among them and the sub-grid refinement of the chosen peak (then
//! the least-squares fit of `super::fit`).

use super::{Estimate, Params, Peak, Rule};

/// Below this many events the threshold K × mean says little: the spectrum
/// of 5 instants over [10, 200] Hz has a mean near a fifth of its maximum,
/// so a single late wake-up pulls every peak under 2.5 × the mean. There
/// (with the fit on) the spectrum's maximum is taken as the candidate
/// ([`Rule::WeakPeak`]); the confidence test, which weighs the peak against
/// what random instants would show, still decides whether it is periodic.
const SHORT: usize = 16;

/// |Σ e^{−j2πf t_i}| for instants `t` in seconds.
pub fn amplitude(t: &[f64], f: f64) -> f64 {
    let w = -2.0 * std::f64::consts::PI * f;
    let (mut re, mut im) = (0.0, 0.0);
    for &ti in t {
        let (s, c) = (w * ti).sin_cos();
        re += c;
        im += s;
    }
    re.hypot(im)
}

/// The spectrum sampled on the grid f_min, f_min + δf, ..., ≤ f_max:
/// `(frequency Hz, amplitude)` pairs.
pub fn spectrum(t: &[f64], p: &Params) -> Vec<(f64, f64)> {
    let n = ((p.f_max - p.f_min) / p.df + 1e-9).floor() as usize;
    (0..=n)
        .map(|i| {
            let f = p.f_min + i as f64 * p.df;
            (f, amplitude(t, f))
        })
        .collect()
}

/// Local maxima of the sampled spectrum (interior points), ascending.
fn local_peaks(s: &[(f64, f64)]) -> Vec<Peak> {
    s.windows(3)
        .filter(|w| w[1].1 > w[0].1 && w[1].1 >= w[2].1)
        .map(|w| Peak {
            freq_hz: w[1].0,
            amplitude: w[1].1,
        })
        .collect()
}

fn strongest(c: &[Peak]) -> Peak {
    *c.iter()
        .max_by(|a, b| a.amplitude.total_cmp(&b.amplitude))
        .expect("candidates are not empty")
}

/// Weighted least squares f_i = F1·i + F0 (i = 1..m, weights the
/// amplitudes): `(F1, weighted mean squared error)`.
fn regression(c: &[Peak]) -> (f64, f64) {
    let sw: f64 = c.iter().map(|p| p.amplitude).sum();
    let mean = |g: &dyn Fn(usize, &Peak) -> f64| {
        c.iter()
            .enumerate()
            .map(|(i, p)| p.amplitude * g(i + 1, p))
            .sum::<f64>()
            / sw
    };
    let mx = mean(&|i, _| i as f64);
    let my = mean(&|_, p| p.freq_hz);
    let sxy = mean(&|i, p| (i as f64 - mx) * (p.freq_hz - my));
    let sxx = mean(&|i, _| (i as f64 - mx).powi(2));
    let f1 = sxy / sxx;
    let f0 = my - f1 * mx;
    let err = mean(&|i, p| (p.freq_hz - (f1 * i as f64 + f0)).powi(2));
    (f1, err)
}

/// The paper's choice among the candidates.
fn choose(c: &[Peak], p: &Params) -> (Peak, Rule) {
    if c.len() <= p.m {
        return (strongest(c), Rule::Strongest);
    }
    let (f1, err) = regression(c);
    if err < p.e {
        let near = c
            .iter()
            .min_by(|a, b| (a.freq_hz - f1).abs().total_cmp(&(b.freq_hz - f1).abs()))
            .expect("candidates are not empty");
        (*near, Rule::Regression)
    } else {
        (strongest(c), Rule::StrongestAfterRegression)
    }
}

/// The maximum of the spectrum within ±δf of `f`: a search at δf/100, then
/// a parabola through the best sample and its neighbours.
fn refine(t: &[f64], f: f64, p: &Params) -> f64 {
    let step = p.df / 100.0;
    let at = |i: i32| amplitude(t, f + i as f64 * step);
    let (best, _) = (-100..=100)
        .map(|i| (i, at(i)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("the range is not empty");
    let (a, b, c) = (at(best - 1), at(best), at(best + 1));
    let den = a - 2.0 * b + c;
    let off = if den.abs() > f64::EPSILON {
        0.5 * (a - c) / den
    } else {
        0.0
    };
    f + (best as f64 + off.clamp(-1.0, 1.0)) * step
}

fn not_periodic(n: usize, rule: Rule, peaks: Vec<Peak>, threshold: f64) -> Estimate {
    Estimate {
        period_ns: None,
        freq_hz: None,
        jobs: 0,
        events: n,
        confidence: 0.0,
        rule,
        peaks,
        threshold,
    }
}

/// How near its tooth (in periods) a job's event must be to count as locked.
const LOCK_WINDOW: f64 = 0.15;

/// The estimate for instants `t` (seconds, ascending).
pub(super) fn estimate(t: &[f64], p: &Params) -> Estimate {
    let n = t.len();
    if n < p.min_events.max(2) || p.validate().is_err() {
        return not_periodic(n, Rule::TooFewEvents, Vec::new(), 0.0);
    }
    let s = spectrum(t, p);
    let mean = s.iter().map(|x| x.1).sum::<f64>() / s.len() as f64;
    let threshold = p.k * mean;
    let peaks: Vec<Peak> = local_peaks(&s)
        .into_iter()
        .filter(|x| x.amplitude > threshold)
        .collect();
    let (peak, rule) = if !peaks.is_empty() {
        choose(&peaks, p)
    } else if p.fit && n < SHORT {
        // A short trace: see `SHORT`.
        match s.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
            Some(&(freq_hz, amplitude)) => (Peak { freq_hz, amplitude }, Rule::WeakPeak),
            None => return not_periodic(n, Rule::NoPeak, peaks, threshold),
        }
    } else {
        return not_periodic(n, Rule::NoPeak, peaks, threshold);
    };
    let f = if p.refine {
        let f = refine(t, peak.freq_hz, p);
        match p.fit {
            true => {
                let f = super::fit::fundamental(t, f, p.f_min);
                super::fit::fit_frequency(t, f).unwrap_or(f)
            }
            false => f,
        }
    } else {
        peak.freq_hz
    };
    let span = t[n - 1] - t[0];
    let confidence = confidence(amplitude(t, f), n, span, p);
    if confidence < p.min_confidence {
        return Estimate {
            confidence,
            ..not_periodic(n, Rule::LowConfidence, peaks, threshold)
        };
    }
    let jobs = (span * f).round() as u64 + 1;
    let locked = super::fit::locked_jobs(t, f, LOCK_WINDOW);
    if (locked as f64) < p.min_locked * jobs as f64 {
        return Estimate {
            confidence,
            jobs,
            ..not_periodic(n, Rule::Unlocked, peaks, threshold)
        };
    }
    Estimate {
        period_ns: Some((1e9 / f).round() as u64),
        freq_hz: Some(f),
        jobs,
        events: n,
        confidence,
        rule,
        peaks,
        threshold,
    }
}

/// min(coherence a/N, 1 − false-alarm probability); see `Estimate::confidence`.
fn confidence(a: f64, n: usize, span: f64, p: &Params) -> f64 {
    let n = n as f64;
    let independent = ((p.f_max - p.f_min) * span).max(1.0);
    let false_alarm = (independent * (-a * a / n).exp()).min(1.0);
    (a / n).min(1.0 - false_alarm).clamp(0.0, 1.0)
}
