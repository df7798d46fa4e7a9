//! What every trial gets (the processes' credentials, the campaign's
//! sizes) and what it gives back: its result, from the load's model, its
//! failures and its notes.

use crate::load::Model;
use crate::procs;
use crate::sigv4::Signer;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

/// What every trial of a campaign gets.
pub struct Ctx {
    /// The `strata` binary and the credentials of every process.
    pub env: procs::Env,
    /// Client threads of each trial's load.
    pub workers: usize,
    /// Nodes of the cluster trials.
    pub nodes: usize,
    /// Where `linearizable` trials write their histories.
    pub history: Option<PathBuf>,
}

impl Ctx {
    /// A SigV4 signer with the nodes' S3 root key.
    pub fn s3_signer(&self) -> Signer {
        Signer::new(
            &self.env.s3_root.0,
            &self.env.s3_root.1,
            std::time::Duration::from_secs(20),
        )
    }
}

/// One trial's result.
#[derive(serde::Serialize, Default)]
pub struct Trial {
    pub index: usize,
    pub kind: String,
    pub seed: u64,
    pub passed: bool,
    pub skipped: bool,
    pub failures: Vec<String>,
    pub notes: Vec<String>,
    pub acked_puts: u64,
    pub acked_deletes: u64,
    pub unknown_ops: u64,
    pub reads: u64,
    pub history: Option<String>,
    pub history_ops: usize,
    /// Processes whose power was cut (the power kinds).
    pub power_cuts: u64,
    pub seconds: f64,
    pub repro: String,
}

impl Trial {
    pub fn fail(&mut self, s: String) {
        self.failures.push(s);
    }
    pub fn note(&mut self, s: String) {
        self.notes.push(s);
    }
    pub fn absorb(&mut self, m: &Model, unreadable: Vec<String>) -> anyhow::Result<()> {
        self.absorb_with_budget(m, unreadable, 0)
    }
    /// Takes the model's counts and findings; up to `budget` lost or
    /// unreadable keys are allowed (a bit flip may destroy what it hit).
    pub fn absorb_with_budget(
        &mut self,
        m: &Model,
        unreadable: Vec<String>,
        budget: usize,
    ) -> anyhow::Result<()> {
        self.acked_puts += m.acked_puts.load(Ordering::Relaxed);
        self.acked_deletes += m.acked_deletes.load(Ordering::Relaxed);
        self.unknown_ops += m.unknown.load(Ordering::Relaxed);
        self.reads += m.reads.load(Ordering::Relaxed);
        let e500 = m
            .errors_500
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for e in e500.iter().take(5) {
            self.fail(format!("SERVER ERROR: {e}"));
        }
        if e500.len() > 5 {
            self.fail(format!("... and {} more GETs answered 500", e500.len() - 5));
        }
        let wrong = m.wrong.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for w in wrong.iter().take(10) {
            self.fail(format!("WRONG DATA SERVED: {w}"));
        }
        if wrong.len() > 10 {
            self.fail(format!("... and {} more wrong answers", wrong.len() - 10));
        }
        let lost = m.lost.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let bad: Vec<String> = lost
            .into_iter()
            .map(|l| format!("lost: {l}"))
            .chain(unreadable.into_iter().map(|u| format!("unreadable: {u}")))
            .collect();
        if bad.len() > budget {
            for b in bad.iter().take(10) {
                self.fail(b.clone());
            }
            if bad.len() > 10 {
                self.fail(format!(
                    "... and {} more lost or unreadable",
                    bad.len() - 10
                ));
            }
        } else if !bad.is_empty() {
            self.note(format!(
                "{} key(s) lost to the fault (allowed: {budget}): {}",
                bad.len(),
                bad.join("; ")
            ));
        }
        Ok(())
    }
}
