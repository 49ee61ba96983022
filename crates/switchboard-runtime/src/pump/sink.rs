//! [`Sink`]: where a held stream's events go, the one thing the gateway node and library mode
//! write differently (the node frames SSE bytes itself; library mode hands rmcp typed messages).

use std::future::Future;

use crate::hub::StreamEvent;

/// Whether a connection goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// It goes on.
    Continue,
    /// It ends (the client went away, the stream ended, the replica closed it).
    Stop,
}

/// The client side of one held stream. The pump ([`super::Pump`]) decides what is written and
/// when (in log order, each event once, up to the stream's end event); the sink only frames
/// and sends. Each method answers [`Step::Stop`] once the client has gone.
pub trait Sink: Send + 'static {
    /// What comes before any event (the node: a legacy stream's `endpoint` event, the priming
    /// event; library mode: the priming event).
    fn open(&mut self) -> impl Future<Output = Step> + Send;
    /// One live event.
    fn event(&mut self, event: StreamEvent) -> impl Future<Output = Step> + Send;
    /// A page of events read from the log, in order (one body chunk where the sink can).
    fn page(&mut self, events: Vec<StreamEvent>) -> impl Future<Output = Step> + Send;
    /// What the stream sends before each re-read of its log (`at_recheck`: the periodic one,
    /// [`super::StreamTiming::recheck`]; otherwise while a failing store is retried): the node,
    /// an SSE comment, which keeps proxies from timing the stream out; library mode, nothing
    /// (rmcp sends its own).
    fn keepalive(&mut self, at_recheck: bool) -> impl Future<Output = Step> + Send;
    /// Resolves once the client has gone away.
    fn closed(&self) -> impl Future<Output = ()> + Send;
}
