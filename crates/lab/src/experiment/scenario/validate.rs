//! The checks a scenario must pass after it has been deserialised, which the
//! schema cannot express: names, ranges (rate, frames, priorities,
//! multipliers, loads), the timeline (every join, leave, start, stop and
//! event inside the run and in order), which servers a policy can run on,
//! and that published values and `kill` events name things the scenario
//! defines. Each error names the line of the offending key. Runs on the
//! command's main thread.

use super::model::{
    Action, AudioPolicy, ClientGroup, Multiplier, RtAppTask, RtPolicyName, RunConfig, Scenario,
    ServerKind,
};
use super::parse::{parse, ScenarioError};
use super::spans::SpanMap;
use std::collections::BTreeSet;

/// Parse and validate a scenario text: the scenario, or its first error.
pub fn check(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
    let scenario = parse(text, origin)?;
    validate(&scenario, text, origin)?;
    Ok(scenario)
}

/// Validate a parsed scenario against its text (for the line numbers):
/// Ok, or the first problem in file order.
pub fn validate(scenario: &Scenario, text: &str, origin: &str) -> Result<(), ScenarioError> {
    match problems(scenario, text, origin).into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Every problem of a parsed scenario, in file order.
pub fn problems(scenario: &Scenario, text: &str, origin: &str) -> Vec<ScenarioError> {
    let spans = match SpanMap::parse(text) {
        Ok(spans) => spans,
        Err(e) => return vec![ScenarioError::whole(origin, e.message().to_string())],
    };
    let mut c = Checker {
        s: scenario,
        spans,
        text,
        origin,
        out: Vec::new(),
    };
    c.header();
    c.server();
    c.runs();
    for (i, g) in scenario.clients.iter().enumerate() {
        c.group(i, g);
    }
    c.client_names();
    c.rtapp_tasks();
    c.events();
    c.published();
    let mut out = c.out;
    out.sort_by_key(|e| (e.line, e.column));
    out
}

/// Highest SCHED_FIFO priority a scenario may ask for (99 is left to the
/// kernel's own threads, as jackd does).
const MAX_PRIORITY: i32 = 98;

struct Checker<'a> {
    s: &'a Scenario,
    spans: SpanMap<'a>,
    text: &'a str,
    origin: &'a str,
    out: Vec<ScenarioError>,
}

impl Checker<'_> {
    /// Record a problem at the key `path` (`run[2].policy`).
    fn fail(&mut self, path: &str, message: impl std::fmt::Display) {
        let offset = self.spans.offset(path);
        let message = format!("{path}: {message}");
        self.out
            .push(ScenarioError::at(self.origin, self.text, offset, message));
    }

    fn duration(&self) -> f64 {
        self.s.duration_s
    }

    /// A time on the timeline: `0 <= t < duration` (or `<=` for an end).
    fn time(&mut self, path: &str, t: f64, end: bool) {
        let d = self.duration();
        let inside = t >= 0.0 && if end { t <= d } else { t < d };
        if !t.is_finite() || !inside {
            let bound = if end { "<=" } else { "<" };
            self.fail(
                path,
                format!("{t} s is outside the run: use 0 <= t {bound} duration_s ({d} s)"),
            );
        }
    }

    fn name(&mut self, path: &str, name: &str) {
        if !is_name(name) {
            self.fail(
                path,
                format!("name {name:?} must be lowercase letters, digits and dashes, starting with a letter or digit"),
            );
        }
    }

    fn header(&mut self) {
        self.name("name", &self.s.name.clone());
        if self.s.title.trim().is_empty() {
            self.fail("title", "the title is empty");
        }
        let (d, w) = (self.s.duration_s, self.s.warmup_s);
        if !(d.is_finite() && d > 0.0) {
            self.fail("duration_s", format!("duration {d} s must be above 0"));
        }
        if !(w.is_finite() && w >= 0.0 && w < d) {
            self.fail(
                "warmup_s",
                format!("warm-up {w} s must be >= 0 and shorter than duration_s ({d} s)"),
            );
        }
        if let Some(q) = self.s.quick_duration_s {
            if !(q.is_finite() && q > w && q <= d) {
                self.fail(
                    "quick_duration_s",
                    format!("quick duration {q} s must be longer than warmup_s ({w} s) and at most duration_s ({d} s)"),
                );
            }
        }
    }

    fn rate(&mut self, path: &str, rate: u32) {
        if !(8000..=384_000).contains(&rate) {
            self.fail(
                path,
                format!("sample rate {rate} Hz is out of range; use 8000 to 384000"),
            );
        }
    }

    fn frames(&mut self, path: &str, frames: u32) {
        if !(frames.is_power_of_two() && (16..=8192).contains(&frames)) {
            self.fail(
                path,
                format!("{frames} frames per period: use a power of two from 16 to 8192"),
            );
        }
    }

    fn cpus(&mut self, path: &str, cpus: Option<usize>) {
        if cpus == Some(0) {
            self.fail(path, "cpus must be at least 1");
        }
    }

    fn priority(&mut self, path: &str, priority: Option<i32>) {
        if let Some(p) = priority {
            if !(1..=MAX_PRIORITY).contains(&p) {
                self.fail(
                    path,
                    format!("SCHED_FIFO priority {p} is out of range; use 1 to {MAX_PRIORITY}"),
                );
            }
        }
    }

    fn server(&mut self) {
        let server = &self.s.server;
        self.rate("server.rate", server.rate);
        self.frames("server.frames", server.frames);
        self.cpus("server.cpus", server.cpus);
        if server.driver != "dummy" {
            let driver = server.driver.clone();
            self.fail(
                "server.driver",
                format!("driver {driver:?} is not supported; only \"dummy\" (the timing measured is the driver thread's own)"),
            );
        }
    }

    fn runs(&mut self) {
        if self.s.runs.is_empty() {
            self.fail("run", "at least one [[run]] configuration is needed");
        }
        let mut seen = BTreeSet::new();
        for (i, run) in self.s.runs.iter().enumerate() {
            let p = format!("run[{i}]");
            self.name(&format!("{p}.name"), &run.name);
            if !seen.insert(run.name.as_str()) {
                self.fail(
                    &format!("{p}.name"),
                    format!("run name {:?} is used twice", run.name),
                );
            }
            self.run(&p, run);
        }
    }

    fn run(&mut self, p: &str, run: &RunConfig) {
        if let Some(rate) = run.rate {
            self.rate(&format!("{p}.rate"), rate);
        }
        if let Some(frames) = run.frames {
            self.frames(&format!("{p}.frames"), frames);
        }
        self.cpus(&format!("{p}.cpus"), run.cpus);
        self.priority(&format!("{p}.priority"), run.priority);
        self.priority(&format!("{p}.rtapp_priority"), run.rtapp_priority);
        if let Some(Multiplier::Fixed(m)) = run.period_multiplier {
            if !(1..=64).contains(&m) {
                self.fail(
                    &format!("{p}.period_multiplier"),
                    format!("period multiplier {m} is out of range; use 1 to 64 or \"auto\""),
                );
            }
        }
        if run.rtapp_priority.is_some() && run.rtapp_policy != Some(RtPolicyName::Fifo) {
            self.fail(
                &format!("{p}.rtapp_priority"),
                "rtapp_priority needs rtapp_policy = \"fifo\" (only SCHED_FIFO has priorities)",
            );
        }
        if (run.rtapp_policy.is_some() || run.rtapp_priority.is_some()) && self.s.rtapp.is_empty() {
            self.fail(
                &format!("{p}.rtapp_policy"),
                "this scenario has no [[rtapp]] task for rtapp_policy or rtapp_priority to apply to",
            );
        }
        if run.placement.is_some() && self.s.clients.is_empty() {
            self.fail(
                &format!("{p}.placement"),
                "this scenario has no [[clients]] group for placement to apply to",
            );
        }
        self.servers(p, run);
    }

    fn servers(&mut self, p: &str, run: &RunConfig) {
        let Some(servers) = &run.servers else { return };
        let path = format!("{p}.servers");
        if servers.is_empty() {
            self.fail(&path, "servers is empty; name \"resound\" and/or \"jackd\"");
        }
        let rt = matches!(run.policy, AudioPolicy::Other | AudioPolicy::Fifo);
        if servers.contains(&ServerKind::Jackd) && !rt {
            self.fail(
                &path,
                "jackd can run only the \"other\" and \"fifo\" policies: jackd2 has no SCHED_DEADLINE reservations",
            );
        }
        let distinct: BTreeSet<_> = servers.iter().collect();
        if distinct.len() != servers.len() {
            self.fail(&path, "a server is named twice");
        }
    }

    fn group(&mut self, i: usize, g: &ClientGroup) {
        let p = format!("clients[{i}]");
        self.name(&format!("{p}.name"), &g.name);
        if !(1..=64).contains(&g.count) {
            self.fail(
                &format!("{p}.count"),
                format!("{} clients: use 1 to 64", g.count),
            );
        }
        if !(g.busy_pct > 0.0 && g.busy_pct < 100.0) {
            self.fail(
                &format!("{p}.busy_pct"),
                format!(
                    "busy share {} % must be above 0 and below 100 (percent of the period)",
                    g.busy_pct
                ),
            );
        }
        self.time(&format!("{p}.join_at_s"), g.join_at_s, false);
        if g.join_every_s.is_nan() || g.join_every_s < 0.0 {
            self.fail(&format!("{p}.join_every_s"), "join_every_s must be >= 0");
        }
        let last_join = g.join_at_s + f64::from(g.count.max(1) - 1) * g.join_every_s;
        if g.join_every_s > 0.0 && g.count > 1 {
            self.time(&format!("{p}.join_every_s"), last_join, false);
        }
        if let Some(leave) = g.leave_at_s {
            self.time(&format!("{p}.leave_at_s"), leave, true);
            if leave <= last_join {
                self.fail(
                    &format!("{p}.leave_at_s"),
                    format!("the group leaves at {leave} s, not after its last client joins ({last_join} s)"),
                );
            }
        }
    }

    fn client_names(&mut self) {
        let mut seen = BTreeSet::new();
        for (i, g) in self.s.clients.iter().enumerate() {
            if !seen.insert(g.name.as_str()) {
                self.fail(
                    &format!("clients[{i}].name"),
                    format!("client name prefix {:?} is used by two groups", g.name),
                );
            }
        }
    }

    fn rtapp_tasks(&mut self) {
        let mut seen = BTreeSet::new();
        for (i, t) in self.s.rtapp.iter().enumerate() {
            let p = format!("rtapp[{i}]");
            if !seen.insert(t.name.as_str()) {
                self.fail(
                    &format!("{p}.name"),
                    format!("rt-app task name {:?} is used twice", t.name),
                );
            }
            self.rtapp(&p, t);
        }
    }

    fn rtapp(&mut self, p: &str, t: &RtAppTask) {
        if t.name.is_empty() || t.name.contains(char::is_whitespace) {
            self.fail(
                &format!("{p}.name"),
                "an rt-app task needs a name without spaces",
            );
        }
        if t.period_us < 100 {
            self.fail(
                &format!("{p}.period_us"),
                format!("period {} us: use at least 100 us", t.period_us),
            );
        }
        if t.run_us == 0 || t.run_us >= t.period_us {
            self.fail(
                &format!("{p}.run_us"),
                format!(
                    "run time {} us must be above 0 and below the period ({} us)",
                    t.run_us, t.period_us
                ),
            );
        }
        if !(1..=16).contains(&t.instances) {
            self.fail(
                &format!("{p}.instances"),
                format!("{} instances: use 1 to 16", t.instances),
            );
        }
        self.priority(&format!("{p}.priority"), t.priority);
        self.time(&format!("{p}.start_s"), t.start_s, false);
        if let Some(stop) = t.stop_s {
            self.time(&format!("{p}.stop_s"), stop, true);
            if stop <= t.start_s {
                self.fail(
                    &format!("{p}.stop_s"),
                    format!(
                        "the task stops at {stop} s, not after it starts ({} s)",
                        t.start_s
                    ),
                );
            }
        }
    }

    fn events(&mut self) {
        let clients = client_names(&self.s.clients);
        for (i, e) in self.s.events.iter().enumerate() {
            let p = format!("event[{i}]");
            self.time(&format!("{p}.at_s"), e.at_s, false);
            match &e.action {
                Action::BufferSize(frames) => self.frames(&format!("{p}.buffer_size"), *frames),
                Action::Kill(name) if !clients.contains(name) => {
                    let known = if clients.is_empty() {
                        "the scenario has no [[clients]] group".to_string()
                    } else {
                        format!("the clients are {}", summary(&self.s.clients))
                    };
                    self.fail(
                        &format!("{p}.kill"),
                        format!("no client is named {name:?}: {known}"),
                    );
                }
                Action::Kill(_) => {}
            }
        }
    }

    fn published(&mut self) {
        let Some(published) = &self.s.published else {
            return;
        };
        let runs: BTreeSet<&str> = self.s.runs.iter().map(|r| r.name.as_str()).collect();
        for (t, table) in published.tables.iter().enumerate() {
            for (v, value) in table.values.iter().enumerate() {
                if !runs.contains(value.run.as_str()) {
                    let known: Vec<&str> = runs.iter().copied().collect();
                    self.fail(
                        &format!("published.table[{t}].value[{v}].run"),
                        format!(
                            "no [[run]] is named {:?}; the runs are {}",
                            value.run,
                            known.join(", ")
                        ),
                    );
                }
            }
        }
    }
}

/// Lowercase letters, digits and dashes, starting with a letter or digit.
pub fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Every client name the groups create (`dnl1` .. `dnlN`).
pub fn client_names(groups: &[ClientGroup]) -> BTreeSet<String> {
    groups
        .iter()
        .flat_map(|g| (1..=g.count).map(move |i| format!("{}{i}", g.name)))
        .collect()
}

/// `dnl1..dnl10, x1..x2` for an error message.
fn summary(groups: &[ClientGroup]) -> String {
    let parts: Vec<String> = groups
        .iter()
        .map(|g| format!("{0}1..{0}{1}", g.name, g.count))
        .collect();
    parts.join(", ")
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
