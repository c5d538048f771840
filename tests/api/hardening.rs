//! Limits that keep one client from exhausting the server, and what a client may not make
//! the server believe or write: login work, stalled bodies, oversized heads, forwarding
//! headers, tokens not yet valid.

mod bodies;
mod forwarded;
mod login;
mod tokens;

use std::sync::Arc;

use crate::helpers::{TestApp, TestDb, spawn_app_on};

/// An app with extra configuration on a fresh database.
pub async fn app_with(extra: &str) -> TestApp {
    spawn_app_on(Arc::new(TestDb::new().await), extra).await
}
