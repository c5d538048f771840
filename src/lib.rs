//! agentry: a self-hosted, persistent, multi-tenant agent platform.

pub mod agents;
pub mod app;
pub mod auth;
pub mod cli;
pub mod config;
pub mod crypto;
pub mod engine;
pub mod http;
pub mod metrics;
pub mod model;
pub mod providers;
pub mod store;
pub mod telemetry;
pub mod tools;
pub mod traces;

pub use app::{App, AppState};
pub use config::Settings;
