//! The AgentScope Runtime Agent API face, served under `/agentscope`: the same sessions,
//! engine and event log as AAP, in AgentScope's request and response objects.

mod convert;
pub mod process;
mod render;
pub(in crate::http) mod wire;
