//! FTP awareness: passive-mode replies on a control connection are rewritten so the client's
//! data connection crosses the same link.
//!
//! `227 … (h1,h2,h3,h4,p1,p2)` and `229 … (|||port|)` replies from the origin get a one-shot
//! data listener on the proxy's address (the address the client reached the proxy on) that
//! forwards to the announced data port; the reply is rewritten to name that listener. The
//! upstream host of a 227 reply is the announced one when it is a loopback address, else the
//! control connection's upstream address (servers behind NAT announce addresses that do not
//! apply); a 229 reply names no host, so the control connection's upstream address is used.
//! Active mode (`PORT`/`EPRT`) is not rewritten.

use super::conn::open_data_listener;
use super::net::{LinkRt, Net};
use bytes::BytesMut;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// A reply line longer than this is passed through without being inspected.
const MAX_LINE: usize = 4096;

/// Rewrites passive-mode replies in the origin → client byte stream of a control connection.
pub(crate) struct FtpRewriter {
    net: Arc<Net>,
    link: Arc<LinkRt>,
    proxy_ip: IpAddr,
    upstream_ip: IpAddr,
    /// The start of a line that may still turn out to be a 227/229 reply.
    held: BytesMut,
    /// Inside a line already passed through (not at a line start).
    mid_line: bool,
}

impl FtpRewriter {
    pub fn new(net: Arc<Net>, link: Arc<LinkRt>, proxy_ip: IpAddr, upstream_ip: IpAddr) -> Self {
        FtpRewriter {
            net,
            link,
            proxy_ip,
            upstream_ip,
            held: BytesMut::new(),
            mid_line: false,
        }
    }

    /// Takes bytes from the origin; returns the bytes to forward now.
    pub fn feed(&mut self, input: &[u8]) -> BytesMut {
        let mut out = BytesMut::with_capacity(input.len() + 32);
        let mut rest = input;
        while !rest.is_empty() {
            let nl = rest.iter().position(|&b| b == b'\n');
            let (piece, complete) = match nl {
                Some(i) => (&rest[..=i], true),
                None => (rest, false),
            };
            rest = &rest[piece.len()..];
            if self.mid_line {
                out.extend_from_slice(piece);
                self.mid_line = !complete;
                continue;
            }
            self.held.extend_from_slice(piece);
            if complete {
                let line = self.held.split();
                out.extend_from_slice(&self.rewrite(&line));
            } else if !may_be_pasv(&self.held) || self.held.len() > MAX_LINE {
                out.extend_from_slice(&self.held.split());
                self.mid_line = true;
            }
        }
        out
    }

    /// The origin closed: whatever is held goes out as it is.
    pub fn finish(&mut self) -> BytesMut {
        self.held.split()
    }

    fn rewrite(&self, line: &[u8]) -> Vec<u8> {
        let Ok(text) = std::str::from_utf8(line) else {
            return line.to_vec();
        };
        let rewritten = if text.starts_with("227") {
            self.rewrite_227(text)
        } else if text.starts_with("229") {
            self.rewrite_229(text)
        } else {
            None
        };
        match rewritten {
            Some(s) => s.into_bytes(),
            None => line.to_vec(),
        }
    }

    fn listen_for(&self, upstream: SocketAddr) -> Option<SocketAddr> {
        match open_data_listener(&self.net, &self.link, self.proxy_ip, upstream) {
            Ok(a) => Some(a),
            Err(e) => {
                tracing::warn!(error = %e, "faultnet: cannot open an FTP data listener");
                None
            }
        }
    }

    fn rewrite_227(&self, text: &str) -> Option<String> {
        let (start, end, nums) = find_six_numbers(text)?;
        let announced = IpAddr::V4(Ipv4Addr::new(nums[0], nums[1], nums[2], nums[3]));
        let port = u16::from(nums[4]) << 8 | u16::from(nums[5]);
        let host = if announced.is_loopback() {
            announced
        } else {
            self.upstream_ip
        };
        let IpAddr::V4(proxy_v4) = self.proxy_ip else {
            return None;
        };
        let local = self.listen_for(SocketAddr::new(host, port))?;
        let [a, b, c, d] = proxy_v4.octets();
        let p = local.port();
        Some(format!(
            "{}{a},{b},{c},{d},{},{}{}",
            &text[..start],
            p >> 8,
            p & 0xff,
            &text[end..]
        ))
    }

    fn rewrite_229(&self, text: &str) -> Option<String> {
        let open = text.find('(')?;
        let inner = &text[open + 1..];
        let close = inner.find(')')?;
        let body = &inner[..close];
        let delim = body.chars().next()?;
        let parts: Vec<&str> = body.split(delim).collect();
        // "|||port|" splits into ["", "", "", "port", ""].
        if parts.len() != 5 {
            return None;
        }
        let port: u16 = parts[3].parse().ok()?;
        let local = self.listen_for(SocketAddr::new(self.upstream_ip, port))?;
        Some(format!(
            "{}({d}{d}{d}{}{d}){}",
            &text[..open],
            local.port(),
            &inner[close + 1..],
            d = delim
        ))
    }
}

/// Whether a line start could still become a 227 or 229 reply.
fn may_be_pasv(held: &[u8]) -> bool {
    let n = held.len().min(3);
    held[..n] == b"227"[..n] || held[..n] == b"229"[..n]
}

/// Finds six comma-separated numbers 0–255 after the reply code; returns their byte span.
fn find_six_numbers(text: &str) -> Option<(usize, usize, [u8; 6])> {
    let b = text.as_bytes();
    let mut i = 3;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let start = i;
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_digit() || b[j] == b',') {
                j += 1;
            }
            let parts: Vec<&str> = text[start..j].split(',').collect();
            if parts.len() == 6 {
                let mut nums = [0u8; 6];
                let mut ok = true;
                for (k, p) in parts.iter().enumerate() {
                    match p.parse::<u8>() {
                        Ok(v) => nums[k] = v,
                        Err(_) => ok = false,
                    }
                }
                if ok {
                    return Some((start, j, nums));
                }
            }
            i = j;
        } else {
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_numbers_are_found_in_a_227_reply() {
        let t = "227 Entering Passive Mode (127,0,0,1,195,80).\r\n";
        let (s, e, n) = find_six_numbers(t).unwrap();
        assert_eq!(&t[s..e], "127,0,0,1,195,80");
        assert_eq!(n, [127, 0, 0, 1, 195, 80]);
        assert!(find_six_numbers("227 nothing here\r\n").is_none());
    }

    #[test]
    fn a_line_start_is_held_only_while_it_may_be_a_passive_reply() {
        assert!(may_be_pasv(b"22"));
        assert!(may_be_pasv(b"229 Ent"));
        assert!(!may_be_pasv(b"150 "));
        assert!(!may_be_pasv(b"226 Transfer complete"));
    }
}
