//! Answers shaped for the revision the client negotiated.
//!
//! An upstream may negotiate a newer revision than the client did (a server that supports one
//! revision answers `initialize` with it: MCP 2025-11-25, basic/lifecycle, Version
//! Negotiation), and an aggregate merges upstreams of several revisions. Each side of a hop
//! must keep to the revision negotiated on that hop (basic/lifecycle, Operation: SHOULD in
//! 2024-11-05 and 2025-03-26, MUST from 2025-06-18), so what reaches a session-era client is
//! shaped here for its revision: a construct its schema lacks is converted where the
//! specification offers an equivalent (a `resource_link` becomes a text block naming the
//! resource, a tool's `title` its `annotations.title` in 2025-03-26, `structuredContent` its
//! text form in `content`) and dropped otherwise; it is never sent as is. Every construct is a
//! row of [`rows`], tabulated in `docs/revisions.md`.
//!
//! Cheap on the hot path: nothing is looked at for a client of the newest session-era
//! revision ([`needed`]), and otherwise only the results of the methods that carry such
//! constructs. The stateless revision (2026-07-28) is not shaped here: its constructs never
//! reach a session-era client through the bridge (`resultType` is taken off there).
//!
//! Modules: [`rows`] (the constructs and their revisions), `content` (content blocks),
//! `entries` (list entries), `results` (results by method), `handshake` (the `initialize`
//! result), `messages` (notifications and server-to-client requests).

mod content;
mod entries;
mod handshake;
mod messages;
mod results;
pub mod rows;

#[cfg(test)]
mod tests;

use serde_json::Value;

use crate::revision::Revision;

/// Whether a message for a client that negotiated `client` may need shaping: every construct of
/// [`rows::ALL`] is defined by [`Revision::LATEST`], so a client of that revision (or of the
/// stateless one) gets everything as it is.
pub fn needed(client: Revision) -> bool {
    client < Revision::LATEST
}

/// Shapes `result`, the result of the client's request `method`, for `client` in place
/// (`tools/call`, the four list methods, `prompts/get`, `resources/read`; other methods are
/// left alone). Source: `schema/<revision>/schema.ts`, the result type of each method.
pub fn result(client: Revision, method: &str, result: &mut Value) {
    if needed(client) {
        results::of(client, method, result);
    }
}

/// Shapes an `InitializeResult` (server capabilities, `serverInfo`) for `client` in place.
/// Source: `schema/<revision>/schema.ts`, `InitializeResult`.
pub fn initialize_result(client: Revision, result: &mut Value) {
    if needed(client) {
        handshake::initialize_result(client, result);
    }
}

/// Whether a message the server sends unasked may go to the client as shaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outgoing {
    /// Send it (shaped in place).
    Send,
    /// The client's revision has no such method: do not send it. The revision that introduced
    /// it.
    Undefined(Revision),
}

/// Shapes a notification or server-to-client request (`method` in it) for `client` in place,
/// or says that the client's revision has no such method ([`Outgoing::Undefined`]): a
/// notification is then dropped, a request refused to the upstream. Source:
/// `schema/<revision>/schema.ts`, `ServerRequest` and `ServerNotification`.
pub fn server_message(client: Revision, message: &mut Value) -> Outgoing {
    if !needed(client) {
        return Outgoing::Send;
    }
    if let Some(since) = messages::since(message).filter(|since| client < *since) {
        return Outgoing::Undefined(since);
    }
    messages::shape(client, message);
    Outgoing::Send
}
