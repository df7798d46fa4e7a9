//! The live flash dashboard in cluster mode: strata-node's page, history
//! and sampler over the cluster node's counters (docs/node.md, "Dashboard").
//!
//! Per workload (bucket) the node counts reads by tier and knows the plan's
//! allocation and prediction. A workload the plan lists has row parts of
//! its own, so its flash bytes and flash writes are known too; the others
//! share the rows' shared parts and show reads only (their flash is in the
//! all-workloads total), as on a single node.

use std::sync::Arc;

use strata_http::dashboard::history::{Counts, Reading};
use strata_http::dashboard::{add_reads, plan_info, plan_of, reads_of, Source};

use crate::node::ClusterNode;

/// A cluster node's counters.
pub(crate) struct ClusterSource(pub(crate) Arc<ClusterNode>);

impl Source for ClusterSource {
    fn read(&self) -> Reading {
        let node = &self.0;
        let plan = match node.plan.read() {
            Ok(g) => g.1.clone(),
            Err(p) => p.into_inner().1.clone(),
        };
        // Flash written per part name (a listed workload's, or the shared).
        let mut written_by: std::collections::HashMap<String, u64> =
            std::collections::HashMap::new();
        for (name, p) in node
            .stores
            .iter()
            .flatten()
            .flat_map(|s| s.opened())
            .flat_map(|s| s.parts())
        {
            *written_by.entry(name).or_default() += p.counters().bytes_written_flash;
        }
        let written: u64 = written_by.values().sum();
        let mut total = Counts {
            flash_bytes: Some(node.flash_used()),
            flash_written_bytes: Some(written),
            plan_flash_bytes: Some(node.flash_budget()),
            predicted_flash_hit_ratio: plan.plan.as_ref().map(|p| p.predicted_flash_hit_ratio),
            ..Counts::default()
        };
        let mut workloads = Vec::new();
        for (name, c) in node.metrics.workloads() {
            if name == strata_node::tiers::SHARED {
                continue;
            }
            let (plan_flash_bytes, predicted) = plan_of(&plan, node.workload_id(&name), &name);
            let own = written_by.get(&name).copied();
            let c = Counts {
                reads: reads_of(&c),
                flash_bytes: own.map(|_| c.flash_bytes.load(std::sync::atomic::Ordering::Relaxed)),
                flash_written_bytes: own,
                plan_flash_bytes,
                predicted_flash_hit_ratio: predicted,
            };
            add_reads(&mut total, &c);
            workloads.push((name, c));
        }
        Reading {
            total,
            workloads,
            plan: plan_info(plan.plan.as_ref()),
        }
    }

    /// `node` for a cluster of one, `cluster` for a member of a larger one.
    fn mode(&self) -> &'static str {
        if self.0.opts.cluster_of_one {
            "node"
        } else {
            "cluster"
        }
    }
}
