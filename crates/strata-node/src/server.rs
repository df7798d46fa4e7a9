//! Starting and stopping a node: its own tokio runtime, the listener, the
//! tier mover, SIGHUP (reload the tier plan) and SIGINT/SIGTERM (stop).

use crate::http::{serve, HttpLimits};
use crate::node::{Node, NodeConfig, NodeError};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// A node serving HTTP in the background of this process.
pub struct Running {
    /// The address it listens on (the real port when 0 was asked for).
    pub addr: SocketAddr,
    /// The node.
    pub node: Arc<Node>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    rt: Option<tokio::runtime::Runtime>,
    mover: Option<std::thread::JoinHandle<()>>,
    sampler: Option<crate::dashboard::Sampler>,
}

/// Opens the node of `cfg` and serves it on `listen` with `threads` worker
/// threads (0: one per core).
pub fn start(
    cfg: NodeConfig,
    listen: &str,
    limits: HttpLimits,
    threads: usize,
) -> Result<Running, NodeError> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.enable_all().thread_name("strata-http");
    if threads > 0 {
        b.worker_threads(threads);
    }
    let rt = b
        .build()
        .map_err(|e| NodeError::Startup(format!("cannot start the runtime: {e}")))?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(listen))
        .map_err(|e| NodeError::Startup(format!("cannot listen on {listen}: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| NodeError::Startup(format!("cannot listen on {listen}: {e}")))?;
    let node = Node::open(cfg)?;
    let mover = crate::mover::spawn(node.clone())
        .map_err(|e| NodeError::Startup(format!("cannot start the tier mover: {e}")))?;
    let dash = crate::dashboard::Dashboard::new(crate::dashboard::NodeSource(node.clone()));
    let sampler = crate::dashboard::spawn(dash.clone(), crate::dashboard::SAMPLE_EVERY)
        .map_err(|e| NodeError::Startup(format!("cannot start the dashboard sampler: {e}")))?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let n = node.clone();
    rt.spawn(async move {
        let auth = crate::auth::AdminAuth::new(n.cfg.admin_token.clone());
        serve(
            n,
            listener,
            limits,
            crate::dashboard::router(dash, auth),
            async {
                let _ = rx.await;
            },
        )
        .await;
    });
    Ok(Running {
        addr,
        node,
        stop: Some(tx),
        rt: Some(rt),
        mover: Some(mover),
        sampler: Some(sampler),
    })
}

impl Running {
    /// Stops serving, stops the mover, flushes traces and checkpoints.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.node.stop.store(true, Relaxed);
        if let Some(m) = self.mover.take() {
            let _ = m.join();
        }
        if let Some(s) = self.sampler.take() {
            s.stop();
        }
        self.node.shutdown();
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(std::time::Duration::from_secs(2));
        }
    }

    /// Blocks until SIGINT or SIGTERM, reloading the tier plan on SIGHUP;
    /// `on_reload` hears how each reload went.
    pub fn wait_for_signals(mut self, on_reload: impl Fn(Result<(), NodeError>) + Send + 'static) {
        let node = self.node.clone();
        if let Some(rt) = &self.rt {
            rt.block_on(async move {
                use tokio::signal::unix::{signal, SignalKind};
                let (Ok(mut hup), Ok(mut term), Ok(mut int)) = (
                    signal(SignalKind::hangup()),
                    signal(SignalKind::terminate()),
                    signal(SignalKind::interrupt()),
                ) else {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                };
                loop {
                    tokio::select! {
                        _ = hup.recv() => {
                            let n = node.clone();
                            let r = tokio::task::spawn_blocking(move || n.reload_plan()).await;
                            on_reload(r.unwrap_or_else(|e| Err(NodeError::Store(e.to_string()))));
                        }
                        _ = term.recv() => return,
                        _ = int.recv() => return,
                    }
                }
            });
        }
        self.shutdown();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// `listen` as a socket address, for messages.
pub fn describe(addr: SocketAddr) -> String {
    format!("http://{addr}")
}
