//! The OpenAI face (`/v1`): the Responses API's objects and semantic SSE events, replay
//! from a sequence number, background responses, function tools round trips,
//! conversations shared with AAP, Chat Completions, errors in OpenAI's shape and tenant
//! isolation.

mod approvals;
mod chat;
mod chat_errors;
mod chat_sessions;
mod conversations;
mod create;
mod errors;
mod incomplete;
mod isolation;
mod items;
mod manage;
mod refusals;
mod retries;
mod sdk;
mod stream;
mod wire;
