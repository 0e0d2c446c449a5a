use super::*;
use resound_shm::profile::{cycle_flags, node_flags, CycleData, NodeData};

/// A synthetic trace: `n` cycles of 1 ms; client 1 runs 100-300 us, client 2
/// 300-600 us; cycle 5 has an xrun where client 2 is late.
fn records(n: u64) -> Vec<(CycleData, Vec<NodeData>)> {
    (1..=n)
        .map(|k| {
            let start = 1_000_000_000 + k * 1_000_000;
            let late = k == 5;
            let c = CycleData {
                cycle: k,
                start_ns: start,
                awake_ns: start + 20_000 + (k % 2) * 2_000,
                end_ns: start + 50_000,
                cpu_ns: 15_000,
                period_ns: 1_000_000,
                frames: 48,
                flags: if late { cycle_flags::XRUN } else { 0 },
                budget_ns: 100_000,
                predicted_ns: 20_000,
            };
            let fin = node_flags::SIGNALLED | node_flags::AWAKE | node_flags::FINISHED;
            let a = NodeData {
                uuid: 11,
                slot: 1,
                flags: fin,
                signal_ns: start + 90_000,
                awake_ns: start + 100_000,
                finish_ns: start + 300_000,
                cpu_ns: 190_000,
                budget_ns: 250_000,
                predicted_ns: 200_000,
            };
            let b = NodeData {
                uuid: 12,
                slot: 2,
                flags: if late {
                    node_flags::LATE | node_flags::SIGNALLED
                } else {
                    fin
                },
                signal_ns: start + 300_000,
                awake_ns: if late { 0 } else { start + 310_000 },
                finish_ns: if late { 0 } else { start + 600_000 },
                cpu_ns: if late { 0 } else { 280_000 },
                budget_ns: 0,
                predicted_ns: 0,
            };
            (c, vec![a, b])
        })
        .collect()
}

fn info(floor: u32, min_period_ns: u64) -> ServerInfo {
    ServerInfo {
        server: "test".into(),
        sample_rate: 48000,
        buffer_frames: 48,
        mode: "sync".into(),
        sched: "deadline".into(),
        ring_seconds: 30.0,
        multiplier_floor: floor,
        multiplier_min_period_ns: min_period_ns,
    }
}

fn profile(n: u64) -> Profile {
    profile_with(n, info(1, 0))
}

fn profile_with(n: u64, info: ServerInfo) -> Profile {
    Profile::from_records(
        info,
        &records(n),
        &[(11, "synth".into()), (12, "fx, \"comma\"".into())],
        3,
    )
}

#[test]
fn records_become_relative_rows_with_names() {
    let p = profile(10);
    assert_eq!(p.cycles.len(), 10);
    assert_eq!(p.clients.len(), 2);
    assert_eq!(p.name(11), "synth");
    let c = &p.cycles[1];
    assert_eq!(c.measured_period_ns, Some(1_000_000 - 2_000));
    assert_eq!(p.cycles[0].measured_period_ns, None);
    assert_eq!(c.driver_end_ns, 50_000);
    let a = c.nodes[0];
    assert_eq!(
        (a.scheduling_ns(), a.duration_ns()),
        (Some(10_000), Some(200_000))
    );
    let late = p.cycles[4].nodes[1];
    assert!(late.late && late.finish_ns.is_none() && late.signal_ns == Some(300_000));
    assert!(p.cycles[4].xrun);
    assert_eq!(p.xruns(), 1);
    assert_eq!(p.cycles[3].graph_end_ns(), 600_000);
    assert_eq!(
        p.cycles[4].graph_end_ns(),
        1_000_000,
        "a late cycle ends at the period at the earliest"
    );
}

#[test]
fn summary_statistics() {
    let p = profile(10);
    let s = p.summary();
    let row = |g: &str, m: &str| {
        s.rows
            .iter()
            .find(|r| r.group == g && r.measure == m)
            .unwrap_or_else(|| panic!("{g} {m}"))
            .stats
    };
    let d = row("synth", "duration");
    assert_eq!(
        (d.n, d.min, d.max, d.avg, d.std),
        (10, 200e3, 200e3, 200e3, 0.0)
    );
    let e = row("fx, \"comma\"", "end date");
    assert_eq!(e.n, 9, "the late cycle has no end date");
    let per = row("driver", "period");
    assert_eq!(per.n, 9);
    assert_eq!((per.min, per.max), (998e3, 1002e3));
    assert!((per.std - 2e3).abs() < 20.0, "{per:?}");
    assert_eq!(row("fx, \"comma\"", "late cycles").max, 1.0);
    let t = s.to_text();
    assert!(t.contains("synth") && t.contains("200.0"), "{t}");
}

#[test]
fn write_dir_produces_parseable_files_with_every_cycle_and_curve() {
    let p = profile(200);
    let dir = std::env::temp_dir().join(format!("resound-profiler-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = write_dir(&p, &dir).unwrap();
    for f in [
        "profile.json",
        "cycles.csv",
        "clients.csv",
        "summary.txt",
        "summary.csv",
        "index.html",
        "driver_period.png",
        "driver_period.svg",
        "clients_end.png",
        "clients_end.svg",
        "scheduling_latency.svg",
        "duration.svg",
        "cpu.svg",
        "reservations.svg",
        "graph_budget.svg",
        "graph_budget.png",
        "cdf_period.svg",
        "cdf_end.png",
    ] {
        assert!(files.contains(&dir.join(f)), "{f} missing from {files:?}");
    }
    // JSON round-trips.
    let back: Profile =
        serde_json::from_slice(&std::fs::read(dir.join("profile.json")).unwrap()).unwrap();
    assert_eq!(back, p);
    // CSVs: one line per cycle, one per client per cycle; names quoted correctly.
    let mut r = csv::Reader::from_path(dir.join("cycles.csv")).unwrap();
    assert_eq!(r.records().count(), 200);
    let mut r = csv::Reader::from_path(dir.join("clients.csv")).unwrap();
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
    assert_eq!(rows.len(), 400);
    assert!(rows.iter().any(|x| &x[1] == "fx, \"comma\""));
    let late = rows.iter().find(|x| &x[0] == "5" && &x[2] == "12").unwrap();
    assert_eq!(
        (&late[5], &late[11]),
        ("", "1"),
        "a late client has no end date"
    );
    // PNGs decode at the documented size.
    for f in ["clients_end.png", "reservations.png"] {
        let dec = png::Decoder::new(std::fs::File::open(dir.join(f)).unwrap());
        let info = dec.read_info().unwrap().info().clone();
        assert_eq!(info.width, plots::SIZE.0, "{f}");
    }
    // SVG: one polyline per curve (driver + 2 clients), the period reference, legends.
    let svg = std::fs::read_to_string(dir.join("clients_end.svg")).unwrap();
    assert!(svg.contains("synth") && svg.contains("driver") && svg.contains("period"));
    assert!(svg.contains("fx, &quot;comma&quot;") || svg.contains("fx, \"comma\""));
    assert!(svg.matches("<polyline").count() >= 3, "curves drawn");
    assert!(svg.contains("xrun (1)"), "the xrun is marked");
    let svg = std::fs::read_to_string(dir.join("reservations.svg")).unwrap();
    assert!(svg.contains("budget set") && svg.contains("predicted") && svg.contains("CPU used"));
    let svg = std::fs::read_to_string(dir.join("graph_budget.svg")).unwrap();
    assert!(svg.contains("budget set") && svg.contains("predicted") && svg.contains("CPU used"));
    assert!(svg.matches("<polyline").count() >= 3, "three curves drawn");
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(html.contains("clients_end.png") && html.contains("id=\"summary\""));
    assert!(
        html.contains("graph_budget"),
        "the graph budget figure is linked"
    );
    assert!(
        html.contains("3 older cycle(s)"),
        "overwritten records are reported"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn graph_sums_add_the_driver_and_every_client() {
    let p = profile(6);
    for c in &p.cycles {
        assert_eq!(c.multiplier, 1);
        // driver 100 + synth 250 + fx 0 budget; 20 + 200 predicted;
        // 15 + 190 + 280 used (fx late in cycle 5: its CPU time is unknown).
        let used = if c.cycle == 5 { 205_000 } else { 485_000 };
        assert_eq!(
            c.graph,
            GraphSums {
                budget_ns: 350_000,
                predicted_ns: 220_000,
                used_ns: used
            },
            "cycle {}",
            c.cycle
        );
    }
    let s = p.summary();
    let row = |m: &str| {
        s.rows
            .iter()
            .find(|r| r.group == "graph (per cycle)" && r.measure == m)
            .unwrap_or_else(|| panic!("no graph {m} row"))
            .stats
    };
    assert_eq!(row("budget").avg, 350_000.0);
    assert_eq!(row("predicted").max, 220_000.0);
    assert_eq!(row("used").min, 205_000.0);
    assert!(s.to_text().contains("graph (per cycle)"));
}

#[test]
fn graph_sums_convert_multi_period_reservations_to_one_audio_period() {
    // Fixed x2, and auto with the thesis's 1333 us at this 1 ms period: both 2.
    for info in [info(2, 0), info(1, 1_333_000)] {
        let p = profile_with(3, info);
        let c = &p.cycles[0];
        assert_eq!(c.multiplier, 2);
        assert_eq!(
            c.graph,
            GraphSums {
                budget_ns: 50_000 + 125_000,
                predicted_ns: 10_000 + 100_000,
                used_ns: 485_000
            }
        );
    }
    assert_eq!(per_audio_period(5, 2), 3, "rounded to the nearest ns");
}

#[test]
fn graph_columns_are_exported() {
    let dir = std::env::temp_dir().join(format!("resound-graph-cols-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = profile(4);
    export::write_cycles_csv(&p, &dir.join("cycles.csv")).unwrap();
    let mut r = csv::Reader::from_path(dir.join("cycles.csv")).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |n: &str| {
        h.iter()
            .position(|x| x == n)
            .unwrap_or_else(|| panic!("{n}"))
    };
    let (b, pr, u, m) = (
        col("graph_budget_ns"),
        col("graph_predicted_ns"),
        col("graph_used_ns"),
        col("multiplier"),
    );
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(
        (&rows[0][b], &rows[0][pr], &rows[0][u], &rows[0][m]),
        ("350000", "220000", "485000", "1")
    );
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["cycles"][0]["graph"]["budget_ns"], 350_000);
    std::fs::remove_dir_all(&dir).unwrap();
}
