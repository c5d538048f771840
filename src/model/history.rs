//! Which histories an agent keeps, and how the compacted one shrinks.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionStrategy {
    #[default]
    None,
    Window,
    DropToolResults,
    Summarize,
}

impl CompactionStrategy {
    /// The strategy's configured name.
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionStrategy::None => "none",
            CompactionStrategy::Window => "window",
            CompactionStrategy::DropToolResults => "drop_tool_results",
            CompactionStrategy::Summarize => "summarize",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HistoryType {
    Full,
    Compacted,
}

impl HistoryType {
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryType::Full => "full",
            HistoryType::Compacted => "compacted",
        }
    }
}
