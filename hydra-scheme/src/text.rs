//! Text on its way to a person: credentials taken out of URLs ([`redact_userinfo`]) and
//! control characters escaped ([`sanitize`]); [`for_people`] does both. Text on its way in
//! from a file: [`without_bom`].
//!
//! # Contract
//!
//! * [`redact_userinfo`]: in every `scheme://` of the text, what lies between `://` and the
//!   last `@` of the same token (a token ends at whitespace, a quote, `<`, `>` or a backtick)
//!   becomes `***`. A password holding `/` or `?` (a URL the parser refused) is still covered;
//!   an `@` in a path or query over-redacts, never under-redacts.
//! * [`sanitize`]: every control character (C0, DEL, C1) and every bidirectional override or
//!   isolate, every zero-width or invisible mark (`U+200B`–`U+200F`, `U+061C`, the byte order
//!   mark `U+FEFF`) and the line and paragraph separators (`U+2028`, `U+2029`) is replaced by
//!   its escape (`\x1b`, `\n`, `\u{202e}`), so server text can neither move the cursor,
//!   colour the terminal, forge a line, reorder what is shown nor hide a character in it.
//! * [`without_bom`]: a file's text without the UTF-8 byte order mark some editors put first.

use std::borrow::Cow;
use std::fmt::Write as _;

/// What replaces a URL's user info.
pub const REDACTED: &str = "***";

/// `text` with the user info of every URL in it replaced by [`REDACTED`]:
/// `http://u:pw@h/x` becomes `http://***@h/x`.
pub fn redact_userinfo(text: &str) -> Cow<'_, str> {
    if !text.contains("://") || !text.contains('@') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let token_end = tail.find(ends_token).unwrap_or(tail.len());
        match tail[..token_end].rfind('@') {
            Some(userinfo_end) => {
                out.push_str(REDACTED);
                rest = &tail[userinfo_end..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

fn ends_token(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`')
}

/// True for characters a terminal acts on or that reorder text: C0, DEL, C1, and Unicode's
/// bidirectional embeddings, overrides and isolates.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{061c}'
                | '\u{feff}'
        )
}

/// `text` with every unsafe character escaped (see the module's contract).
pub fn sanitize(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_unsafe(c) && (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` as it may be shown: URLs without user info, control characters escaped.
pub fn for_people(text: &str) -> String {
    sanitize(&redact_userinfo(text)).into_owned()
}

/// `text`, a file's contents, without a leading UTF-8 byte order mark (`U+FEFF`, which
/// Windows editors write first): list, checksum and credential files are read as if it were
/// not there.
pub fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_and_password_are_replaced_in_every_url_of_a_line() {
        assert_eq!(
            redact_userinfo("http://u:s3cret@h:99999/x: invalid port number"),
            "http://***@h:99999/x: invalid port number"
        );
        assert_eq!(
            redact_userinfo("a ftp://bob@h/f and \"socks5h://x:y@p:1\" b"),
            "a ftp://***@h/f and \"socks5h://***@p:1\" b"
        );
        assert_eq!(redact_userinfo("http://h/x"), "http://h/x");
        assert_eq!(redact_userinfo("mail me@h"), "mail me@h");
    }

    #[test]
    fn a_password_the_url_parser_refused_is_still_redacted() {
        for url in [
            "http://u:pa/ss@h/x",
            "http://u:pa?ss@h/x",
            "http://u:p@ss@h/x",
            "sftp://u:p#ss@h:22/f",
        ] {
            let shown = redact_userinfo(url);
            assert!(!shown.contains("ss@"), "{url} shown as {shown}");
            assert!(!shown.contains("u:"), "{url} shown as {shown}");
            assert!(
                shown.ends_with("@h/x") || shown.ends_with("@h:22/f"),
                "{shown}"
            );
        }
    }

    #[test]
    fn control_characters_and_bidi_overrides_are_escaped() {
        assert_eq!(
            sanitize("550 no\r\n\x1b[31mred"),
            "550 no\\r\\n\\x1b[31mred"
        );
        assert_eq!(sanitize("a\u{202e}b\u{9b}c\x7f"), "a\\u{202e}b\\x9bc\\x7f");
        assert_eq!(sanitize("plain déjà vu"), "plain déjà vu");
        assert_eq!(
            for_people("http://u:p@h/x: 530\x07 denied"),
            "http://***@h/x: 530\\x07 denied"
        );
    }

    #[test]
    fn invisible_marks_and_line_separators_are_escaped() {
        assert_eq!(
            sanitize("\u{feff}http://h/x\u{200b}y\u{2028}z\u{061c}"),
            "\\u{feff}http://h/x\\u{200b}y\\u{2028}z\\u{61c}"
        );
        assert_eq!(sanitize("zwj\u{200d}-free text"), "zwj\\u{200d}-free text");
    }

    #[test]
    fn a_leading_byte_order_mark_is_dropped_and_nothing_else() {
        assert_eq!(without_bom("\u{feff}http://h/x\n"), "http://h/x\n");
        assert_eq!(without_bom("http://h/x\u{feff}"), "http://h/x\u{feff}");
        assert_eq!(without_bom("\u{feff}\u{feff}x"), "\u{feff}x");
        assert_eq!(without_bom(""), "");
    }
}
