//! This node's knowledge of the tools' `x-mcp-header` declarations (see the parent module for
//! when it is fetched and how it is used). A leaf: it knows nothing of the node's state.

use switchboard_protocol::param_headers::ToolHeaders;

/// This node's knowledge of the tools' mirrored arguments.
#[derive(Default)]
pub struct ParamHeaders {
    /// The last complete list fetched, by tool.
    pub(crate) known: ToolHeaders,
    /// Held by the one fetch running.
    pub(crate) fetching: tokio::sync::Mutex<()>,
}
