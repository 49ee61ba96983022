//! The constructs that differ between the session-era revisions, one [`Row`] each: what
//! `docs/revisions.md` tabulates and what the shaping functions act on. A unit test reads that
//! page and checks that its rows and these are the same, so neither drifts.
//!
//! Sources: `schema/<revision>/schema.ts` of modelcontextprotocol/modelcontextprotocol for
//! 2024-11-05, 2025-03-26, 2025-06-18 and 2025-11-25.

use crate::revision::Revision;

/// One construct that an older revision does not define.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// The row's id, as `docs/revisions.md` names it (and its unit test).
    pub id: &'static str,
    /// The first revision whose schema defines the construct; a client of an older revision
    /// gets [`Row::older_gets`] instead.
    pub since: Revision,
    /// What a client of an older revision gets instead.
    pub older_gets: &'static str,
}

impl Row {
    /// Whether a client that negotiated `client` lacks this construct.
    pub fn lacks(&self, client: Revision) -> bool {
        client < self.since
    }
}

/// `resource_link` content blocks (MCP 2025-06-18, schema.ts `ResourceLink`, `ContentBlock`).
pub const RESOURCE_LINK: Row = Row {
    id: "resource_link",
    since: Revision::V2025_06_18,
    older_gets: "a text block naming the resource (name, URI, description)",
};
/// `audio` content blocks (MCP 2025-03-26, schema.ts `AudioContent`).
pub const AUDIO: Row = Row {
    id: "audio",
    since: Revision::V2025_03_26,
    older_gets: "a text block saying audio of that MIME type was left out",
};
/// `_meta` on content blocks and resource contents (MCP 2025-06-18, schema.ts `TextContent`,
/// `ImageContent`, `AudioContent`, `EmbeddedResource`, `ResourceContents`).
pub const CONTENT_META: Row = Row {
    id: "content_meta",
    since: Revision::V2025_06_18,
    older_gets: "the block without `_meta`",
};
/// `annotations.lastModified` (MCP 2025-06-18, schema.ts `Annotations`).
pub const LAST_MODIFIED: Row = Row {
    id: "annotations_last_modified",
    since: Revision::V2025_06_18,
    older_gets: "the annotations without `lastModified` (`audience` and `priority` kept)",
};
/// `structuredContent` of a tool result (MCP 2025-06-18, schema.ts `CallToolResult`).
pub const STRUCTURED_CONTENT: Row = Row {
    id: "structured_content",
    since: Revision::V2025_06_18,
    older_gets: "`content` only; when `content` is empty, one text block with the JSON",
};
/// `title` of a tool (MCP 2025-06-18, schema.ts `BaseMetadata`).
pub const TOOL_TITLE: Row = Row {
    id: "tool_title",
    since: Revision::V2025_06_18,
    older_gets: "2025-03-26: `annotations.title` (unless set); 2024-11-05: nothing",
};
/// `outputSchema` of a tool (MCP 2025-06-18, schema.ts `Tool`).
pub const OUTPUT_SCHEMA: Row = Row {
    id: "output_schema",
    since: Revision::V2025_06_18,
    older_gets: "the tool without it",
};
/// `annotations` of a tool (MCP 2025-03-26, schema.ts `ToolAnnotations`).
pub const TOOL_ANNOTATIONS: Row = Row {
    id: "tool_annotations",
    since: Revision::V2025_03_26,
    older_gets: "the tool without them",
};
/// `title` of prompts, prompt arguments, resources and resource templates (MCP 2025-06-18,
/// schema.ts `BaseMetadata`).
pub const ITEM_TITLE: Row = Row {
    id: "item_title",
    since: Revision::V2025_06_18,
    older_gets: "the entry without it (`name` and `description` kept)",
};
/// `_meta` on tools, prompts, resources and resource templates (MCP 2025-06-18, schema.ts
/// `Tool`, `Prompt`, `Resource`, `ResourceTemplate`).
pub const ITEM_META: Row = Row {
    id: "item_meta",
    since: Revision::V2025_06_18,
    older_gets: "the entry without `_meta`",
};
/// `icons` on tools, prompts, resources, resource templates and `serverInfo` (MCP 2025-11-25,
/// schema.ts `Icons`).
pub const ICONS: Row = Row {
    id: "icons",
    since: Revision::V2025_11_25,
    older_gets: "the entry without them",
};
/// `execution` of a tool (MCP 2025-11-25, schema.ts `ToolExecution`).
pub const TOOL_EXECUTION: Row = Row {
    id: "tool_execution",
    since: Revision::V2025_11_25,
    older_gets: "the tool without it",
};
/// `serverInfo.title` (MCP 2025-06-18, schema.ts `Implementation` through `BaseMetadata`).
pub const SERVER_TITLE: Row = Row {
    id: "server_info_title",
    since: Revision::V2025_06_18,
    older_gets: "`serverInfo` without it",
};
/// `serverInfo.description` and `serverInfo.websiteUrl` (MCP 2025-11-25, schema.ts
/// `Implementation`).
pub const SERVER_DETAILS: Row = Row {
    id: "server_info_details",
    since: Revision::V2025_11_25,
    older_gets: "`serverInfo` without them",
};
/// The server capability `completions` (MCP 2025-03-26, schema.ts `ServerCapabilities`).
pub const CAP_COMPLETIONS: Row = Row {
    id: "capability_completions",
    since: Revision::V2025_03_26,
    older_gets: "capabilities without it",
};
/// The server capability `tasks` (MCP 2025-11-25, schema.ts `ServerCapabilities`).
pub const CAP_TASKS: Row = Row {
    id: "capability_tasks",
    since: Revision::V2025_11_25,
    older_gets: "capabilities without it",
};
/// `elicitation/create` (MCP 2025-06-18, schema.ts `ElicitRequest`).
pub const ELICITATION: Row = Row {
    id: "elicitation_create",
    since: Revision::V2025_06_18,
    older_gets: "nothing: not sent; the upstream gets -32601 as for an undeclared capability",
};
/// URL-mode elicitation (`elicitation/create` with `mode: "url"`) and the `mode` member (MCP
/// 2025-11-25, schema.ts `ElicitRequestURLParams`, `ElicitRequestFormParams`).
pub const ELICITATION_URL: Row = Row {
    id: "elicitation_url",
    since: Revision::V2025_11_25,
    older_gets:
        "a URL-mode request: not sent, the upstream gets -32601; a form-mode one: without `mode`",
};
/// Sampling with tools and several content blocks per message (MCP 2025-11-25, schema.ts
/// `CreateMessageRequestParams.tools`, `SamplingMessage.content` as an array).
pub const SAMPLING_2025_11_25: Row = Row {
    id: "sampling_2025_11_25",
    since: Revision::V2025_11_25,
    older_gets: "a content array of one block: that block; with `tools`, `toolChoice` or several blocks: not sent, the upstream gets -32601",
};
/// `message` of `notifications/progress` (MCP 2025-03-26, schema.ts `ProgressNotification`).
pub const PROGRESS_MESSAGE: Row = Row {
    id: "progress_message",
    since: Revision::V2025_03_26,
    older_gets: "the notification without `message`",
};
/// `notifications/elicitation/complete` and `notifications/tasks/status` (MCP 2025-11-25,
/// schema.ts `ElicitationCompleteNotification`, `TaskStatusNotification`).
pub const NEW_NOTIFICATIONS: Row = Row {
    id: "notifications_2025_11_25",
    since: Revision::V2025_11_25,
    older_gets: "nothing: not sent",
};

/// Every row, in the order of `docs/revisions.md`.
pub const ALL: [Row; 21] = [
    RESOURCE_LINK,
    AUDIO,
    CONTENT_META,
    LAST_MODIFIED,
    STRUCTURED_CONTENT,
    TOOL_TITLE,
    OUTPUT_SCHEMA,
    TOOL_ANNOTATIONS,
    ITEM_TITLE,
    ITEM_META,
    ICONS,
    TOOL_EXECUTION,
    SERVER_TITLE,
    SERVER_DETAILS,
    CAP_COMPLETIONS,
    CAP_TASKS,
    ELICITATION,
    ELICITATION_URL,
    SAMPLING_2025_11_25,
    PROGRESS_MESSAGE,
    NEW_NOTIFICATIONS,
];
