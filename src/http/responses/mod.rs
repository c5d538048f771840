//! The OpenAI face (`/v1`): the Responses API (Open Responses) and Chat Completions over
//! the engine. A response (or a chat completion) is a turn, a conversation a session; the face keeps nothing of its own but the labels
//! it attaches to a turn (the request's model string, `background`, `metadata`, and how
//! the response continued a conversation).

pub mod approvals;
pub mod chat;
pub mod chat_messages;
pub mod chat_parse;
pub mod chat_render;
pub mod chat_session;
pub mod conversation_items;
pub mod conversations;
pub mod create;
pub mod error;
pub mod faults;
pub mod ids;
pub mod input_items;
pub mod labels;
pub mod load;
pub mod manage;
pub mod models;
pub mod parse;
pub mod read;
pub mod render;
pub mod stream;
