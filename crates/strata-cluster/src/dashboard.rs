//! The live flash dashboard in cluster mode: strata-node's page, history
//! and sampler over the cluster node's counters (docs/node.md, "Dashboard").
//!
//! Per workload (bucket) the node counts reads by tier and knows the plan's
//! allocation and prediction; its flash bytes and flash writes are per row
//! store, shared by the buckets of the row, so they are shown for all
//! workloads together only (flash used against the flash budget).

use std::sync::Arc;

use strata_node::dashboard::history::{Counts, Reading};
use strata_node::dashboard::{add_reads, plan_info, plan_of, reads_of, Source};

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
        let written = node
            .stores
            .iter()
            .flatten()
            .flat_map(|s| s.opened())
            .flat_map(|s| s.parts())
            .map(|(_, p)| p.counters().bytes_written_flash)
            .sum();
        let mut total = Counts {
            flash_bytes: Some(node.flash_used()),
            flash_written_bytes: Some(written),
            plan_flash_bytes: Some(node.flash_budget()),
            predicted_flash_hit_ratio: plan.plan.as_ref().map(|p| p.predicted_flash_hit_ratio),
            ..Counts::default()
        };
        let mut workloads = Vec::new();
        for (name, c) in node.metrics.workloads() {
            let (plan_flash_bytes, predicted) = plan_of(&plan, node.workload_id(&name), &name);
            let c = Counts {
                reads: reads_of(&c),
                plan_flash_bytes,
                predicted_flash_hit_ratio: predicted,
                ..Counts::default()
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

    fn mode(&self) -> &'static str {
        "cluster"
    }
}
