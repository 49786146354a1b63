//! The libunftp origin's hostile switches, seen by a bare FTP conversation over a socket (not
//! hydra's scheme, which is what they exist to test).

use std::time::Duration;

use hydra_core::ByteRange;
use hydra_scheme_ftp::origin::{object_bytes, Misbehaviour, Origin, OriginConfig, OBJECT};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

const SIZE: u64 = 200_000;
const SEED: u64 = 17;
const LIMIT: Duration = Duration::from_secs(20);

/// One control connection, logged in, binary mode.
struct Control {
    lines: tokio::io::Lines<BufReader<OwnedReadHalf>>,
    write: OwnedWriteHalf,
    addr: std::net::SocketAddr,
}

impl Control {
    async fn open(o: &Origin) -> Control {
        let (r, w) = TcpStream::connect(o.addr())
            .await
            .expect("dial")
            .into_split();
        let mut c = Control {
            lines: BufReader::new(r).lines(),
            write: w,
            addr: o.addr(),
        };
        assert!(c.reply().await.starts_with("220"));
        assert!(c.say("USER anonymous").await.starts_with("331"));
        assert!(c.say("PASS chaos@").await.starts_with("230"));
        assert!(c.say("TYPE I").await.starts_with("200"));
        c
    }

    /// The last line of the next reply (multi-line replies skipped to their end).
    async fn reply(&mut self) -> String {
        loop {
            let line = self
                .lines
                .next_line()
                .await
                .expect("control read")
                .expect("control open");
            if line.len() >= 4 && line.as_bytes()[3] == b' ' {
                return line;
            }
        }
    }

    async fn say(&mut self, command: &str) -> String {
        self.write
            .write_all(format!("{command}\r\n").as_bytes())
            .await
            .expect("control write");
        self.reply().await
    }

    /// `REST offset` (its reply returned), then `RETR` of the object over `EPSV`: every byte
    /// the data connection carried.
    async fn retr_from(&mut self, offset: u64) -> (String, Vec<u8>) {
        let epsv = self.say("EPSV").await;
        let port: u16 = epsv
            .split("|||")
            .nth(1)
            .and_then(|p| p.trim_end_matches(['|', ')']).parse().ok())
            .unwrap_or_else(|| panic!("an EPSV reply with a port: {epsv}"));
        let mut data = TcpStream::connect((self.addr.ip(), port))
            .await
            .expect("data dial");
        let rest = self.say(&format!("REST {offset}")).await;
        assert!(self.say(&format!("RETR {OBJECT}")).await.starts_with("150"));
        let mut got = Vec::new();
        data.read_to_end(&mut got).await.expect("data read");
        assert!(self.reply().await.starts_with("226"));
        (rest, got)
    }
}

async fn origin() -> Origin {
    Origin::start(OriginConfig {
        size: SIZE,
        seed: SEED,
        ftps: None,
    })
    .await
    .expect("origin")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_ignored_acknowledges_the_offset_and_streams_from_byte_zero() {
    let run = async {
        let o = origin().await;
        let mut c = Control::open(&o).await;
        let (rest, got) = c.retr_from(50_000).await;
        assert!(rest.starts_with("350"), "{rest}");
        assert_eq!(got, object_bytes(SEED, ByteRange::new(50_000, SIZE)));

        o.set_misbehaviour(Misbehaviour {
            rest_ignored: true,
            ..Misbehaviour::default()
        });
        let mut c = Control::open(&o).await;
        let (rest, got) = c.retr_from(50_000).await;
        assert!(rest.starts_with("350"), "{rest}");
        assert_eq!(got, object_bytes(SEED, ByteRange::new(0, SIZE)));
    };
    tokio::time::timeout(LIMIT, run).await.expect("bounded");
}
