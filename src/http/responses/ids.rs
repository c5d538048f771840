//! The face's ids: a response is a turn (`resp_` + the turn's hex), a conversation is a
//! session (`conv_` + the session's hex; a session's own `sess_…` id names it too), and an
//! output item is named by its turn and its place in the output.

use crate::model::{SessionId, TurnId};

pub fn response_id(turn: &TurnId) -> String {
    format!("resp_{}", turn.hex())
}

/// The turn a response id names (a turn's own `turn_…` id names it too); `None` for a
/// string that is not one.
pub fn parse_response_id(id: &str) -> Option<TurnId> {
    match id.strip_prefix("resp_") {
        Some(hex) => format!("{}{hex}", TurnId::PREFIX).parse().ok(),
        None => id.parse().ok(),
    }
}

pub fn conversation_id(session: &SessionId) -> String {
    format!("conv_{}", session.hex())
}

/// The session a conversation id names: `conv_…`, or a session's own `sess_…` id.
pub fn parse_conversation_id(id: &str) -> Option<SessionId> {
    match id.strip_prefix("conv_") {
        Some(hex) => format!("{}{hex}", SessionId::PREFIX).parse().ok(),
        None => id.parse().ok(),
    }
}

/// An output item's id: `<prefix>_<turn hex>_<output index>`.
pub fn item_id(prefix: &str, turn: &TurnId, index: usize) -> String {
    format!("{prefix}_{}_{index}", turn.hex())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        let turn = TurnId::generate();
        assert_eq!(parse_response_id(&response_id(&turn)), Some(turn));
        assert_eq!(parse_response_id(&turn.to_string()), Some(turn));
        assert_eq!(parse_response_id("resp_nothex"), None);
        let session = SessionId::generate();
        assert_eq!(
            parse_conversation_id(&conversation_id(&session)),
            Some(session)
        );
        assert_eq!(parse_conversation_id(&session.to_string()), Some(session));
        assert_eq!(parse_conversation_id("conv_x"), None);
    }
}
