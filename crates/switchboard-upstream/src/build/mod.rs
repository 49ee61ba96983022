//! Building the node's upstream from the `[[upstreams]]` tables ([`crate::config`]): each table
//! becomes its kind's upstream, inside the wrappers every configured upstream gets.
//!
//! [`upstreams`] gives the node's upstream: the built-in demo server alone when no table is
//! configured, else an [`Aggregate`] of every configured upstream (even a single one, so names
//! always get their prefix). The aggregate applies the `[policy]` section; with a policy and no
//! table, the demo server is an aggregate's only member, `demo`. [`upstream`] builds one table, wrapped in [`Tracked`], which counts
//! its calls. A legacy SSE upstream and a per-session stdio upstream are also wrapped in
//! [`NodeBound`], since their per-session state lives in one process (see [`crate::placement`]).

use std::sync::Arc;

use crate::aggregate::{Aggregate, Member};
use crate::config::{checks, UpstreamConfig, UpstreamKind, UpstreamsConfig};
use crate::demo::DemoUpstream;
use crate::http::modern::ModernHttpUpstream;
use crate::http::HttpUpstream;
use crate::placement::NodeBound;
use crate::policy::Policy;
use crate::sse::SseUpstream;
use crate::stdio::StdioUpstream;
use crate::tracked::Tracked;
use crate::upstream::Upstream;

/// The node's upstream: the demo server alone when `config.upstreams` is empty, else an
/// [`Aggregate`] of every configured upstream. Header values are expanded from the process
/// environment here. Errors (naming the upstream) on any problem of [`UpstreamsConfig::problems`],
/// an unset variable, or a table its kind's constructor refuses.
pub fn upstreams(config: &UpstreamsConfig) -> Result<Arc<dyn Upstream>, String> {
    let policy = Arc::new(Policy::new(config.policy.clone(), &config.member_names())?);
    if config.upstreams.is_empty() && !policy.is_off() {
        // The policy is applied by the aggregate: the demo server becomes its only member.
        let members = vec![Member {
            name: checks::DEMO.to_owned(),
            prefix: None,
            upstream: demo(),
        }];
        return Ok(Arc::new(
            Aggregate::new(members, &config.separator)?
                .with_policy(policy)
                .with_max_list_pages(config.list_max_pages),
        ));
    }
    if config.upstreams.is_empty() {
        return Ok(demo());
    }
    let problems = config.problems();
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let members = config
        .upstreams
        .iter()
        .map(|u| {
            Ok(Member {
                name: u.name.clone(),
                prefix: u.effective_prefix().map(str::to_owned),
                upstream: upstream(u)?,
            })
        })
        .collect::<Result<Vec<Member>, String>>()?;
    Ok(Arc::new(
        Aggregate::new(members, &config.separator)?
            .with_policy(policy)
            .with_max_list_pages(config.list_max_pages),
    ))
}

/// The built-in demo server, tracked as upstream `demo`.
fn demo() -> Arc<dyn Upstream> {
    Arc::new(Tracked::new(
        checks::DEMO,
        UpstreamKind::Demo.as_str(),
        Arc::new(DemoUpstream::new()),
    ))
}

/// One upstream, its header values expanded from the process environment, inside the
/// [`Tracked`] wrapper that counts its calls and knows its `timeout_ms`.
pub fn upstream(config: &UpstreamConfig) -> Result<Arc<dyn Upstream>, String> {
    let config = config.expanded(|var| std::env::var(var).ok())?;
    let inner = kind(&config)?;
    let timeout = std::time::Duration::from_millis(config.timeout_ms);
    let tracked = Tracked::new(&config.name, config.kind.as_str(), inner).with_timeout(timeout);
    Ok(Arc::new(tracked))
}

/// The upstream of one (expanded) table, by kind.
fn kind(config: &UpstreamConfig) -> Result<Arc<dyn Upstream>, String> {
    let timeout = std::time::Duration::from_millis(config.timeout_ms);
    match config.kind {
        UpstreamKind::Demo => Ok(Arc::new(DemoUpstream::new())),
        UpstreamKind::Http if config.revision.is_some() => {
            Ok(Arc::new(ModernHttpUpstream::from_config(config)?))
        }
        UpstreamKind::Http => Ok(Arc::new(HttpUpstream::from_config(config)?)),
        // A legacy SSE connection and a per-session stdio child live in one process: their
        // requests run on the node that owns them (see `placement`).
        UpstreamKind::Sse => {
            let sse = SseUpstream::from_config(config)?;
            Ok(Arc::new(NodeBound::new(Arc::new(sse), timeout)))
        }
        UpstreamKind::Stdio => {
            let stdio = StdioUpstream::from_config(config)?;
            if stdio.is_shared() {
                // One child for every session: each node simply uses its own.
                Ok(Arc::new(stdio))
            } else {
                Ok(Arc::new(NodeBound::new(Arc::new(stdio), timeout)))
            }
        }
    }
}

#[cfg(test)]
mod tests;
