//! Black-box tests of the HTTP API against the real application.

mod helpers;
mod process;
mod scripted;
mod sse;

mod acp;
mod admin;
mod agentscope;
mod auth;
mod compaction;
mod deployment;
mod errors;
mod hardening;
mod isolation;
mod lifecycle;
mod mcp;
mod mcp_http;
mod meta;
mod persistence;
mod providers;
mod quickstart;
mod secrets;
mod sessions;
mod streams;
mod turns;
mod validation;
