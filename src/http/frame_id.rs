//! SSE frame ids: one stored event can render to several events of a face, so each frame is
//! named by its event's seq and its place among that event's frames: `<seq>` for the
//! first, `<seq>.<k>` for the k-th further one. Ids are unique and ordered, so a client
//! resumes after any frame it received (`?after=`, `Last-Event-ID`).

use std::fmt;
use std::str::FromStr;

/// A frame's id: ordered by seq, then by place within the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FrameId {
    pub seq: i64,
    pub k: u32,
}

impl FrameId {
    /// Before every frame.
    pub const START: FrameId = FrameId { seq: -1, k: 0 };

    pub fn new(seq: i64, k: u32) -> Self {
        Self { seq, k }
    }
}

impl fmt::Display for FrameId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.k == 0 {
            write!(f, "{}", self.seq)
        } else {
            write!(f, "{}.{}", self.seq, self.k)
        }
    }
}

impl FromStr for FrameId {
    type Err = ();

    /// `3` (the first frame of event 3, as plain seqs always were) or `3.1`.
    fn from_str(s: &str) -> Result<Self, ()> {
        let s = s.trim();
        let (seq, k) = s.split_once('.').unwrap_or((s, "0"));
        // Frame ids are never negative: `-1` is not a frame a client could have received
        // (nor is `3.+1`, which integer parsing alone would take).
        if ![seq, k]
            .iter()
            .all(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(());
        }
        let k: u32 = k.parse().map_err(|_| ())?;
        let seq: i64 = seq.parse().map_err(|_| ())?;
        Ok(Self { seq, k })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_print_parse_and_order_by_seq_then_place() {
        assert_eq!(FrameId::new(3, 0).to_string(), "3");
        assert_eq!(FrameId::new(3, 2).to_string(), "3.2");
        assert_eq!("3".parse(), Ok(FrameId::new(3, 0)));
        assert_eq!(" 3.1".parse(), Ok(FrameId::new(3, 1)));
        assert_eq!("0".parse(), Ok(FrameId::new(0, 0)));
        // Seqs are i64: a long session's ids parse back too.
        assert_eq!("4294967296.1".parse(), Ok(FrameId::new(1 << 32, 1)));
        for bad in [
            "", "x", "3.", ".1", "3.-1", "3.+1", "3.1.2", "-1", "-1.0", "+3",
        ] {
            assert!(bad.parse::<FrameId>().is_err(), "{bad}");
        }
        assert!(FrameId::new(2, 9) < FrameId::new(3, 0));
        assert!(FrameId::new(3, 0) < FrameId::new(3, 1));
        assert!(FrameId::START < FrameId::new(0, 0));
    }
}

#[cfg(test)]
mod proptests;
