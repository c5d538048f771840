//! The built-in server tools by name: what configuration may refer to; the tools module
//! describes and runs them.

/// The built-in server tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Clock,
    Calculator,
    Memory,
    HttpFetch,
}

impl Builtin {
    pub const ALL: [Builtin; 4] = [
        Builtin::Clock,
        Builtin::Calculator,
        Builtin::Memory,
        Builtin::HttpFetch,
    ];

    pub fn named(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Builtin::Clock => "clock",
            Builtin::Calculator => "calculator",
            Builtin::Memory => "memory",
            Builtin::HttpFetch => "http_fetch",
        }
    }
}
