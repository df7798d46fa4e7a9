//! `strata key`: the cluster's S3 access keys, kept by the metadata service
//! (docs/s3-compatibility.md). Its key routes need the admin token the
//! service was started with (STRATA_ADMIN_TOKEN).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context};
use axum::http::Method;
use bytes::Bytes;
use strata_client::{Http, KeyRecord, Permission};
use strata_meta::http::ADMIN_TOKEN_HEADER;

/// Create, list and delete S3 access keys (needs STRATA_ADMIN_TOKEN, the
/// token the metadata service was started with).
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Create a key; prints its access key id and secret (shown only once).
    Create {
        /// Metadata service address.
        #[arg(long, value_name = "ADDR")]
        meta: String,
        /// A bucket and what the key may do in it: BUCKET:read, BUCKET:write
        /// (read, put, delete objects) or BUCKET:owner (also delete the
        /// bucket); repeat for more buckets.
        #[arg(long = "bucket", value_name = "BUCKET:PERM")]
        buckets: Vec<String>,
    },
    /// List the keys and their permissions (not their secrets).
    List {
        /// Metadata service address.
        #[arg(long, value_name = "ADDR")]
        meta: String,
    },
    /// Delete a key.
    Delete {
        /// Metadata service address.
        #[arg(long, value_name = "ADDR")]
        meta: String,
        /// Its access key id.
        access_key: String,
    },
}

fn token() -> anyhow::Result<String> {
    match std::env::var("STRATA_ADMIN_TOKEN") {
        Ok(t) if !t.is_empty() => Ok(t),
        _ => bail!("set STRATA_ADMIN_TOKEN to the metadata service's admin token"),
    }
}

/// Runs `strata key`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let token = token()?;
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    rt.block_on(async move {
        let http = Http::new();
        let send = |method: Method, url: String, body: Vec<u8>| {
            let (http, token) = (&http, token.clone());
            async move {
                let r = http
                    .send_with_headers(
                        method,
                        &url,
                        &[
                            (ADMIN_TOKEN_HEADER, token.as_str()),
                            ("content-type", "application/json"),
                        ],
                        Bytes::from(body),
                        Duration::from_secs(10),
                    )
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                if !r.status.is_success() {
                    bail!("{url}: {}: {}", r.status, String::from_utf8_lossy(&r.body));
                }
                Ok(r.body)
            }
        };
        match a.command {
            Command::Create { meta, buckets } => {
                let mut perms = BTreeMap::new();
                for b in &buckets {
                    let (name, p) = b
                        .rsplit_once(':')
                        .with_context(|| format!("--bucket {b}: give BUCKET:PERM"))?;
                    let p: Permission = p
                        .parse()
                        .map_err(|e| anyhow::anyhow!("--bucket {b}: {e}"))?;
                    perms.insert(name.to_string(), p);
                }
                let body = serde_json::to_vec(&serde_json::json!({ "buckets": perms }))?;
                let r = send(Method::POST, format!("http://{meta}/v1/keys"), body).await?;
                let v: serde_json::Value = serde_json::from_slice(&r)?;
                println!("access key: {}", v["access_key"].as_str().unwrap_or(""));
                println!("secret key: {}", v["secret_key"].as_str().unwrap_or(""));
            }
            Command::List { meta } => {
                let r = send(Method::GET, format!("http://{meta}/v1/keys"), Vec::new()).await?;
                let keys: BTreeMap<String, KeyRecord> = serde_json::from_slice(&r)?;
                for (access, k) in keys {
                    let perms: Vec<String> = k
                        .buckets
                        .iter()
                        .map(|(b, p)| format!("{b}:{}", format!("{p:?}").to_lowercase()))
                        .collect();
                    println!("{access}  {}", perms.join(" "));
                }
            }
            Command::Delete { meta, access_key } => {
                send(
                    Method::DELETE,
                    format!("http://{meta}/v1/keys/{access_key}"),
                    Vec::new(),
                )
                .await?;
                println!("deleted {access_key}");
            }
        }
        Ok(())
    })
}
