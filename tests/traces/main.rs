//! Traces exported over OTLP/HTTP to a receiver of the test's own: the spans of one turn,
//! their links, their attributes, and what they never carry.
//!
//! The exporter is process-wide: it is installed once, on a runtime that outlives every
//! test, and sends to one receiver; each test finds its own spans by their ids.

#[allow(dead_code)]
#[path = "../api/helpers.rs"]
mod helpers;
#[allow(dead_code)]
#[path = "../api/scripted.rs"]
mod scripted;
#[allow(dead_code)]
#[path = "../api/sse.rs"]
mod sse;

mod mcp;
mod receiver;
mod turn;
