//! [`Kind`]: the kinds of item a principal may or may not see through an upstream (an upstream
//! itself, a tool, a resource, a prompt), as the `[policy]` rules' lists ([`crate::policy`]) and
//! [`crate::Upstream::visible`] name them. It imports nothing of the crate, so the
//! [`crate::Upstream`] trait names it without depending on `policy` (which builds its refusals
//! from the trait's [`crate::RpcError`]).

/// What a rule's lists are about, and what kind of item [`crate::Upstream::visible`] is asked
/// about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `allow_upstreams` / `deny_upstreams`: configured upstream names.
    Upstream,
    /// `allow_tools` / `deny_tools`: tool names as the client sees them.
    Tool,
    /// `allow_resources` / `deny_resources`: URIs and URI templates.
    Resource,
    /// `allow_prompts` / `deny_prompts`: prompt names as the client sees them.
    Prompt,
}
