//! Reading a Metalink document: RFC 5854 (`.meta4`, namespace
//! `urn:ietf:params:xml:ns:metalink`) and Metalink 3.0 (`.metalink`, namespace
//! `http://www.metalinker.org/`), with roxmltree. Elements are matched by local name within
//! the document's namespace; anything else is ignored.

use roxmltree::{Document, Node};

const NS_V4: &str = "urn:ietf:params:xml:ns:metalink";
const NS_V3: &str = "http://www.metalinker.org/";

/// A Metalink document: its files, in document order.
#[derive(Debug, Clone, PartialEq)]
pub struct Metalink {
    /// The `<file>` entries.
    pub files: Vec<MetaFile>,
}

/// One `<file>`: an object and where it can be fetched.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaFile {
    /// The `name` attribute.
    pub name: String,
    /// `<size>`, when given.
    pub size: Option<u64>,
    /// Whole-file hashes.
    pub hashes: Vec<Hash>,
    /// Piece hashes: one list per `<pieces>` element, in document order.
    pub pieces: Vec<PieceList>,
    /// The mirrors, best first (RFC 5854 `priority` ascending, 3.0 `preference` descending;
    /// ties in document order).
    pub mirrors: Vec<Mirror>,
}

/// One `<url>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Mirror {
    /// The URL.
    pub url: String,
    /// Its rank: lower is preferred (RFC 5854 `priority`; 3.0 `preference` p becomes
    /// `101 - p`); unranked mirrors come last.
    pub rank: u32,
    /// The `location` attribute (an ISO 3166 country code), when given.
    pub location: Option<String>,
}

/// A hash: its algorithm, as named in the document but lower case without dashes (`sha256`),
/// and its value, lower-case hex.
#[derive(Debug, Clone, PartialEq)]
pub struct Hash {
    /// `sha256`, `sha1`, `md5`, ...
    pub algo: String,
    /// Lower-case hex.
    pub hex: String,
}

/// `<pieces length="L" type="T">`: the hash of every `L` bytes from byte 0, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct PieceList {
    /// Bytes per piece.
    pub length: u64,
    /// The algorithm, as in [`Hash::algo`].
    pub algo: String,
    /// One lower-case hex value per piece.
    pub hashes: Vec<String>,
}

/// Why a Metalink document was refused, in its own words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not well-formed XML.
    #[error("not well-formed XML: {0}")]
    Xml(String),
    /// The root is not a Metalink element of either version.
    #[error("not a Metalink document (the root element is <{0}>)")]
    NotMetalink(String),
    /// A value that does not parse.
    #[error("<{element}> {what}")]
    Bad {
        /// The element.
        element: &'static str,
        /// What is wrong.
        what: String,
    },
    /// No `<file>` entry.
    #[error("no <file> entry")]
    NoFile,
}

/// Parses a Metalink document of either version.
pub fn parse(text: &str) -> Result<Metalink, ParseError> {
    let doc = Document::parse(text).map_err(|e| ParseError::Xml(e.to_string()))?;
    let root = doc.root_element();
    let ns = root.tag_name().namespace().unwrap_or_default();
    if root.tag_name().name() != "metalink" || !(ns == NS_V4 || ns == NS_V3) {
        return Err(ParseError::NotMetalink(root.tag_name().name().to_owned()));
    }
    let v3 = ns == NS_V3;
    let file_nodes: Vec<Node> = if v3 {
        children(root, "files")
            .flat_map(|f| children(f, "file"))
            .collect()
    } else {
        children(root, "file").collect()
    };
    let files = file_nodes
        .into_iter()
        .map(|f| file(f, v3))
        .collect::<Result<Vec<_>, _>>()?;
    if files.is_empty() {
        return Err(ParseError::NoFile);
    }
    Ok(Metalink { files })
}

fn children<'a, 'i>(n: Node<'a, 'i>, name: &'static str) -> impl Iterator<Item = Node<'a, 'i>> {
    let ns = n.tag_name().namespace().map(str::to_owned);
    n.children().filter(move |c| {
        c.is_element() && c.tag_name().name() == name && c.tag_name().namespace() == ns.as_deref()
    })
}

fn text(n: Node) -> String {
    n.text().unwrap_or_default().trim().to_owned()
}

fn bad(element: &'static str, what: impl Into<String>) -> ParseError {
    ParseError::Bad {
        element,
        what: what.into(),
    }
}

fn file(f: Node, v3: bool) -> Result<MetaFile, ParseError> {
    let name = f
        .attribute("name")
        .map(str::to_owned)
        .ok_or_else(|| bad("file", "has no name attribute"))?;
    let size = children(f, "size")
        .next()
        .map(|s| {
            text(s)
                .parse::<u64>()
                .map_err(|_| bad("size", format!("{:?} is not a byte count", text(s))))
        })
        .transpose()?;
    // 3.0 keeps hashes and pieces in <verification>, and mirrors in <resources>.
    let holders: Vec<Node> = if v3 {
        children(f, "verification").collect()
    } else {
        vec![f]
    };
    let hashes = holders
        .iter()
        .flat_map(|h| children(*h, "hash"))
        .map(|h| hash(h, h.attribute("type")))
        .collect::<Result<Vec<_>, _>>()?;
    let pieces = holders
        .iter()
        .flat_map(|h| children(*h, "pieces"))
        .map(pieces)
        .collect::<Result<Vec<_>, _>>()?;
    let url_holders: Vec<Node> = if v3 {
        children(f, "resources").collect()
    } else {
        vec![f]
    };
    // 3.0's <url type="bittorrent|magnet|ed2k"> names a document of another protocol (a
    // .torrent, a magnet link), not a mirror of the bytes: skipped, as aria2c does.
    let mut mirrors = url_holders
        .iter()
        .flat_map(|h| children(*h, "url"))
        .filter(|u| !(v3 && matches!(u.attribute("type"), Some("bittorrent" | "magnet" | "ed2k"))))
        .map(|u| mirror(u, v3))
        .collect::<Result<Vec<_>, _>>()?;
    mirrors.retain(|m| !m.url.is_empty());
    mirrors.sort_by_key(|m| m.rank);
    Ok(MetaFile {
        name,
        size,
        hashes,
        pieces,
        mirrors,
    })
}

fn algo_name(t: &str) -> String {
    t.to_ascii_lowercase().replace('-', "")
}

fn hash(h: Node, kind: Option<&str>) -> Result<Hash, ParseError> {
    let algo = algo_name(kind.ok_or_else(|| bad("hash", "has no type attribute"))?);
    let hex = text(h).to_ascii_lowercase();
    if hex.is_empty() || hex.len() % 2 != 0 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(bad("hash", format!("of type {algo} is not a hex digest")));
    }
    Ok(Hash { algo, hex })
}

fn pieces(p: Node) -> Result<PieceList, ParseError> {
    let length = p
        .attribute("length")
        .and_then(|l| l.trim().parse::<u64>().ok())
        .filter(|&l| l > 0)
        .ok_or_else(|| bad("pieces", "needs a length attribute of one byte or more"))?;
    let kind = p.attribute("type");
    let algo = algo_name(kind.ok_or_else(|| bad("pieces", "has no type attribute"))?);
    let hashes = children(p, "hash")
        .map(|h| hash(h, kind).map(|h| h.hex))
        .collect::<Result<Vec<_>, _>>()?;
    if hashes.is_empty() {
        return Err(bad("pieces", "holds no <hash>"));
    }
    Ok(PieceList {
        length,
        algo,
        hashes,
    })
}

fn mirror(u: Node, v3: bool) -> Result<Mirror, ParseError> {
    let number = |attr: &str| -> Result<Option<u32>, ParseError> {
        u.attribute(attr)
            .map(|v| {
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| bad("url", format!("{attr}={v:?} is not a whole number")))
            })
            .transpose()
    };
    let rank = if v3 {
        number("preference")?.map(|p| 101u32.saturating_sub(p.min(100)))
    } else {
        number("priority")?
    };
    Ok(Mirror {
        url: text(u),
        rank: rank.unwrap_or(u32::MAX),
        location: u.attribute("location").map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const V4: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<metalink xmlns="urn:ietf:params:xml:ns:metalink">
  <file name="example.bin">
    <size>10</size>
    <hash type="sha-256">ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789</hash>
    <pieces length="4" type="sha-256">
      <hash>00</hash><hash>11</hash><hash>22</hash>
    </pieces>
    <url priority="2" location="de">http://b.example/x</url>
    <url priority="1">http://a.example/x</url>
    <url>http://c.example/x</url>
    <metaurl mediatype="torrent">http://t.example/x.torrent</metaurl>
  </file>
  <file name="second.bin"><url>http://a.example/y</url></file>
</metalink>"#;

    const V3: &str = r#"<?xml version="1.0"?>
<metalink version="3.0" xmlns="http://www.metalinker.org/">
  <files>
    <file name="old.bin">
      <size>8</size>
      <verification>
        <hash type="md5">900150983cd24fb0d6963f7d28e17f72</hash>
        <pieces length="4" type="sha1"><hash piece="0">aa</hash><hash piece="1">bb</hash></pieces>
      </verification>
      <resources>
        <url type="http" preference="10">http://low.example/old.bin</url>
        <url type="http" location="fr" preference="100">http://high.example/old.bin</url>
        <url type="bittorrent" preference="100">http://high.example/old.bin.torrent</url>
      </resources>
    </file>
  </files>
</metalink>"#;

    #[test]
    fn an_rfc5854_document_gives_mirrors_by_priority_size_hashes_and_pieces() {
        let m = parse(V4).unwrap();
        assert_eq!(m.files.len(), 2);
        let f = &m.files[0];
        assert_eq!(f.name, "example.bin");
        assert_eq!(f.size, Some(10));
        assert_eq!(f.hashes[0].algo, "sha256");
        assert!(f.hashes[0].hex.starts_with("abcdef"));
        let urls: Vec<&str> = f.mirrors.iter().map(|m| m.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "http://a.example/x",
                "http://b.example/x",
                "http://c.example/x"
            ]
        );
        assert_eq!(f.mirrors[1].location.as_deref(), Some("de"));
        let p = &f.pieces[0];
        assert_eq!(
            (p.length, p.algo.as_str(), p.hashes.len()),
            (4, "sha256", 3)
        );
    }

    #[test]
    fn a_metalink_3_document_ranks_mirrors_by_preference_and_skips_torrents() {
        let m = parse(V3).unwrap();
        let f = &m.files[0];
        let urls: Vec<&str> = f.mirrors.iter().map(|m| m.url.as_str()).collect();
        assert_eq!(
            urls,
            ["http://high.example/old.bin", "http://low.example/old.bin"],
            "the .torrent is not a mirror"
        );
        assert_eq!(f.mirrors[0].location.as_deref(), Some("fr"));
        assert_eq!(f.hashes[0].algo, "md5");
        assert_eq!(f.pieces[0].algo, "sha1");
    }

    #[test]
    fn bad_documents_are_refused_in_one_line_naming_the_element() {
        assert!(matches!(parse("<metalink"), Err(ParseError::Xml(_))));
        assert_eq!(
            parse("<html/>"),
            Err(ParseError::NotMetalink("html".into()))
        );
        let no_ns = "<metalink><file name='a'/></metalink>";
        assert!(matches!(parse(no_ns), Err(ParseError::NotMetalink(_))));
        let empty = format!("<metalink xmlns='{NS_V4}'/>");
        assert_eq!(parse(&empty), Err(ParseError::NoFile));
        let size =
            format!("<metalink xmlns='{NS_V4}'><file name='a'><size>lots</size></file></metalink>");
        assert_eq!(
            parse(&size).unwrap_err().to_string(),
            "<size> \"lots\" is not a byte count"
        );
        let pieces = format!(
            "<metalink xmlns='{NS_V4}'><file name='a'><pieces length='0' type='sha-256'>\
             <hash>00</hash></pieces></file></metalink>"
        );
        assert!(parse(&pieces)
            .unwrap_err()
            .to_string()
            .starts_with("<pieces>"));
        let hash = format!(
            "<metalink xmlns='{NS_V4}'><file name='a'><hash type='sha-256'>xyz</hash></file></metalink>"
        );
        assert!(parse(&hash).unwrap_err().to_string().starts_with("<hash>"));
    }
}
