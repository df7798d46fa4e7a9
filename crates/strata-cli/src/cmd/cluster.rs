//! `strata cluster`: status, add-node, remove-node, and the recovery
//! simulation.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use axum::http::Method;
use strata_client::Http;
use strata_meta::api::{ChangeResponse, Status};
use strata_placement::recovery::{simulate, SimParams};

use crate::units::{format_bytes, parse_bytes};

/// Inspect and change a cluster through its metadata service.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Nodes, disks, table version, rows under-replicated, recovery progress.
    Status(StatusArgs),
    /// Put a registered (pending) node into the placement table; only its
    /// new disks receive data.
    AddNode(ChangeArgs),
    /// Take a node out: its rows move to other disks (it stays readable
    /// while they drain).
    RemoveNode(ChangeArgs),
    /// Wait until no row is under-replicated (recovery finished).
    Wait(WaitArgs),
    /// Simulate recovery from a failed node on clusters of many disks and
    /// set it against FDS's published figures.
    SimulateRecovery(SimArgs),
    /// The cluster's tier plan (`strata provision --plan` writes one): every
    /// node reloads it within a heartbeat of a change.
    Plan(PlanArgs),
}

#[derive(clap::Args)]
struct PlanArgs {
    #[command(subcommand)]
    command: PlanCommand,
}

#[derive(clap::Subcommand)]
enum PlanCommand {
    /// Check a tier plan file and store it in the metadata service.
    Set {
        /// Metadata service address.
        #[arg(long, value_name = "ADDR")]
        meta: String,
        /// The plan (JSON from `strata provision --plan`).
        file: PathBuf,
    },
    /// Print the tier plan in force (JSON).
    Get {
        /// Metadata service address.
        #[arg(long, value_name = "ADDR")]
        meta: String,
    },
}

#[derive(clap::Args)]
struct StatusArgs {
    /// Metadata service address.
    #[arg(long, value_name = "ADDR")]
    meta: String,
    /// One JSON object (fields: table_version, rows, rows_under_replicated,
    /// nodes, recovery, ...).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ChangeArgs {
    /// Metadata service address.
    #[arg(long, value_name = "ADDR")]
    meta: String,
    /// The node's id (as `strata cluster status` lists it).
    node: u32,
}

#[derive(clap::Args)]
struct WaitArgs {
    /// Metadata service address.
    #[arg(long, value_name = "ADDR")]
    meta: String,
    /// Give up after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    timeout: u64,
}

#[derive(clap::Args)]
struct SimArgs {
    /// Cluster sizes in disks (comma-separated).
    #[arg(
        long,
        value_name = "N,N,...",
        default_value = "100,250,500,1000,2000,3000"
    )]
    disks: String,
    /// Disks per node.
    #[arg(long, value_name = "N", default_value_t = 7)]
    disks_per_node: usize,
    /// Disks lost at once (all on one node).
    #[arg(long, value_name = "N", default_value_t = 1)]
    failed: usize,
    /// Data lost in total.
    #[arg(long, value_name = "SIZE", default_value = "47GB")]
    lost: String,
    /// Bytes per second one disk moves, read and write together.
    #[arg(long, value_name = "SIZE", default_value = "80MB")]
    disk_rate: String,
    /// Replicas per row (default 3).
    #[arg(long, value_name = "R")]
    replication: Option<usize>,
    /// Simulate the rebuild of erasure-coded stripes K+M wide instead of
    /// replicas (docs/erasure-coding.md): each lost shard is read from K
    /// survivors and written to a new disk.
    #[arg(long, value_name = "K+M", conflicts_with = "replication")]
    ec: Option<String>,
    /// One JSON object per size instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `strata cluster ...`.
pub fn run(a: Args) -> anyhow::Result<()> {
    match a.command {
        Command::SimulateRecovery(s) => simulate_cmd(s),
        other => {
            let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            rt.block_on(async move {
                match other {
                    Command::Status(s) => status(s).await,
                    Command::AddNode(c) => change(c, "add").await,
                    Command::RemoveNode(c) => change(c, "remove").await,
                    Command::Wait(w) => wait(w).await,
                    Command::Plan(p) => plan(p).await,
                    Command::SimulateRecovery(_) => Ok(()),
                }
            })
        }
    }
}

async fn fetch_status(http: &Http, meta: &str) -> anyhow::Result<Status> {
    http.get_json(&format!("http://{meta}/v1/status"), Duration::from_secs(10))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("asking the metadata service at {meta}"))
}

async fn status(a: StatusArgs) -> anyhow::Result<()> {
    let http = Http::new();
    let st = fetch_status(&http, &a.meta).await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&st)?);
        return Ok(());
    }
    println!(
        "table version {}  rows {}  replication {}  rows under-replicated {}  ({})",
        st.table_version, st.rows, st.replication, st.rows_under_replicated, st.backend
    );
    let r = &st.recovery;
    if r.version > 0 {
        println!(
            "recovery to v{}: {}/{} row copies, {} copied, {:.1} s{}",
            r.version,
            r.transfers_done,
            r.transfers_total,
            format_bytes(r.bytes_copied),
            r.seconds,
            if r.complete {
                ", complete"
            } else {
                ", in progress"
            }
        );
    }
    println!(
        "{:>5}  {:<22} {:<8} {:>10}  disks",
        "node", "address", "state", "last beat"
    );
    for n in &st.nodes {
        let beat = n.last_heartbeat_ms_ago.map_or("-".to_string(), |ms| {
            format!("{:.1}s ago", ms as f64 / 1000.0)
        });
        let disks: Vec<String> = n
            .disks
            .iter()
            .map(|d| {
                format!(
                    "{} {:?} {} {} rows {}",
                    d.id,
                    d.tier,
                    format_bytes(d.capacity_bytes),
                    d.state,
                    d.rows
                )
                .to_lowercase()
            })
            .collect();
        println!(
            "{:>5}  {:<22} {:<8} {:>10}  {}",
            n.id.to_string(),
            n.addr,
            format!("{:?}", n.state).to_lowercase(),
            beat,
            disks.join("; ")
        );
    }
    // Each live node's background workers (its own status route).
    for n in st
        .nodes
        .iter()
        .filter(|n| n.last_heartbeat_ms_ago.is_some())
    {
        let url = format!("http://{}/cluster/v1/status", n.addr);
        match http
            .get_json::<serde_json::Value>(&url, Duration::from_secs(5))
            .await
        {
            Ok(v) => {
                let workers: Vec<String> = v["workers"]
                    .as_array()
                    .map(|ws| {
                        ws.iter()
                            .map(|w| {
                                let errors = w["errors"].as_u64().unwrap_or(0);
                                // A loop its owner runs has no state of
                                // the runner's; a throttle is shown.
                                let state = if w["owned_elsewhere"].as_bool() == Some(true) {
                                    "(in its owner)".to_string()
                                } else {
                                    w["state"].as_str().unwrap_or("?").to_string()
                                };
                                let limit = w["throttle_bytes_per_s"]
                                    .as_u64()
                                    .map(|b| format!(" at most {:.1} MiB/s", b as f64 / 1048576.0))
                                    .unwrap_or_default();
                                format!(
                                    "{} {state} {} passes{limit}{}",
                                    w["name"].as_str().unwrap_or("?"),
                                    w["passes"].as_u64().unwrap_or(0),
                                    if errors > 0 {
                                        format!(
                                            " {errors} errors (last: {})",
                                            w["last_error"].as_str().unwrap_or("")
                                        )
                                    } else {
                                        String::new()
                                    }
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                println!("workers {}: {}", n.id, workers.join("; "));
            }
            Err(e) => println!("workers {}: status unavailable: {e}", n.id),
        }
    }
    for (node, s) in &st.scrub {
        println!(
            "scrub {node}: {} rows, {} objects checked, {} corrupt, {} missing, {} repaired ({} object records, {} deletes propagated), {} tombstones purged",
            s.rows_checked,
            s.objects_checked,
            s.corrupt,
            s.missing,
            s.repaired,
            s.objects_repaired,
            s.deletes_propagated,
            s.tombstones_purged
        );
    }
    Ok(())
}

async fn plan(a: PlanArgs) -> anyhow::Result<()> {
    let http = Http::new();
    match a.command {
        PlanCommand::Set { meta, file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let plan = strata_provision::TierPlan::from_json(&text)
                .map_err(|e| anyhow::anyhow!("{e}"))
                .with_context(|| format!("{} is not a valid tier plan", file.display()))?;
            let value: serde_json::Value =
                serde_json::from_str(&plan.to_json()).context("re-encoding the plan")?;
            let r = admin_send(
                &http,
                Method::PUT,
                &format!("http://{meta}/v1/tier-plan"),
                serde_json::to_vec(&value)?,
            )
            .await
            .with_context(|| format!("storing the plan at {meta}"))?;
            println!(
                "tier plan version {} stored ({} workloads); nodes reload it within a heartbeat",
                r["version"],
                plan.workloads.len()
            );
        }
        PlanCommand::Get { meta } => {
            let v: serde_json::Value = http
                .get_json(
                    &format!("http://{meta}/v1/tier-plan"),
                    Duration::from_secs(10),
                )
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))
                .with_context(|| format!("asking {meta} for the tier plan"))?;
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    }
    Ok(())
}

/// Sends a control request to the metadata service with the admin token of
/// the environment (`STRATA_ADMIN_TOKEN`); the JSON answer.
async fn admin_send(
    http: &Http,
    method: Method,
    url: &str,
    body: Vec<u8>,
) -> anyhow::Result<serde_json::Value> {
    let token = std::env::var(strata_http::auth::ADMIN_TOKEN_ENV).unwrap_or_default();
    let bearer = format!("Bearer {token}");
    let mut headers = vec![("content-type", "application/json")];
    if !token.is_empty() {
        headers.push(("authorization", bearer.as_str()));
    }
    let r = http
        .send_with_headers(method, url, &headers, body.into(), Duration::from_secs(30))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let text = String::from_utf8_lossy(&r.body).into_owned();
    if r.status == axum::http::StatusCode::UNAUTHORIZED
        || r.status == axum::http::StatusCode::FORBIDDEN
    {
        bail!(
            "{url}: {} {text} (set {} to the cluster's admin token)",
            r.status,
            strata_http::auth::ADMIN_TOKEN_ENV
        );
    }
    if !r.status.is_success() {
        bail!("{url}: {} {text}", r.status);
    }
    serde_json::from_slice(&r.body).with_context(|| format!("{url}: not JSON: {text}"))
}

async fn change(a: ChangeArgs, what: &str) -> anyhow::Result<()> {
    let http = Http::new();
    let url = format!("http://{}/v1/nodes/{}/{what}", a.meta, a.node);
    let r: ChangeResponse = serde_json::from_value(
        admin_send(&http, Method::POST, &url, b"{}".to_vec())
            .await
            .with_context(|| format!("{what}-node {}", a.node))?,
    )
    .context("the metadata service's answer")?;
    println!(
        "node {} {}: table version {}, {} row copies planned",
        a.node,
        if what == "add" { "added" } else { "removed" },
        r.table_version,
        r.transfers
    );
    Ok(())
}

async fn wait(a: WaitArgs) -> anyhow::Result<()> {
    let http = Http::new();
    let start = Instant::now();
    let pb = crate::progress::bar(0, "recovery");
    loop {
        let st = fetch_status(&http, &a.meta).await?;
        pb.set_length(st.recovery.transfers_total as u64);
        pb.set_position(st.recovery.transfers_done as u64);
        if st.table_version > 0 && st.rows_under_replicated == 0 {
            pb.finish_and_clear();
            println!(
                "all {} rows fully replicated at table version {} (last recovery {:.1} s)",
                st.rows, st.table_version, st.recovery.seconds
            );
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(a.timeout) {
            bail!(
                "{} rows still under-replicated after {} s",
                st.rows_under_replicated,
                a.timeout
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// FDS's measured recoveries (OSDI 2012 talk): disks, failed, bytes, seconds.
const FDS: [(usize, usize, f64, f64); 4] = [
    (100, 1, 47e9, 19.2),
    (1000, 1, 47e9, 3.3),
    (1000, 1, 92e9, 6.2),
    (1000, 7, 655e9, 33.7),
];

fn simulate_cmd(a: SimArgs) -> anyhow::Result<()> {
    let sizes: Vec<usize> = a
        .disks
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .with_context(|| {
            format!(
                "--disks {:?}: expected numbers separated by commas",
                a.disks
            )
        })?;
    let lost = parse_bytes(&a.lost).context("--lost")?;
    let rate = parse_bytes(&a.disk_rate).context("--disk-rate")? as f64;
    if rate <= 0.0 {
        bail!("--disk-rate must be positive");
    }
    if a.failed == 0 || a.failed > a.disks_per_node {
        bail!("--failed must be between 1 and --disks-per-node");
    }
    let ec = match &a.ec {
        Some(c) => Some(crate::units::parse_code(c).context("--ec")?),
        None => None,
    };
    let replication = a.replication.unwrap_or(3);
    // Nodes a row needs: the replicas, or the K+M shards of a stripe.
    let width = ec.map_or(replication, |(k, m)| k + m);
    if !a.json {
        println!(
            "lost {} on {} disk(s) of one node; each disk moves {}/s (reads + writes); {}",
            format_bytes(lost),
            a.failed,
            format_bytes(rate as u64),
            match ec {
                Some((k, m)) => format!("stripes {k}+{m} (a lost shard read from {k} survivors)"),
                None => format!("{replication} replicas"),
            }
        );
        println!(
            "{:>6} {:>9} {:>8} {:>8} {:>12} {:>9} {:>10}",
            "disks", "rows", "copies", "disks", "busiest", "balance", "seconds"
        );
    }
    for &n in &sizes {
        // A rebuilt copy goes to a node outside the row and off the failed
        // node: one more node than the row's width.
        match ec {
            None if n < replication.max(2) * a.disks_per_node => {
                bail!("{n} disks make fewer nodes than replicas")
            }
            Some(_) if n < (width + 1) * a.disks_per_node => bail!(
                "{n} disks make too few nodes for stripes {width} wide (a stripe also needs a node outside it to rebuild onto)"
            ),
            _ => {}
        }
        let t = Instant::now();
        let params = SimParams {
            disks: n,
            disks_per_node: a.disks_per_node,
            failed_disks: a.failed,
            bytes_lost: lost,
            disk_bytes_per_sec: rate,
            replication,
        };
        let r = match ec {
            Some((k, m)) => strata_placement::ec::simulate_ec(&params, k, m),
            None => simulate(&params),
        }
        .with_context(|| format!("simulating {n} disks"))?;
        let balance = r.busiest_disk_bytes as f64 / r.mean_disk_bytes.max(1.0);
        if a.json {
            println!(
                "{}",
                serde_json::json!({
                    "disks": n, "rows": r.rows, "copies": r.rows_recovered,
                    "disks_involved": r.disks_involved, "busiest_disk_bytes": r.busiest_disk_bytes,
                    "mean_disk_bytes": r.mean_disk_bytes, "seconds": r.seconds,
                    "lost_rows": r.lost_rows, "compute_seconds": t.elapsed().as_secs_f64(),
                })
            );
        } else {
            println!(
                "{:>6} {:>9} {:>8} {:>8} {:>12} {:>8.2}x {:>10.2}",
                n,
                r.rows,
                r.rows_recovered,
                r.disks_involved,
                format_bytes(r.busiest_disk_bytes),
                balance,
                r.seconds
            );
        }
    }
    if !a.json {
        println!("FDS measured (detection time included):");
        for (disks, failed, bytes, secs) in FDS {
            println!(
                "  {disks:>5} disks, {failed} failed, {:>4.0} GB in {secs:>5.1} s",
                bytes / 1e9
            );
        }
    }
    Ok(())
}
