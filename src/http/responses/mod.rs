//! The OpenAI face (`/v1`): the Responses API (Open Responses) over the engine. A response
//! is a turn, a conversation a session; the face keeps nothing of its own but the labels
//! it attaches to a turn (the request's model string, `background`, `metadata`, and how
//! the response continued a conversation).

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
