//! `strata key`: the cluster's access keys, kept by the metadata service
//! (docs/s3-compatibility.md, docs/security.md), and the bearer tokens
//! that prove them on the native object API. Its key routes need the
//! admin token the service was started with (STRATA_ADMIN_TOKEN); a
//! token needs only the key's secret.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context};
use axum::http::Method;
use bytes::Bytes;
use strata_client::{Http, KeyRecord, Permission};
use strata_meta::http::ADMIN_TOKEN_HEADER;

/// Create, list and delete access keys (needs STRATA_ADMIN_TOKEN, the
/// token the metadata service was started with), and mint the bearer
/// tokens the object API takes (`strata key token`).
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
    /// Print a bearer token of a key for the object API (send it as
    /// `Authorization: Bearer TOKEN`); it holds the key's permissions until
    /// it expires or the key is deleted. The secret comes from the
    /// environment, never a flag (a flag shows in `ps`): STRATA_SECRET_KEY
    /// for --access-key, else the root key STRATA_ROOT_ACCESS_KEY /
    /// STRATA_ROOT_SECRET_KEY.
    Token {
        /// The key's access key id (default: the root key's).
        #[arg(long, value_name = "ID")]
        access_key: Option<String>,
        /// How long the token is valid, at most 30 days (like 1h, 24h, 7d).
        #[arg(long, value_name = "DURATION", default_value = "24h")]
        expires: String,
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

/// The root key's access key id.
pub const ROOT_ACCESS_ENV: &str = "STRATA_ROOT_ACCESS_KEY";
/// The root key's secret.
pub const ROOT_SECRET_ENV: &str = "STRATA_ROOT_SECRET_KEY";

/// An environment variable, unless unset or empty.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The root key from the environment: Some when both variables are set,
/// None when neither is; an error when only one is.
pub fn root_key_from_env() -> anyhow::Result<Option<strata_s3::auth::Key>> {
    match (var(ROOT_ACCESS_ENV), var(ROOT_SECRET_ENV)) {
        (Some(access_key), Some(secret_key)) => Ok(Some(strata_s3::auth::Key {
            access_key,
            secret_key,
        })),
        (None, None) => Ok(None),
        _ => bail!("set both {ROOT_ACCESS_ENV} and {ROOT_SECRET_ENV}, or neither"),
    }
}

/// How long a token lives unless told (`--expires`).
pub const DEFAULT_TOKEN_LIFE: Duration = Duration::from_secs(24 * 3600);

/// A token of `key` valid for `life` from now.
pub fn token_valid_for(key: &strata_s3::auth::Key, life: Duration) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    strata_s3::auth::mint_token(key, now + life.as_secs())
}

/// `strata key token`: the key from the environment, a token of it.
fn mint(access_key: Option<String>, expires: &str) -> anyhow::Result<String> {
    let key = match access_key {
        Some(id) => match var(SECRET_ENV) {
            Some(secret_key) => strata_s3::auth::Key {
                access_key: id,
                secret_key,
            },
            None => bail!("set {SECRET_ENV} to the secret of key {id}"),
        },
        None => match root_key_from_env()? {
            Some(key) => key,
            None => bail!(
                "give --access-key ID (its secret in {SECRET_ENV}), or set {ROOT_ACCESS_ENV} \
                 and {ROOT_SECRET_ENV} for a token of the root key"
            ),
        },
    };
    let life = crate::units::parse_duration(expires).context("--expires")?;
    if life.is_zero() || life > strata_s3::auth::TOKEN_MAX_LIFETIME {
        bail!("--expires {expires}: a token lives more than 0 s and at most 30 days");
    }
    Ok(token_valid_for(&key, life))
}

/// The secret of the key `strata key token --access-key` names.
const SECRET_ENV: &str = "STRATA_SECRET_KEY";

/// Runs `strata key`.
pub fn run(a: Args) -> anyhow::Result<()> {
    // A token needs the key's secret, not the metadata service.
    let token = match a.command {
        Command::Token { .. } => String::new(),
        _ => token()?,
    };
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
            Command::Token {
                access_key,
                expires,
            } => println!("{}", mint(access_key, &expires)?),
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
