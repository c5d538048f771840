//! `Secret`: a configured value that never prints.

use std::fmt;

use serde::{Deserialize, Deserializer};

/// A configured secret: `Debug` prints `***`, so settings can be logged whole.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("\"\"")
        } else {
            f.write_str("\"***\"")
        }
    }
}

impl<'de> Deserialize<'de> for Secret {
    /// Environment variables are typed by their look: a numeric secret arrives as a number.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Scalar {
            Str(String),
            Int(i128),
            Float(f64),
            Bool(bool),
        }
        Ok(Secret(match Scalar::deserialize(deserializer)? {
            Scalar::Str(s) => s,
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Bool(b) => b.to_string(),
        }))
    }
}
