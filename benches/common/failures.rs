//! Why a benchmark's turn did not count, and the tally of those reasons: shared by the
//! load generators.

/// Why a turn did not count.
#[derive(Debug, Clone, Copy)]
pub enum Failure {
    /// 409 (`session_busy`), or a `session_busy` frame.
    Busy,
    /// 429.
    TooMany,
    /// Another status that is not 2xx and not 5xx, or a request refused in a frame.
    Client,
    /// 5xx.
    Server,
    /// The connection failed, or the turn took longer than `TURN_TIMEOUT`.
    Io,
    /// A 2xx answer that ended before the turn did.
    Incomplete,
    /// The turn ended in error.
    Turn,
}

impl Failure {
    pub fn of_status(status: reqwest::StatusCode) -> Failure {
        match status.as_u16() {
            409 => Failure::Busy,
            429 => Failure::TooMany,
            500.. => Failure::Server,
            _ => Failure::Client,
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct Errors {
    pub busy: usize,
    pub too_many: usize,
    pub client: usize,
    pub server: usize,
    pub io: usize,
    pub incomplete: usize,
    pub turn: usize,
}

impl Errors {
    /// Counts a failed turn; after a refused connection, waits a little, since a server
    /// that is gone refuses at once and its client would spin.
    pub async fn failed(&mut self, failure: Failure) {
        self.count(failure);
        if matches!(failure, Failure::Io) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    pub fn count(&mut self, failure: Failure) {
        *match failure {
            Failure::Busy => &mut self.busy,
            Failure::TooMany => &mut self.too_many,
            Failure::Client => &mut self.client,
            Failure::Server => &mut self.server,
            Failure::Io => &mut self.io,
            Failure::Incomplete => &mut self.incomplete,
            Failure::Turn => &mut self.turn,
        } += 1;
    }

    pub fn add(&mut self, other: &Errors) {
        self.busy += other.busy;
        self.too_many += other.too_many;
        self.client += other.client;
        self.server += other.server;
        self.io += other.io;
        self.incomplete += other.incomplete;
        self.turn += other.turn;
    }

    pub fn total(&self) -> usize {
        self.busy
            + self.too_many
            + self.client
            + self.server
            + self.io
            + self.incomplete
            + self.turn
    }
}
