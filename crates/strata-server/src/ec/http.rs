//! The stripe routes of the node protocol (`/cluster/v1/ec/...`): receive a
//! shard or index file in chunks and finish it durably, serve one, delete a
//! stripe's files, and the node's stripe counters.

use std::path::Path;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use strata_placement::DiskId;

use super::files::stripe_dir;
use super::format::sync_dir;
use crate::node::ClusterNode;

type Node = Arc<ClusterNode>;

#[derive(Deserialize)]
pub(crate) struct FileQuery {
    pub(super) disk: u32,
    #[serde(default)]
    pub(super) at: Option<u64>,
    #[serde(default)]
    pub(super) len: Option<u64>,
    /// PUT: the file is complete at this many bytes: fsync and rename.
    #[serde(default)]
    pub(super) done: Option<u64>,
}

pub(super) fn text(code: StatusCode, msg: impl Into<String>) -> Response {
    (code, msg.into()).into_response()
}

pub(super) fn valid_file(name: &str) -> bool {
    name == "index"
        || name
            .strip_prefix("shard-")
            .is_some_and(|n| n.len() == 2 && n.bytes().all(|c| c.is_ascii_digit()))
}

/// `PUT /cluster/v1/ec/{stripe}/{file}?disk=D&at=A` writes a chunk of a
/// shard or index file being received (to `FILE.part`); `?disk=D&done=LEN`
/// then makes it durable under its name.
pub(crate) async fn put_file(
    State(node): State<Node>,
    UrlPath((stripe, file)): UrlPath<(u64, String)>,
    Query(q): Query<FileQuery>,
    body: Bytes,
) -> Response {
    if !valid_file(&file) {
        return text(
            StatusCode::BAD_REQUEST,
            format!("no such stripe file {file:?}"),
        );
    }
    let Some(dir) = stripe_dir(&node, DiskId(q.disk), stripe) else {
        return text(
            StatusCode::NOT_FOUND,
            format!("disk {} is not a row disk here", q.disk),
        );
    };
    let res = tokio::task::spawn_blocking(move || receive(&dir, &file, q.at, q.done, &body)).await;
    match res {
        Ok(Ok(())) => text(StatusCode::OK, "ok"),
        Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// One request of a stripe file being received into `dir`: a chunk of
/// `body` at `at` (offset 0 creates `FILE.part` afresh), or with `done` the
/// end — the part must hold `done` bytes — made durable under its name
/// (fsync, rename, directory fsync). After a power cut `dir/FILE` is whole
/// or absent; the `.part` may hold anything and is swept.
pub(super) fn receive(
    dir: &Path,
    file: &str,
    at: Option<u64>,
    done: Option<u64>,
    body: &[u8],
) -> std::io::Result<()> {
    strata_fs::create_dir_all(dir)?;
    let part = dir.join(format!("{file}.part"));
    if let Some(len) = done {
        let f = strata_fs::open(&part, std::fs::OpenOptions::new().write(true))?;
        if f.metadata()?.len() != len {
            return Err(std::io::Error::other(format!(
                "{}: {} bytes received, {len} announced",
                part.display(),
                f.metadata()?.len()
            )));
        }
        strata_fs::sync_all(&f)?;
        strata_fs::rename(&part, &dir.join(file))?;
        return sync_dir(dir);
    }
    let at = at.unwrap_or(0);
    let f = if at == 0 {
        strata_fs::create(&part)?
    } else {
        strata_fs::open(&part, std::fs::OpenOptions::new().write(true))?
    };
    strata_fs::write_all_at(&f, body, at)
}

/// `GET /cluster/v1/ec/{stripe}/{file}?disk=D[&at=A&len=N]`: a file or a
/// byte range of it (one read).
pub(crate) async fn get_file(
    State(node): State<Node>,
    UrlPath((stripe, file)): UrlPath<(u64, String)>,
    Query(q): Query<FileQuery>,
) -> Response {
    if !valid_file(&file) {
        return text(
            StatusCode::BAD_REQUEST,
            format!("no such stripe file {file:?}"),
        );
    }
    let Some(dir) = stripe_dir(&node, DiskId(q.disk), stripe) else {
        return text(
            StatusCode::NOT_FOUND,
            format!("disk {} is not a row disk here", q.disk),
        );
    };
    let path = dir.join(&file);
    let res = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        match (q.at, q.len) {
            (Some(at), Some(len)) => {
                let f = std::fs::File::open(&path)?;
                let mut buf = vec![0u8; len as usize];
                f.read_exact_at(&mut buf, at)?;
                Ok(buf)
            }
            _ => std::fs::read(&path),
        }
    })
    .await;
    match res {
        Ok(Ok(b)) => (StatusCode::OK, b).into_response(),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => text(
            StatusCode::NOT_FOUND,
            format!("stripe {stripe:016x} has no {file} here"),
        ),
        Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `DELETE /cluster/v1/ec/{stripe}?disk=D`: drops this disk's files of a
/// stripe (after compaction re-encoded it).
pub(crate) async fn delete_stripe(
    State(node): State<Node>,
    UrlPath(stripe): UrlPath<u64>,
    Query(q): Query<FileQuery>,
) -> Response {
    let Some(dir) = stripe_dir(&node, DiskId(q.disk), stripe) else {
        return text(
            StatusCode::NOT_FOUND,
            format!("disk {} is not a row disk here", q.disk),
        );
    };
    let gone = strata_fs::remove_dir_all(&dir).and_then(|()| sync_dir(strata_fs::parent(&dir)));
    match gone {
        Ok(()) => text(StatusCode::OK, "deleted"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => text(StatusCode::NOT_FOUND, "absent"),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `GET /cluster/v1/ec/status`: the task's counters.
pub(crate) async fn status(State(node): State<Node>) -> Response {
    Json(node.ec.stats()).into_response()
}

// ----------------------------------------------------------- the GET path

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect()
    }

    /// A shard or index file received in chunks then finished, the power
    /// cut after each file operation in turn: under its name the file is
    /// the whole of what was sent, or absent; once the finishing request
    /// was answered, it is there.
    #[test]
    #[allow(clippy::disallowed_methods)] // acknowledgements around the model
    fn a_received_stripe_file_is_whole_or_absent_at_every_step() {
        use strata_fs::power::{cut_at_every_step, Cut};
        let scratch = tempfile::tempdir().unwrap();
        let whole = pattern(3 * 4096 + 100, 7);
        for how in [Cut::Drop, Cut::Tear] {
            let steps = cut_at_every_step(
                scratch.path(),
                how,
                |_| {},
                |root| {
                    let dir = root.join("ec").join(format!("{:016x}", 9));
                    for (n, c) in whole.chunks(4096).enumerate() {
                        receive(&dir, "shard-01", Some(n as u64 * 4096), None, c)?;
                    }
                    receive(&dir, "shard-01", None, Some(whole.len() as u64), &[])?;
                    std::fs::write(root.join("ack"), b"")
                },
                |root, n| {
                    let f = root.join("ec").join(format!("{:016x}", 9)).join("shard-01");
                    match std::fs::read(&f) {
                        Ok(b) => assert!(b == whole, "{how:?} step {n}: {} bytes", b.len()),
                        Err(e) => assert!(
                            !root.join("ack").exists(),
                            "{how:?} step {n}: finished, then gone: {e}"
                        ),
                    }
                },
            )
            .unwrap();
            assert!(steps > 8, "{how:?}: {steps} steps");
        }
    }
}
