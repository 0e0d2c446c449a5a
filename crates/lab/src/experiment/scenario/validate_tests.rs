//! One bad file per validation rule: the message and the line it names.

use super::*;

/// A valid scenario using every section.
const GOOD: &str = r#"name = "good"
title = "Good"
duration_s = 60
quick_duration_s = 12
warmup_s = 2

[server]
rate = 96000
frames = 128

[[run]]
name = "fifo"
policy = "fifo"
priority = 10
rtapp_policy = "fifo"
rtapp_priority = 15

[[run]]
name = "resv"
policy = "deadline+reclaim"
period_multiplier = 2
servers = ["resound"]

[[clients]]
count = 10
busy_pct = 7.5
join_at_s = 5
join_every_s = 5
leave_at_s = 58

[[rtapp]]
name = "video"
period_us = 40000
run_us = 5000
start_s = 5
stop_s = 40

[[event]]
at_s = 30
kill = "dnl3"

[[event]]
at_s = 31
buffer_size = 256

[published]
setup = "s"
differences = "d"

[[published.table]]
source = "paper"
caption = "c"
[[published.table.value]]
run = "fifo"
metric = "driver_period_avg_us"
value = 1333.0
"#;

/// `GOOD` with the first occurrence of `from` replaced by `to`.
fn with(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "{from:?} not in GOOD");
    GOOD.replacen(from, to, 1)
}

/// The text must fail validation with `message` on the line holding `at`.
fn fails(text: &str, at: &str, message: &str) {
    let expected = text
        .lines()
        .position(|l| l.contains(at))
        .unwrap_or_else(|| panic!("{at:?} not in the text"))
        + 1;
    let e = check(text, "bad.toml").expect_err("should fail validation");
    assert!(
        e.message.contains(message),
        "message {:?} lacks {message:?}",
        e.message
    );
    assert_eq!(e.line, expected, "wrong line for {e}");
    assert!(e.to_string().starts_with(&format!("bad.toml:{expected}:")));
}

#[test]
fn the_good_file_passes() {
    let s = check(GOOD, "good.toml").unwrap();
    assert_eq!(s.runs.len(), 2);
    assert!(problems(&s, GOOD, "good.toml").is_empty());
}

#[test]
fn name_syntax() {
    fails(
        &with("\"good\"", "\"Good One\""),
        "name = \"Good One\"",
        "lowercase letters",
    );
    fails(
        &with("name = \"resv\"", "name = \"re_sv\""),
        "re_sv",
        "lowercase letters",
    );
}

#[test]
fn warmup_and_durations() {
    fails(
        &with("quick_duration_s = 12\nwarmup_s = 2", "warmup_s = 60"),
        "warmup_s",
        "shorter than duration_s",
    );
    fails(
        &with("warmup_s = 2", "warmup_s = -1"),
        "warmup_s",
        "must be >= 0",
    );
    fails(
        &with("quick_duration_s = 12", "quick_duration_s = 2"),
        "quick_duration_s",
        "longer than warmup_s",
    );
    fails(
        &with("duration_s = 60", "duration_s = 0"),
        "duration_s",
        "above 0",
    );
}

#[test]
fn rate_and_frames() {
    fails(
        &with("rate = 96000", "rate = 4000"),
        "rate = 4000",
        "8000 to 384000",
    );
    fails(
        &with("frames = 128", "frames = 100"),
        "frames = 100",
        "power of two",
    );
    fails(
        &with("frames = 128", "frames = 16384"),
        "frames = 16384",
        "power of two",
    );
    let over = with(
        "period_multiplier = 2",
        "period_multiplier = 2\nframes = 96",
    );
    fails(&over, "frames = 96", "power of two");
    fails(
        &with("buffer_size = 256", "buffer_size = 300"),
        "buffer_size = 300",
        "power of two",
    );
}

#[test]
fn runs_present_and_uniquely_named() {
    fails(
        &with("name = \"resv\"", "name = \"fifo\" # again"),
        "# again",
        "used twice",
    );
    let none = GOOD
        .replace("[[run]]\nname = \"fifo\"\npolicy = \"fifo\"\npriority = 10\nrtapp_policy = \"fifo\"\nrtapp_priority = 15\n", "")
        .replace("[[run]]\nname = \"resv\"\npolicy = \"deadline+reclaim\"\nperiod_multiplier = 2\nservers = [\"resound\"]\n", "")
        .replace("[[published.table]]\nsource = \"paper\"\ncaption = \"c\"\n[[published.table.value]]\nrun = \"fifo\"\nmetric = \"driver_period_avg_us\"\nvalue = 1333.0\n", "");
    let e = check(&none, "bad.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "bad.toml:1:1: required field `run` is missing"
    );
}

#[test]
fn fails_with_first_line_when_names_repeat() {
    // Two failures: the error returned is the earlier line.
    let text = with("rate = 96000", "rate = 1").replacen("frames = 128", "frames = 3", 1);
    fails(&text, "rate = 1", "8000 to 384000");
}

#[test]
fn jackd_only_for_other_and_fifo() {
    fails(
        &with(
            "servers = [\"resound\"]",
            "servers = [\"resound\", \"jackd\"]",
        ),
        "servers =",
        "jackd2 has no SCHED_DEADLINE",
    );
    fails(
        &with("servers = [\"resound\"]", "servers = []"),
        "servers =",
        "servers is empty",
    );
}

#[test]
fn priorities_and_multiplier() {
    fails(
        &with("priority = 10", "priority = 99"),
        "priority = 99",
        "1 to 98",
    );
    fails(
        &with("rtapp_priority = 15", "rtapp_priority = 0"),
        "rtapp_priority = 0",
        "1 to 98",
    );
    fails(
        &with("period_multiplier = 2", "period_multiplier = 65"),
        "period_multiplier = 65",
        "1 to 64",
    );
    fails(
        &with("rtapp_policy = \"fifo\"\n", ""),
        "rtapp_priority = 15",
        "needs rtapp_policy = \"fifo\"",
    );
}

#[test]
fn overrides_need_something_to_apply_to() {
    let no_clients = with("[[clients]]\ncount = 10\nbusy_pct = 7.5\njoin_at_s = 5\njoin_every_s = 5\nleave_at_s = 58\n", "")
        .replace("kill = \"dnl3\"", "buffer_size = 512")
        .replacen("servers = [\"resound\"]", "servers = [\"resound\"]\nplacement = \"parallel\"", 1);
    fails(&no_clients, "placement =", "no [[clients]] group");
}

#[test]
fn cpus_at_least_one() {
    fails(
        &with("frames = 128", "frames = 128\ncpus = 0"),
        "cpus = 0",
        "at least 1",
    );
}

#[test]
fn client_groups() {
    fails(&with("count = 10", "count = 65"), "count = 65", "1 to 64");
    fails(
        &with("busy_pct = 7.5", "busy_pct = 100"),
        "busy_pct = 100",
        "below 100",
    );
    fails(
        &with("join_at_s = 5", "join_at_s = 61"),
        "join_at_s = 61",
        "outside the run",
    );
    fails(
        &with("join_every_s = 5", "join_every_s = 7"),
        "join_every_s = 7",
        "outside the run",
    );
    fails(
        &with("leave_at_s = 58", "leave_at_s = 40"),
        "leave_at_s = 40",
        "not after its last client joins",
    );
    let two = GOOD.replacen(
        "[[rtapp]]",
        "[[clients]]\nname = \"dnl\"\ncount = 1\nbusy_pct = 1\n\n[[rtapp]]",
        1,
    );
    fails(&two, "name = \"dnl\"", "used by two groups");
}

#[test]
fn rtapp_tasks() {
    fails(
        &with("run_us = 5000", "run_us = 0"),
        "run_us = 0",
        "above 0",
    );
    fails(
        &with("period_us = 40000", "period_us = 50"),
        "period_us = 50",
        "at least 100",
    );
    fails(
        &with("stop_s = 40", "stop_s = 4"),
        "stop_s = 4",
        "not after it starts",
    );
    fails(
        &with("stop_s = 40", "stop_s = 61"),
        "stop_s = 61",
        "outside the run",
    );
    fails(
        &with("start_s = 5", "start_s = 5\ninstances = 17"),
        "instances = 17",
        "1 to 16",
    );
    let two = GOOD.replacen(
        "[[event]]",
        "[[rtapp]]\nname = \"video\" # again\nperiod_us = 1000\nrun_us = 10\n\n[[event]]",
        1,
    );
    fails(&two, "# again", "used twice");
    let fifo_prio = with("rtapp_policy = \"fifo\"", "rtapp_policy = \"deadline\"");
    fails(&fifo_prio, "rtapp_priority = 15", "needs rtapp_policy");
}

#[test]
fn events() {
    fails(
        &with("at_s = 30", "at_s = 60"),
        "at_s = 60",
        "outside the run",
    );
    fails(
        &with("kill = \"dnl3\"", "kill = \"dnl11\""),
        "kill =",
        "dnl1..dnl10",
    );
}

#[test]
fn published_values_name_a_run() {
    fails(
        &with("run = \"fifo\"", "run = \"cfs\""),
        "run = \"cfs\"",
        "no [[run]] is named \"cfs\"",
    );
}

#[test]
fn client_names_cover_every_group() {
    let s = check(GOOD, "good.toml").unwrap();
    let names = client_names(&s.clients);
    assert!(names.contains("dnl1") && names.contains("dnl10"));
    assert!(!names.contains("dnl11") && !names.contains("dnl0"));
    assert!(is_name("a-1") && !is_name("-a") && !is_name("") && !is_name("A"));
}

#[test]
fn inline_published_values_name_their_line() {
    let inline = "[[published.table]]\nsource = \"p\"\ncaption = \"c\"\nvalue = [\n  { run = \"fifo\", metric = \"xruns\", value = 0 },\n  { run = \"nope\", metric = \"xruns\", value = 0 },\n]\n";
    let text = format!("{GOOD}{inline}");
    fails(&text, "run = \"nope\"", "no [[run]] is named \"nope\"");
}

#[test]
fn kill_without_client_groups_says_so() {
    let text = with("[[clients]]\ncount = 10\nbusy_pct = 7.5\njoin_at_s = 5\njoin_every_s = 5\nleave_at_s = 58\n", "");
    fails(&text, "kill =", "no [[clients]] group");
}
