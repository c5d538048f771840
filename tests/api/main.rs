//! Black-box tests of the HTTP API against the real application.

mod helpers;
mod process;
mod scripted;
mod sse;

mod acp;
mod admin;
mod agentscope;
mod auth;
mod cluster;
mod compaction;
mod cors;
mod deployment;
mod errors;
mod hardening;
mod history_pages;
mod isolation;
mod lifecycle;
mod mcp;
mod mcp_http;
mod meta;
mod nul;
mod persistence;
mod processes;
mod provider_safety;
mod provider_urls;
mod providers;
mod queueing;
mod quickstart;
mod round_trips;
mod secrets;
mod sessions;
mod streams;
mod turns;
mod upgrade;
mod validation;
