//! Where the state lives: a file for a single node (no extra process), or
//! etcd for a cluster (docs/placement.md, "Metadata storage").

use std::path::{Path, PathBuf};

use strata_placement::PlacementTable;

use crate::etcd::{Compare, EtcdClient, EtcdError, Op};
use crate::state::{ClusterState, STATE_FORMAT};
use crate::MetaError;

/// Table versions kept in etcd besides the current one.
const KEEP_VERSIONS: u64 = 16;

/// The metadata store.
pub enum Backend {
    /// One JSON file, replaced atomically (write, fsync, rename).
    File(FileBackend),
    /// etcd v3.
    Etcd(Box<EtcdBackend>),
}

impl Backend {
    /// Loads the saved state, if any.
    pub async fn load(&mut self) -> Result<Option<ClusterState>, MetaError> {
        match self {
            Backend::File(f) => f.load().await,
            Backend::Etcd(e) => e.load().await,
        }
    }

    /// Saves `state` (durably, before the change is acknowledged).
    pub async fn save(&mut self, state: &ClusterState) -> Result<(), MetaError> {
        match self {
            Backend::File(f) => f.save(state).await,
            Backend::Etcd(e) => e.save(state).await,
        }
    }

    /// Connects to etcd at `endpoint` and keeps the state under `prefix`.
    pub async fn etcd(endpoint: &str, prefix: &str) -> Result<Backend, MetaError> {
        Ok(Backend::Etcd(Box::new(
            EtcdBackend::connect(endpoint, prefix).await?,
        )))
    }

    /// "file:PATH" or "etcd:URL".
    pub fn describe(&self) -> String {
        match self {
            Backend::File(f) => format!("file:{}", f.path.display()),
            Backend::Etcd(e) => format!("etcd:{}{}", e.endpoint, e.prefix),
        }
    }
}

/// The embedded store: `DIR/meta.json`.
///
/// A node's metadata lives on the node's own volume, so the file must be
/// writable when that volume is full (a node killed on a full volume
/// registers again at start, and waits for that write): beside it,
/// `DIR/meta.reserve` holds zeros that are given back to the file system
/// when a save meets ENOSPC, then the save is tried again, and the reserve
/// is filled again afterwards as far as free space allows. A save of the
/// state the file already holds writes nothing.
pub struct FileBackend {
    path: PathBuf,
    reserve: PathBuf,
    /// The bytes `meta.json` holds (as last read or written).
    saved: std::sync::Mutex<Option<Vec<u8>>>,
}

/// The smallest space kept in `meta.reserve`; it is also at least twice
/// the state file's size, room for the new copy beside the old one.
const RESERVE_MIN: u64 = 256 << 10;

/// A file system block, the unit files take space in.
const PAGE: u64 = 4096;

impl FileBackend {
    /// State kept in `dir/meta.json` (the directory is created). The
    /// directory is made the service's user's only (0700, an older one
    /// included): the state holds the S3 keys' secrets (issue 34).
    pub fn new(dir: &Path) -> Result<FileBackend, MetaError> {
        use std::os::unix::fs::PermissionsExt;
        strata_fs::create_dir_all(dir)
            .and_then(|_| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
            .map_err(|source| MetaError::File {
                path: dir.display().to_string(),
                source,
            })?;
        Ok(FileBackend {
            path: dir.join("meta.json"),
            reserve: dir.join("meta.reserve"),
            saved: std::sync::Mutex::new(None),
        })
    }

    fn remember(&self, bytes: Vec<u8>) {
        let mut g = match self.saved.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        *g = Some(bytes);
    }

    fn unchanged(&self, bytes: &[u8]) -> bool {
        let g = match self.saved.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.as_deref() == Some(bytes)
    }

    async fn load(&self) -> Result<Option<ClusterState>, MetaError> {
        let bytes = match tokio::fs::read(&self.path).await {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(MetaError::File {
                    path: self.path.display().to_string(),
                    source,
                })
            }
        };
        let state = decode_state(&bytes, &self.path.display().to_string())?;
        // A store made before the reserve existed gets one now (as far as
        // free space allows; never an error).
        let (reserve, want) = (self.reserve.clone(), reserve_size(bytes.len()));
        let _ = tokio::task::spawn_blocking(move || top_up(&reserve, want)).await;
        self.remember(bytes);
        Ok(Some(state))
    }

    async fn save(&self, state: &ClusterState) -> Result<(), MetaError> {
        let bytes = serde_json::to_vec_pretty(state).map_err(|e| MetaError::Corrupt {
            what: self.path.display().to_string(),
            reason: e.to_string(),
        })?;
        if self.unchanged(&bytes) {
            return Ok(());
        }
        let (path, reserve) = (self.path.clone(), self.reserve.clone());
        let err_path = path.display().to_string();
        let bytes = tokio::task::spawn_blocking(move || {
            save_with_reserve(&path, &reserve, &bytes).map(|()| bytes)
        })
        .await
        .map_err(|e| MetaError::File {
            path: err_path.clone(),
            source: std::io::Error::other(e),
        })?
        .map_err(|source| MetaError::File {
            path: err_path,
            source,
        })?;
        self.remember(bytes);
        Ok(())
    }
}

/// Bytes kept in reserve for a state file of `len` bytes.
fn reserve_size(len: usize) -> u64 {
    (2 * len as u64).max(RESERVE_MIN)
}

fn is_no_space(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(28) | Some(27))
}

/// Writes `bytes` to `path` atomically; on ENOSPC gives the reserve back
/// and tries once more; then fills the reserve again (best effort).
fn save_with_reserve(path: &Path, reserve: &Path, bytes: &[u8]) -> std::io::Result<()> {
    match write_atomically(path, bytes) {
        Ok(()) => {}
        Err(e) if is_no_space(&e) => {
            // Give back only what this save needs (the new copy and a page
            // of slack), so that the reserve lasts over many saves on a
            // full volume: each spends the state's growth, and the old
            // copy's blocks go back to the reserve afterwards.
            let have = std::fs::metadata(reserve).map_or(0, |m| m.len());
            if have == 0 {
                // No reserve to give back: the volume is simply full.
                return Err(e);
            }
            let need = bytes.len() as u64 + 2 * PAGE;
            std::fs::OpenOptions::new()
                .write(true)
                .open(reserve)
                .and_then(|f| {
                    strata_fs::set_len(&f, have.saturating_sub(need))?;
                    strata_fs::sync_all(&f)
                })?;
            eprintln!(
                "strata meta: {} met a full volume; writing it in the space reserved for it ({})",
                path.display(),
                reserve.display()
            );
            write_atomically(path, bytes)?;
        }
        Err(e) => return Err(e),
    }
    top_up(reserve, reserve_size(bytes.len()));
    Ok(())
}

/// Grows the reserve file to `want` bytes of real (written, not sparse)
/// blocks, as far as free space allows; never fails.
fn top_up(reserve: &Path, want: u64) {
    let have = std::fs::metadata(reserve).map_or(0, |m| m.len());
    if have >= want {
        return;
    }
    let Ok(f) = strata_fs::open(
        reserve,
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true),
    ) else {
        return;
    };
    let zeros = [0u8; 4096];
    let mut at = have;
    while at < want {
        let n = (want - at).min(zeros.len() as u64) as usize;
        if strata_fs::write_all_at(&f, &zeros[..n], at).is_err() {
            break;
        }
        at += n as u64;
    }
    let _ = strata_fs::sync_all(&f);
}

/// [`strata_fs::write_atomic`]: a temporary file, fsync, rename, directory
/// fsync (a failed write removes the temporary file: a partial copy would
/// hold space a retry needs).
///
/// The file is readable by the service's user only (0600, set on the
/// temporary file before its bytes): it holds the S3 keys' secrets.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    strata_fs::write_atomic_with(path, |f| {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        strata_fs::write_all_at(f, bytes, 0)
    })
}

fn decode_state(bytes: &[u8], what: &str) -> Result<ClusterState, MetaError> {
    let s: ClusterState = serde_json::from_slice(bytes).map_err(|e| MetaError::Corrupt {
        what: what.to_string(),
        reason: e.to_string(),
    })?;
    if s.format != STATE_FORMAT {
        return Err(MetaError::Corrupt {
            what: what.to_string(),
            reason: format!(
                "state format {} (this build reads {STATE_FORMAT})",
                s.format
            ),
        });
    }
    Ok(s)
}

/// The cluster store: keys under a prefix in etcd.
///
/// - `PREFIX/state`: the state as JSON, without the table;
/// - `PREFIX/table/current`: the current table version (decimal);
/// - `PREFIX/table/VVVVVVVVVVVVVVVVVVVV`: each table version as JSON
///   (20-digit zero-padded version; the last 16 are kept).
///
/// Every save is one transaction guarded by the state key's revision, so
/// two metadata services on one prefix cannot overwrite each other.
pub struct EtcdBackend {
    client: EtcdClient,
    endpoint: String,
    prefix: String,
    /// mod_revision of the state key as last read or written (0: absent).
    revision: i64,
}

impl EtcdBackend {
    /// Connects to etcd at `endpoint` (e.g. `http://127.0.0.1:2379`).
    pub async fn connect(endpoint: &str, prefix: &str) -> Result<EtcdBackend, MetaError> {
        let client = EtcdClient::connect(endpoint)
            .await
            .map_err(|source| MetaError::Etcd {
                endpoint: endpoint.to_string(),
                source,
            })?;
        Ok(EtcdBackend {
            client,
            endpoint: endpoint.to_string(),
            prefix: prefix.trim_end_matches('/').to_string(),
            revision: 0,
        })
    }

    fn key(&self, k: &str) -> String {
        format!("{}/{k}", self.prefix)
    }

    fn table_key(&self, v: u64) -> String {
        self.key(&format!("table/{v:020}"))
    }

    fn err(&self, source: EtcdError) -> MetaError {
        MetaError::Etcd {
            endpoint: self.endpoint.clone(),
            source,
        }
    }

    async fn load(&mut self) -> Result<Option<ClusterState>, MetaError> {
        let state_key = self.key("state");
        let got = self.client.get(&state_key).await.map_err(|e| self.err(e))?;
        let Some(kv) = got else {
            self.revision = 0;
            return Ok(None);
        };
        self.revision = kv.mod_revision;
        let mut state = decode_state(&kv.value, &state_key)?;
        let cur_key = self.key("table/current");
        let cur = self.client.get(&cur_key).await.map_err(|e| self.err(e))?;
        if let Some(kv) = cur {
            let v: u64 = std::str::from_utf8(&kv.value)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| MetaError::Corrupt {
                    what: cur_key.clone(),
                    reason: "not a decimal version".into(),
                })?;
            let tk = self.table_key(v);
            let kv = self
                .client
                .get(&tk)
                .await
                .map_err(|e| self.err(e))?
                .ok_or_else(|| MetaError::Corrupt {
                    what: tk.clone(),
                    reason: "current table version is missing".into(),
                })?;
            let table: PlacementTable =
                serde_json::from_slice(&kv.value).map_err(|e| MetaError::Corrupt {
                    what: tk.clone(),
                    reason: e.to_string(),
                })?;
            state.table = Some(table);
        }
        Ok(Some(state))
    }

    async fn save(&mut self, state: &ClusterState) -> Result<(), MetaError> {
        let mut bare = state.clone();
        let table = bare.table.take();
        let state_key = self.key("state");
        let body = serde_json::to_vec(&bare).map_err(|e| MetaError::Corrupt {
            what: state_key.clone(),
            reason: e.to_string(),
        })?;
        let mut ops = vec![Op::Put(state_key.clone(), body)];
        if let Some(t) = &table {
            let json = serde_json::to_vec(t).map_err(|e| MetaError::Corrupt {
                what: self.table_key(t.version()),
                reason: e.to_string(),
            })?;
            ops.push(Op::Put(self.table_key(t.version()), json));
            ops.push(Op::Put(
                self.key("table/current"),
                t.version().to_string().into_bytes(),
            ));
            if t.version() > KEEP_VERSIONS {
                // Drop versions older than the last KEEP_VERSIONS.
                ops.push(Op::DeleteRange(
                    self.table_key(0),
                    self.table_key(t.version() - KEEP_VERSIONS),
                ));
            }
        }
        let cmp = if self.revision == 0 {
            Compare::CreateRevision(state_key.clone(), 0)
        } else {
            Compare::ModRevision(state_key.clone(), self.revision)
        };
        let ok = self
            .client
            .txn(&[cmp], &ops)
            .await
            .map_err(|e| self.err(e))?;
        if !ok {
            return Err(MetaError::Conflict);
        }
        // Learn the new revision of the state key.
        let got = self.client.get(&state_key).await.map_err(|e| self.err(e))?;
        self.revision = got.map_or(0, |kv| kv.mod_revision);
        Ok(())
    }
}

#[cfg(test)]
// The tests write and damage files as the medium would, bypassing strata-fs.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::state::ClusterConfig;

    #[tokio::test]
    async fn the_state_is_readable_by_its_user_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let meta = dir.path().join("meta");
        std::fs::create_dir(&meta).unwrap();
        std::fs::set_permissions(&meta, std::fs::Permissions::from_mode(0o755)).unwrap();
        // An older state file, world-readable.
        std::fs::write(meta.join("meta.json"), b"{}").unwrap();
        std::fs::set_permissions(
            meta.join("meta.json"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let f = FileBackend::new(&meta).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&meta), 0o700);
        f.save(&ClusterState::new(ClusterConfig::default()))
            .await
            .unwrap();
        assert_eq!(mode(&meta.join("meta.json")), 0o600);
    }

    #[tokio::test]
    async fn a_save_keeps_space_in_reserve_and_an_unchanged_state_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let f = FileBackend::new(dir.path()).unwrap();
        let state = ClusterState::new(ClusterConfig::default());
        f.save(&state).await.unwrap();
        let file = dir.path().join("meta.json");
        let reserve = std::fs::metadata(dir.path().join("meta.reserve")).unwrap();
        let len = std::fs::metadata(&file).unwrap().len();
        assert!(reserve.len() >= RESERVE_MIN.max(2 * len), "{reserve:?}");
        // Real blocks, not a sparse file: the space is taken.
        use std::os::unix::fs::MetadataExt;
        assert!(reserve.blocks() * 512 >= reserve.len());

        // The same state again: meta.json is not replaced.
        std::fs::write(&file, b"marker: not rewritten").unwrap();
        f.save(&state).await.unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"marker: not rewritten");

        // A new process reads the state back and writes nothing for it.
        let g = FileBackend::new(dir.path()).unwrap();
        std::fs::write(&file, serde_json::to_vec_pretty(&state).unwrap()).unwrap();
        let back = g.load().await.unwrap().unwrap();
        let ino = std::fs::metadata(&file).unwrap().ino();
        g.save(&back).await.unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().ino(), ino);
    }

    /// A power cut at every step of a save: the state file holds the old
    /// state or the new one, whole.
    #[test]
    fn the_state_file_survives_a_power_cut_at_every_step_of_a_save() {
        use strata_fs::power::{cut_at_every_step, Cut};
        let dir = tempfile::tempdir().unwrap();
        let old = br#"{"state": "old"}"#.to_vec();
        let new = br#"{"state": "new, and longer than the old one"}"#.to_vec();
        for how in [Cut::Drop, Cut::Tear] {
            let steps = cut_at_every_step(
                dir.path(),
                how,
                |r| save_with_reserve(&r.join("meta.json"), &r.join("meta.reserve"), &old).unwrap(),
                |r| save_with_reserve(&r.join("meta.json"), &r.join("meta.reserve"), &new),
                |r, n| {
                    let got = std::fs::read(r.join("meta.json")).unwrap_or_default();
                    assert!(got == old || got == new, "{how:?} step {n}: {got:?}");
                },
            )
            .unwrap();
            assert!(steps >= 5, "{steps}");
        }
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // The final name is a directory: the rename fails after the write.
        let path = dir.path().join("meta.json");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("x"), b"x").unwrap();
        assert!(write_atomically(&path, b"{}").is_err());
        assert!(!dir.path().join("meta.json.tmp").exists());
    }
}
