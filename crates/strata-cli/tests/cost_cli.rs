//! `strata cost` end to end: the study's setup (Table 3 defaults, 36
//! systems) on a shared trace, its Pareto set checked independently, TOML
//! overrides, the plot, and clear errors.

mod lab_common;

use lab_common::*;
use serde_json::Value;

#[test]
fn cost_reproduces_the_study_setup_and_marks_a_pareto_set() {
    let t = trace("cloudPhysicsIO.vscsi");
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("pareto.svg");
    let out = strata(&[
        "cost",
        t.to_str().unwrap(),
        "--json",
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Table 3.
    let m = &c["model"];
    assert_eq!(m["disk"]["price"], 100.0);
    assert_eq!(m["disk"]["afr"], 0.04);
    assert_eq!(m["disk"]["seek_ms"], 10.0);
    assert_eq!(m["disk"]["bandwidth_mb_s"], 100.0);
    assert_eq!(m["ram"]["price_per_gb"], 5.0);
    assert_eq!(m["flash"]["price_per_gb"], 0.8);
    assert_eq!(m["flash"]["pe_cycles"], 10000.0);
    assert_eq!(m["flash"]["latency_ms"], 0.5);
    // 3 RAM x 4 flash x 3 disk levels.
    let systems = c["systems"].as_array().unwrap();
    assert_eq!(systems.len(), 36);
    assert_eq!(c["requests"], 113_872);
    let mut seen = std::collections::BTreeSet::new();
    for s in systems {
        seen.insert((
            s["ram_gb"].as_f64().unwrap() as u64,
            s["flash_gb"].as_f64().unwrap() as u64,
            s["disks"].as_u64().unwrap(),
        ));
        // capex = disks x $100 + RAM x $5/GB + flash x $0.80/GB
        let capex = s["disks"].as_f64().unwrap() * 100.0
            + s["ram_gb"].as_f64().unwrap() * 5.0
            + s["flash_gb"].as_f64().unwrap() * 0.8;
        assert!((s["capex"].as_f64().unwrap() - capex).abs() < 1e-6);
        // disks fail at 4% a year
        let od = s["disks"].as_f64().unwrap() * 4.0;
        assert!((s["opex_disk"].as_f64().unwrap() - od).abs() < 1e-6);
    }
    for r in [10, 30, 100] {
        for f in [0, 60, 120, 240] {
            for d in [10, 15, 20] {
                assert!(seen.contains(&(r, f, d)), "missing {r}/{f}/{d}");
            }
        }
    }
    // The Pareto set: check it independently of the tool.
    let pts: Vec<(f64, f64, bool)> = systems
        .iter()
        .map(|s| {
            (
                s["capex"].as_f64().unwrap(),
                s["latency"]["mean_ms"].as_f64().unwrap(),
                s["pareto"].as_bool().unwrap(),
            )
        })
        .collect();
    let marked = pts.iter().filter(|p| p.2).count();
    assert!((1..36).contains(&marked), "{marked}");
    assert_eq!(c["pareto"].as_array().unwrap().len(), marked);
    for (i, &(ci, li, pi)) in pts.iter().enumerate() {
        // strictly better in both: never possible for a marked system
        let beaten = pts
            .iter()
            .enumerate()
            .any(|(j, &(cj, lj, _))| j != i && cj < ci && lj < li * (1.0 - 0.005));
        if pi {
            assert!(!beaten, "system {i} is marked but dominated");
        }
        // an unmarked system is dominated by someone no dearer and no slower
        if !pi {
            let dominated = pts
                .iter()
                .enumerate()
                .any(|(j, &(cj, lj, _))| j != i && cj <= ci && lj <= li * 1.005);
            assert!(dominated, "system {i} is unmarked but not dominated");
        }
    }
    // The cheapest system is always justifiable.
    let cheapest = pts
        .iter()
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)))
        .unwrap();
    assert!(cheapest.2);
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("Pareto"));
}

#[test]
fn cost_config_overrides_and_errors() {
    let t = trace("cloudPhysicsIO.vscsi");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("prices.toml");
    std::fs::write(
        &cfg,
        "[flash]\nprice_per_gb = 0.1\n[grid]\nram_gb = [10]\nflash_gb = [0, 240]\ndisks = [10]\n",
    )
    .unwrap();
    let out = strata(&[
        "cost",
        t.to_str().unwrap(),
        "--json",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    let systems = c["systems"].as_array().unwrap();
    assert_eq!(systems.len(), 2);
    assert_eq!(systems[1]["capex"], 1000.0 + 50.0 + 24.0);
    // untouched keys keep Table 3
    assert_eq!(c["model"]["disk"]["price"], 100.0);

    let out = strata(&["cost", "--print-config"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("pe_cycles = 10000"), "{text}");

    std::fs::write(&cfg, "[disk]\nprise = 100\n").unwrap();
    let out = strata(&[
        "cost",
        t.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("prise") && err.contains("prices.toml"),
        "{err}"
    );

    let out = strata(&["cost", "/no/such/trace"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/trace"));
}
