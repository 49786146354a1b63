//! [`Probe`]: what a source says about the object before any range is fetched.

use std::time::{Duration, SystemTime};

/// A validator: a token that changes whenever the object's bytes do.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Validator {
    /// Byte-for-byte identity (an HTTP strong ETag, without the quotes' meaning changed: the
    /// value is stored exactly as sent, quotes included).
    Strong(String),
    /// Semantic equivalence only (HTTP `W/"..."`, as sent). Not usable with `If-Range`.
    Weak(String),
}

impl Validator {
    /// The strong validator's value, if this is one.
    pub fn strong(&self) -> Option<&str> {
        match self {
            Validator::Strong(s) => Some(s),
            Validator::Weak(_) => None,
        }
    }
}

/// As sent: `"abc"` for a strong validator, `W/"abc"` for a weak one (control characters
/// dropped, so that a server's token cannot steer a terminal).
impl std::fmt::Display for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (Validator::Strong(s) | Validator::Weak(s)) = self;
        let shown: String = s.chars().filter(|c| !c.is_control()).collect();
        f.write_str(&shown)
    }
}

/// What a probe learned about the object at one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The object's size in bytes.
    pub size: u64,
    /// The source serves ranges (`false`: drive it as one stream from byte 0).
    pub ranged: bool,
    /// The object's validator, when the source gives one.
    pub validator: Option<Validator>,
    /// The object's modification time, when the source gives one (whole seconds for HTTP).
    pub last_modified: Option<SystemTime>,
    /// Time to dial the session (TCP, proxy, TLS); zero when a pooled one was used.
    pub connect: Duration,
    /// Time from sending the probe request to its first response byte.
    pub first_byte: Duration,
}

impl Probe {
    /// True when `other` (another source, or a later look at the same one) describes the same
    /// object: same size, and no validator or modification time that both give and that differ.
    /// Use it to refuse combining sources that disagree.
    pub fn same_object(&self, other: &Probe) -> bool {
        self.size == other.size
            && agree(&self.validator, &other.validator)
            && agree(&self.last_modified, &other.last_modified)
    }
}

/// Two optional facts agree unless both are known and differ.
fn agree<T: PartialEq>(a: &Option<T>, b: &Option<T>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}
