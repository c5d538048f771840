//! The OpenAI face (`/v1`): the Responses API's objects and semantic SSE events, replay
//! from a sequence number, background responses, function tools round trips,
//! conversations shared with AAP, Chat Completions, errors in OpenAI's shape and tenant
//! isolation.

mod chat;
mod chat_sessions;
mod conversations;
mod create;
mod errors;
mod manage;
mod sdk;
mod stream;
mod wire;
