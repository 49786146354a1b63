//! An `s3://` scheme for hydra, written as a third party would: outside hydra's workspace,
//! against hydra's plugin contract only.
//!
//! An object is named `s3://bucket/key` (the endpoint comes from [`S3Options::endpoint`],
//! which the binary takes from `AWS_ENDPOINT_URL`, else AWS's regional endpoint) or, for an
//! S3-compatible server at a given address, `s3+http://host:port/bucket/key` (`s3+https://`
//! likewise; path-style addressing). Every probe and fetch is a GET presigned with AWS
//! Signature V4 and handed to hydra's HTTP scheme, so ranges, pooling, validators (S3's
//! `ETag`) and every safety rule of that scheme hold unchanged. Errors name the `s3://` URL,
//! never the presigned one (it carries the access key id and a signature).

mod credentials;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hydra_scheme::{
    Capabilities, Endpoint, ErrorKind, FetchOutcome, FetchRequest, Probe, Scheme, SchemeError, Url,
    Validator,
};
use hydra_scheme_http::{HttpOptions, HttpScheme};
use rusty_s3::{Bucket, S3Action, UrlStyle};

pub use credentials::{load_credentials, CredentialsError};
pub use rusty_s3::Credentials;

/// How long a presigned request stays valid. A fetch is signed when it starts, so this bounds
/// the time between signing and the server reading the request, not the transfer.
pub const SIGNATURE_TTL: Duration = Duration::from_secs(15 * 60);

/// Options of [`S3Scheme`].
#[derive(Debug, Clone)]
pub struct S3Options {
    /// The endpoint of `s3://` URLs (`https://s3.eu-west-1.amazonaws.com`).
    pub endpoint: Url,
    /// The region signed into every request.
    pub region: String,
    /// The signing credentials; `None` sends unsigned requests (public buckets).
    pub credentials: Option<Credentials>,
    /// The HTTP scheme's options (timeouts, TLS, proxy).
    pub http: HttpOptions,
}

impl S3Options {
    /// AWS's endpoint for `region`, with `credentials`.
    pub fn aws(region: &str, credentials: Option<Credentials>) -> Self {
        let endpoint = Url::parse(&format!("https://s3.{region}.amazonaws.com"))
            .unwrap_or_else(|_| Url::parse("https://s3.amazonaws.com").expect("a literal URL"));
        S3Options {
            endpoint,
            region: region.to_owned(),
            credentials,
            http: HttpOptions::default(),
        }
    }
}

/// The `s3`, `s3+http` and `s3+https` URL schemes over hydra's HTTP scheme.
pub struct S3Scheme {
    http: HttpScheme,
    opts: S3Options,
}

impl std::fmt::Debug for S3Scheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Scheme")
            .field("endpoint", &self.opts.endpoint.as_str())
            .field("region", &self.opts.region)
            .field("signed", &self.opts.credentials.is_some())
            .finish()
    }
}

impl S3Scheme {
    /// A scheme with these options.
    pub fn new(opts: S3Options) -> Result<Self, String> {
        let http = HttpScheme::new(opts.http.clone()).map_err(|e| e.to_string())?;
        Ok(S3Scheme { http, opts })
    }

    /// The presigned HTTP endpoint for `endpoint`'s object.
    fn presigned(&self, endpoint: &Endpoint) -> Result<Endpoint, SchemeError> {
        let refuse = |why: String| SchemeError::new(endpoint, ErrorKind::Unsupported(why));
        let object = ObjectName::of(endpoint, &self.opts.endpoint).map_err(refuse)?;
        let bucket = Bucket::new(
            object.endpoint,
            UrlStyle::Path,
            object.bucket,
            self.opts.region.clone(),
        )
        .map_err(|e| refuse(format!("bad S3 endpoint: {e}")))?;
        let url = bucket
            .get_object(self.opts.credentials.as_ref(), &object.key)
            .sign(SIGNATURE_TTL);
        let mut signed =
            Endpoint::from_url(url).map_err(|e| refuse(format!("bad presigned URL: {e}")))?;
        for (name, value) in endpoint.headers() {
            signed = signed.with_header(name, value);
        }
        Ok(signed)
    }
}

/// Where an S3 URL's object lives.
struct ObjectName {
    endpoint: Url,
    bucket: String,
    key: String,
}

impl ObjectName {
    /// `s3://bucket/key` at `default_endpoint`, or `s3+http(s)://host:port/bucket/key`.
    fn of(endpoint: &Endpoint, default_endpoint: &Url) -> Result<ObjectName, String> {
        let url = endpoint.url();
        let path = endpoint
            .decoded_path()
            .ok_or_else(|| "the key is not UTF-8".to_owned())?;
        let path = path.trim_start_matches('/');
        let (server, bucket, key) = match url.scheme() {
            "s3" => (default_endpoint.clone(), endpoint.host().to_owned(), path),
            "s3+http" | "s3+https" => {
                let (bucket, key) = path
                    .split_once('/')
                    .ok_or_else(|| "no key after the bucket".to_owned())?;
                let scheme = &url.scheme()["s3+".len()..];
                let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
                let server = Url::parse(&format!("{scheme}://{}{port}", endpoint.host()))
                    .map_err(|e| format!("bad endpoint: {e}"))?;
                (server, bucket.to_owned(), key)
            }
            other => return Err(format!("not an S3 URL scheme: {other}")),
        };
        if bucket.is_empty() || key.is_empty() {
            return Err("an S3 URL names a bucket and a key".into());
        }
        Ok(ObjectName {
            endpoint: server,
            bucket,
            key: key.to_owned(),
        })
    }
}

/// S3's `ETag` as a weak validator. It identifies one object version within S3 (every fetch
/// is still checked against it, and a resume still requires it unchanged), but it is an MD5
/// or a multipart digest that no other server's `ETag` ever equals: reported strong, it would
/// make hydra refuse to combine an S3 bucket with an HTTP mirror of the same bytes (two strong
/// validators that differ mean two objects, `docs/plugin-contract.md`, "Validators").
fn service_token(v: Validator) -> Validator {
    match v {
        Validator::Strong(t) | Validator::Weak(t) => Validator::Weak(t),
    }
}

/// The same error, naming the `s3://` URL instead of the presigned one.
fn renamed(mut e: SchemeError, endpoint: &Endpoint) -> SchemeError {
    e.endpoint = endpoint.to_string();
    e
}

#[async_trait]
impl Scheme for S3Scheme {
    fn name(&self) -> &str {
        "s3"
    }

    fn url_schemes(&self) -> &[&'static str] {
        &["s3", "s3+http", "s3+https"]
    }

    fn capabilities(&self) -> Capabilities {
        self.http.capabilities()
    }

    async fn probe(&self, endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        let signed = self.presigned(endpoint)?;
        let mut probe = self
            .http
            .probe(&signed)
            .await
            .map_err(|e| renamed(e, endpoint))?;
        probe.validator = probe.validator.map(service_token);
        Ok(probe)
    }

    async fn fetch(&self, request: FetchRequest) -> FetchOutcome {
        let original = request.endpoint.clone();
        let signed = match self.presigned(&original) {
            Ok(s) => s,
            Err(e) => return FetchOutcome::Failed(e),
        };
        // The HTTP scheme checks every response against the ETag as S3 sends it: strong.
        let mut expect = request.expect.clone();
        expect.validator = expect.validator.map(|v| match v {
            Validator::Strong(t) | Validator::Weak(t) => Validator::Strong(t),
        });
        let request = FetchRequest {
            endpoint: Arc::new(signed),
            expect,
            ..request
        };
        match self.http.fetch(request).await {
            FetchOutcome::Failed(e) => FetchOutcome::Failed(renamed(e, &original)),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(url: &str) -> Result<ObjectName, String> {
        let default = Url::parse("https://s3.eu-west-1.amazonaws.com").unwrap();
        ObjectName::of(&Endpoint::parse(url).unwrap(), &default)
    }

    #[test]
    fn an_s3_url_names_bucket_and_key_at_the_default_endpoint() {
        let o = object("s3://my-bucket/dir/a%20b.iso").unwrap();
        assert_eq!(o.endpoint.as_str(), "https://s3.eu-west-1.amazonaws.com/");
        assert_eq!(
            (o.bucket.as_str(), o.key.as_str()),
            ("my-bucket", "dir/a b.iso")
        );
    }

    #[test]
    fn an_s3_http_url_names_its_own_endpoint_and_the_bucket_in_the_path() {
        let o = object("s3+http://127.0.0.1:5000/b/k/x").unwrap();
        assert_eq!(o.endpoint.as_str(), "http://127.0.0.1:5000/");
        assert_eq!((o.bucket.as_str(), o.key.as_str()), ("b", "k/x"));
    }

    #[test]
    fn a_url_without_a_key_is_refused() {
        assert!(object("s3://bucket/").is_err());
        assert!(object("s3+http://127.0.0.1:5000/bucket").is_err());
    }

    #[test]
    fn an_error_names_the_s3_url_never_the_signature() {
        let scheme = S3Scheme::new(S3Options::aws(
            "eu-west-1",
            Some(Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI")),
        ))
        .unwrap();
        let endpoint = Endpoint::parse("s3://bucket/key").unwrap();
        let signed = scheme.presigned(&endpoint).unwrap();
        assert!(signed.to_string().contains("X-Amz-Signature="));
        let e = renamed(
            SchemeError::new(&signed, ErrorKind::Unsupported("x".into())),
            &endpoint,
        );
        assert_eq!(e.to_string(), "s3://bucket/key: unsupported: x");
    }
}
